"""kiln.cuda: the availability functions a torch user calls before choosing a device. This build has
no CUDA backend (issue 19); is_available() says False and kiln.accelerator.explain() says why."""
from . import _C


def is_available():
    return _C._accelerator_is_available()


def device_count():
    return _C._accelerator_device_count()


def is_built():
    return _C._accelerator_built_cuda_version() > 0
