"""A pynvml as a machine without an NVIDIA driver has it: nvmlInit fails with NVML_ERROR_LIBRARY_NOT_FOUND.

On PYTHONPATH ahead of the real one, it makes any machine (a GPU node too) look like the CPU box a newcomer
tries gputop on, so that the no-GPU paths are tested everywhere (tests/test_without_gpu.py)."""

NVML_ERROR_LIBRARY_NOT_FOUND = 12


class NVMLError(Exception):
    def __init__(self, value: int):
        super().__init__(f"NVML error {value}")
        self.value = value


def nvmlInit():
    raise NVMLError(NVML_ERROR_LIBRARY_NOT_FOUND)


def nvmlShutdown():
    pass
