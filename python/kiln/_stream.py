"""kiln.stream(s): the context manager that makes a stream current (torch.cuda.stream's form; None
changes nothing). The streams themselves are kiln._C.Stream / Event (kiln/core/stream.h)."""
import atexit

from . import _C


@atexit.register
def _drain_streams_at_exit():
    # queued kernels may hold memory lent by Python objects (numpy arrays): they run out while the
    # interpreter is alive; an error a worker kept has no one left to raise it to
    try:
        _C._synchronize_streams()
    except Exception:
        pass


class StreamContext:
    def __init__(self, stream):
        if stream is not None and not isinstance(stream, _C.Stream):
            raise TypeError(f"stream(): expected a kiln.Stream or None, got {type(stream).__name__}")
        self.stream = stream
        self.prev = None

    def __enter__(self):
        if self.stream is not None:
            self.prev = _C.current_stream()
            _C.set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc):
        if self.stream is not None:
            _C.set_stream(self.prev)
        return False


def stream(stream):
    return StreamContext(stream)
