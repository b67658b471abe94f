"""The factories of rota's own backends (``rota.server.factory.BackendFactory``), one module
each, registered by name in ``rota.server.backends``."""
