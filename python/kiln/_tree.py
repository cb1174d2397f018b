"""The tensors inside a nest of lists, tuples and dicts, in order (what kiln.compile and
DistributedDataParallel look for in arguments and outputs)."""
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
