"""The tensors inside a nest of lists, tuples and dicts, in order (what kiln.compile,
make_graphed_callables and DistributedDataParallel look for in arguments and outputs), and the nest
rebuilt with other tensors in their places."""
from . import _C


def tensors_in(obj, acc=None):
    acc = [] if acc is None else acc
    if isinstance(obj, _C.Tensor):
        acc.append(obj)
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            tensors_in(x, acc)
    elif isinstance(obj, dict):
        for x in obj.values():
            tensors_in(x, acc)
    return acc


def rebuild(obj, it):
    """`obj` with its tensors replaced, in order, by the items of `it` (lists, tuples, namedtuples,
    dicts)."""
    if isinstance(obj, _C.Tensor):
        return next(it)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(rebuild(x, it) for x in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(rebuild(x, it) for x in obj)
    if isinstance(obj, dict):
        return type(obj)((k, rebuild(v, it)) for k, v in obj.items())
    return obj
