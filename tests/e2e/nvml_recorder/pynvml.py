"""A ``pynvml`` that records each ``nvmlInit`` (a line in the file ``ROTA_TEST_NVML_CALLS``
names) and then answers as a machine without an NVIDIA driver does: so a test sees whether a
process probed this machine's GPUs, on a machine with or without them."""

import os

NVML_ERROR_DRIVER_NOT_LOADED = 9


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value


def nvmlInit() -> None:
    with open(os.environ["ROTA_TEST_NVML_CALLS"], "a") as calls:
        calls.write(f"nvmlInit {os.getpid()}\n")
    raise NVMLError(NVML_ERROR_DRIVER_NOT_LOADED)
