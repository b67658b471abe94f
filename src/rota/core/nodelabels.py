"""The node labels rota reads and writes beside a node's own: what a backend reports about a
node for people (``rota nodes``, the dashboard), not for placement. It imports nothing, so
that the fast ``rota nodes`` (``rota.cli.fast``) reads them without the domain model."""

# the label a backend sets on a node while its GPU-memory shares are not enforced (why, in words)
GPU_MEMORY_ENFORCEMENT = "rota.dev/gpu-memory-enforcement"
# the label a backend sets on a node to say how a job's CPU, memory and process limits are
# enforced there ("cpu/memory/pids: cgroup v1"), or "not enforced: <why>"
JOB_LIMITS = "rota.dev/job-limits"
# the label the local backend sets on its node to say how it runs container images ("podman
# 4.3.1"), or "not available: <why>" (a job that names an image is then refused at submit)
CONTAINER_IMAGES = "rota.dev/containers"
# the label NVML inventory sets: the devices' full names as NVML reports them
PRODUCT = "nvidia.com/gpu.product"
