"""The Kubernetes side of rota, as pure translations: no I/O, and no import of the
``kubernetes`` client here (the backend that talks to the API server imports it on use).

``quantity`` parses resource quantities as the API server does; ``names`` holds the labels,
annotations and resource names rota reads and writes; ``nodes`` turns a Node object into
rota's ``Node``; ``hami`` reads and writes HAMi's device annotations; ``pods`` builds the Pod
rota creates for one replica of a placed job.
"""
