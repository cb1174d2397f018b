"""kiln.ops: every op of kiln's op table, called through its schema (as torch.ops.aten).

`kiln.ops.add(x, y, alpha=2)`, `kiln.ops.logaddexp(a, b, out=o)`: the arguments are matched to the
op's schema (`kiln.ops.add.schema`), defaults come from it, and the call goes through the one
dispatch point like every other (autograd, modes, the interpreter lock released around kernels).
Names are the op table's (`kiln.registered_ops()`); the public functions (`kiln.add`) remain the
documented API."""
from . import _C

_cache = {}


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    op = _cache.get(name)
    if op is None:
        op = _cache[name] = _C._op(name)
    return op


def __dir__():
    return sorted(_C.registered_ops())
