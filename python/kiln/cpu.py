"""kiln.cpu: torch.cpu's module. Streams here are kiln's (kiln.Stream): queues with a worker each."""
from . import _C
from ._stream import StreamContext, stream  # noqa: F401

Stream = _C.Stream
Event = _C.Event


def is_available():
    return True


def device_count():
    return 1


def current_device():
    return "cpu"


def set_device(device):
    pass


def current_stream(device=None):
    return _C.current_stream(device)


def synchronize(device=None):
    """Waits for the work queued on every stream."""
    _C._synchronize_streams()
