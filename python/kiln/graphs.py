"""kiln.graph: capture a sequence of ops once, replay it without dispatch (torch.cuda.graph's API on
the CPU; issue 17). kiln.Graph is C++ (kiln/dispatch/graph.h); this is the context manager.

    g = kiln.Graph()
    static_in = kiln.zeros(1, 256)
    with kiln.graph(g):
        static_out = model(static_in)
    static_in.copy_(x); g.replay(); static_out  # the result for x

No warm-up is needed (kiln's first calls allocate nothing a replay depends on). Rules (RuntimeError
during capture): no item()/tolist()/data-dependent branch, no op whose output size depends on data.
"""
from . import _C

Graph = _C.Graph
graph_pool_handle = _C.graph_pool_handle


class graph:
    """Captures the ops run in the block into `kiln_graph`. `pool` (from graph_pool_handle() or
    another graph's pool()) makes graphs share their intermediates' arena: replay them one at a time.
    `stream` makes a stream current during the capture (kernels run on the caller while capturing)."""

    def __init__(self, kiln_graph, pool=None, stream=None, capture_error_mode="global"):
        if pool is not None and not isinstance(pool, _C._GraphPool):
            raise TypeError(f"graph(pool=...): expected kiln.graph_pool_handle() or Graph.pool(), got "
                            f"{type(pool).__name__}")
        self.pool = pool
        if capture_error_mode not in ("global", "thread_local", "relaxed"):
            raise ValueError(f"capture_error_mode must be 'global', 'thread_local' or 'relaxed', got "
                             f"{capture_error_mode!r}")
        self.graph = kiln_graph
        self.stream = stream

    def __enter__(self):
        self._ctx = None
        if self.stream is not None:
            from ._stream import stream as _stream_ctx
            self._ctx = _stream_ctx(self.stream)
            self._ctx.__enter__()
        self.graph.capture_begin(self.pool)

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is None:
                self.graph.capture_end()
            else:
                try:
                    self.graph.capture_end()
                except RuntimeError:
                    pass
                self.graph.reset()
        finally:
            if self._ctx is not None:
                self._ctx.__exit__(None, None, None)
        return False
