"""torch.distributed._functional_collectives: collectives as ops that return new tensors.

Each is one op of kiln's table, so autograd, export and graph capture see it; the `*_autograd` names are
the same differentiable ops (torch keeps separate ones). `group` is a ProcessGroup, None (the world), a
list of global ranks naming an existing group, or a group name (its id as a string).
"""
from .. import _C
from . import ProcessGroup, _group, _groups, get_process_group_ranks

__all__ = ["all_reduce", "all_gather_tensor", "reduce_scatter_tensor", "all_to_all_single",
           "all_reduce_autograd", "all_gather_tensor_autograd", "reduce_scatter_tensor_autograd",
           "all_to_all_single_autograd", "wait_tensor"]


def _gid(group, op):
    if isinstance(group, (list, tuple)):
        want = sorted(int(r) for r in group)
        for g in list(_groups.values()):
            if get_process_group_ranks(g) == want:
                return g._pg.id
        raise ValueError(f"[{op}] no process group has ranks {want}; make one with new_group first")
    if isinstance(group, str):
        if group.isdigit() and int(group) in _groups:
            return int(group)
        raise ValueError(f"[{op}] unknown group name {group!r}")
    g = _group(group, op)
    if g is None:
        raise RuntimeError(f"[{op}] this rank is not a member of the group")
    return g._pg.id


def all_reduce(self, reduceOp, group=None, tag=""):  # noqa: N803  (torch's argument name)
    return _C._fc_all_reduce(self, str(reduceOp), _gid(group, "all_reduce"))


def all_gather_tensor(self, gather_dim, group=None, tag=""):
    return _C._fc_all_gather(self, int(gather_dim), _gid(group, "all_gather_tensor"))


def reduce_scatter_tensor(self, reduceOp, scatter_dim, group=None, tag=""):  # noqa: N803
    return _C._fc_reduce_scatter(self, str(reduceOp), int(scatter_dim), _gid(group, "reduce_scatter_tensor"))


def all_to_all_single(self, output_split_sizes, input_split_sizes, group=None, tag=""):
    return _C._fc_all_to_all_single(self, list(output_split_sizes or []), list(input_split_sizes or []),
                                    _gid(group, "all_to_all_single"))


all_reduce_autograd = all_reduce
all_gather_tensor_autograd = all_gather_tensor
reduce_scatter_tensor_autograd = reduce_scatter_tensor
all_to_all_single_autograd = all_to_all_single


def wait_tensor(tensor):
    """kiln's functional collectives complete before they return: the tensor itself."""
    return tensor
