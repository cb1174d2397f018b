"""torch.distributed.nn.functional: collectives that return new tensors and have gradients.

Backward: all_reduce <-> all_reduce of the gradient (SUM, AVG); all_gather <-> reduce_scatter;
reduce_scatter <-> all_gather; all_to_all <-> all_to_all with the splits swapped; broadcast <->
reduce (SUM) to the source, which torch does not define.
"""
from ... import _C
from ...autograd.grad_mode import no_grad
from .. import ReduceOp, _group

__all__ = ["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "all_to_all_single", "broadcast", "reduce"]

_OPS = {ReduceOp.SUM: "sum", ReduceOp.AVG: "avg", ReduceOp.PRODUCT: "product", ReduceOp.MIN: "min",
        ReduceOp.MAX: "max"}


def _gid(group, op):
    g = _group(group, op)
    if g is None:
        raise RuntimeError(f"[{op}] this rank is not a member of the group")
    return g


def _root(g, rank, name, op):
    r = g._pg.group_rank(int(rank))
    if r < 0:
        raise ValueError(f"[{op}] global rank {rank} is not part of {g}")
    return r


def all_reduce(tensor, op=ReduceOp.SUM, group=None):
    g = _gid(group, "all_reduce")
    return _C._fc_all_reduce(tensor, _OPS[ReduceOp._parse(op)], g._pg.id)


def all_gather(tensor, group=None):
    """Every rank's tensor, as a tuple (index = group rank)."""
    g = _gid(group, "all_gather")
    out = _C._fc_all_gather(tensor.unsqueeze(0), 0, g._pg.id)
    return tuple(out.unbind(0))


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None):
    """The reduction of every rank's input_list[r], on rank r; also written into output."""
    g = _gid(group, "reduce_scatter")
    if len(input_list) != g.size():
        raise ValueError(f"[reduce_scatter] expected {g.size()} input tensors (one per rank), got {len(input_list)}")
    out = _C._fc_reduce_scatter(_C.stack(list(input_list)), _OPS[ReduceOp._parse(op)], 0, g._pg.id).squeeze(0)
    with no_grad():
        output.copy_(out.detach())
    return out


def all_to_all(output_tensor_list, input_tensor_list, group=None):
    """input_tensor_list[r] goes to rank r; returns what each rank sent here, shaped as output_tensor_list."""
    g = _gid(group, "all_to_all")
    n = g.size()
    if len(input_tensor_list) != n or len(output_tensor_list) != n:
        raise ValueError(f"[all_to_all] expected {n} input and output tensors (one per rank)")
    flat = _C.cat([t.reshape(-1) for t in input_tensor_list])
    out = _C._fc_all_to_all_single(flat, [o.numel() for o in output_tensor_list],
                                   [t.numel() for t in input_tensor_list], g._pg.id)
    parts = out.split([o.numel() for o in output_tensor_list])
    return tuple(p.reshape(o.shape) for p, o in zip(parts, output_tensor_list))


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None, group=None):
    g = _gid(group, "all_to_all_single")
    return _C._fc_all_to_all_single(input, list(output_split_sizes or []), list(input_split_sizes or []), g._pg.id)


def broadcast(tensor, src, group=None):
    g = _gid(group, "broadcast")
    return _C._fc_broadcast(tensor, _root(g, src, "src", "broadcast"), g._pg.id)


def reduce(tensor, dst, op=ReduceOp.SUM, group=None):
    """The reduction on dst (zeros elsewhere)."""
    g = _gid(group, "reduce")
    return _C._fc_reduce(tensor, _root(g, dst, "dst", "reduce"), _OPS[ReduceOp._parse(op)], g._pg.id)
