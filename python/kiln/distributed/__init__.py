"""kiln.distributed: process groups and collectives on Open MPI (torch.distributed, backend "mpi").

Launch with mpirun (`mpirun -np 2 python train.py`); rank and world size come from MPI. Every
collective takes CPU tensors of any dtype, runs on its group's communication thread (a small all_reduce
waited for at once: on the calling thread when the group is idle), and honours the
group's timeout: a rank that never arrives makes the others raise RuntimeError naming the collective,
the group and the missing rank. Ranks given to the free functions (src, dst) are global ranks, as in
torch; group_src/group_dst are ranks within the group.
"""
import contextlib
import datetime
import enum

from .. import _C

__all__ = ["ReduceOp", "Work", "ProcessGroup", "GroupMember", "group", "is_available", "is_initialized",
           "is_mpi_available", "is_gloo_available", "is_nccl_available", "init_process_group",
           "destroy_process_group", "get_rank", "get_world_size", "get_backend", "new_group", "get_global_rank",
           "get_group_rank", "get_process_group_ranks", "barrier", "all_reduce", "all_gather",
           "all_gather_into_tensor", "all_gather_object", "reduce_scatter", "reduce_scatter_tensor", "all_to_all",
           "all_to_all_single", "broadcast", "broadcast_object_list", "reduce", "gather", "scatter", "send", "recv",
           "isend", "irecv", "DistError", "DistBackendError"]


class DistError(RuntimeError):
    """torch.distributed.DistError."""


class DistBackendError(DistError):
    """torch.distributed.DistBackendError."""


class ReduceOp(enum.IntEnum):
    SUM = 0
    AVG = 1
    PRODUCT = 2
    MIN = 3
    MAX = 4
    # torch's RedOpType spelling: ReduceOp.RedOpType.SUM
    @classmethod
    def _parse(cls, op):
        if isinstance(op, ReduceOp):
            return op
        if isinstance(op, str):
            names = {"sum": 0, "avg": 1, "product": 2, "prod": 2, "min": 3, "max": 4}
            if op.lower() not in names:
                raise ValueError(f"unknown reduce op {op!r}")
            return cls(names[op.lower()])
        if isinstance(op, int) and not isinstance(op, bool) and 0 <= op <= 4:
            return cls(op)
        raise ValueError(f"unknown reduce op {op!r}")


ReduceOp.RedOpType = ReduceOp


def is_available():
    return bool(getattr(_C, "_has_distributed", False))


def is_mpi_available():
    return is_available()


def is_gloo_available():
    return False


def is_nccl_available():
    return False


def _seconds(timeout):
    if timeout is None:
        return None
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    if isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
        return float(timeout)
    raise TypeError(f"timeout must be a datetime.timedelta, got {type(timeout).__name__}")


class Work:
    """The handle of an asynchronous operation (async_op=True, isend, irecv)."""

    def __init__(self, w):
        self._w = w

    def wait(self, timeout=None):
        return self._w.wait(_seconds(timeout))

    def is_completed(self):
        return self._w.is_completed()

    def is_success(self):
        return self._w.is_success()

    def result(self):
        return self._w.result()

    def _source_rank(self):
        return self._w.source


class ProcessGroup:
    """A group of ranks with its own MPI communicator and communication thread."""

    def __init__(self, pg):
        self._pg = pg

    def rank(self):
        return self._pg.rank()

    def size(self):
        return self._pg.size()

    @property
    def ranks(self):
        return list(self._pg.ranks)

    @property
    def group_name(self):
        return str(self._pg.id)

    def name(self):
        return "mpi"

    def __repr__(self):
        return f"<kiln.distributed.ProcessGroup {self._pg.describe()}>"

    def __eq__(self, other):
        return isinstance(other, ProcessGroup) and other._pg.id == self._pg.id

    def __hash__(self):
        return hash(self._pg.id)


class _NonMember:
    def __repr__(self):
        return "GroupMember.NON_GROUP_MEMBER"


class GroupMember:
    WORLD = None  # the default group once initialised
    NON_GROUP_MEMBER = _NonMember()


class group:  # noqa: N801  (torch.distributed.group.WORLD)
    WORLD = None


_groups = {}  # id -> ProcessGroup


def _wrap(pg):
    g = _groups.get(pg.id)
    if g is None or g._pg is not pg:
        g = _groups[pg.id] = ProcessGroup(pg)
    return g


def _check_init(op):
    if not is_initialized():
        raise ValueError("Default process group has not been initialized, please make sure to call "
                         "init_process_group.")


def _group(g, op="distributed"):
    if g is None and GroupMember.WORLD is not None:  # the hot path: set by init, cleared by destroy
        return GroupMember.WORLD
    _check_init(op)
    if g is None:
        return GroupMember.WORLD
    if g is GroupMember.NON_GROUP_MEMBER:
        return None
    if isinstance(g, ProcessGroup):
        return g
    raise TypeError(f"[{op}] group must be a ProcessGroup, got {type(g).__name__}")


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, store=None,
                       group_name="", pg_options=None, device_id=None):
    """Starts MPI (rank and world size come from mpirun) and makes the default group."""
    if not is_available():
        raise RuntimeError("kiln was built without MPI: kiln.distributed is not available")
    backend = "mpi" if backend is None else str(backend).lower()
    t = _seconds(timeout)
    _C._dist_init(backend, 1800.0 if t is None else t, world_size, rank)
    GroupMember.WORLD = group.WORLD = _wrap(_C._dist_world())
    _install_excepthook()


def _install_excepthook():
    """An uncaught exception on one rank ends the whole job at once (MPI_Abort) after printing it, instead
    of leaving the other ranks to wait in their next collective until the timeout."""
    import sys
    prev = sys.excepthook
    if getattr(prev, "_kiln_dist", False):
        return

    def hook(tp, value, tb):
        prev(tp, value, tb)
        if is_initialized() and tp is not KeyboardInterrupt:
            sys.stderr.write(f"kiln.distributed: rank {_C._dist_rank()} failed with an uncaught "
                             f"{tp.__name__}; ending the job\n")
            sys.stderr.flush()
            _C._dist_abort(1)

    hook._kiln_dist = True
    sys.excepthook = hook


def is_initialized():
    return is_available() and _C._dist_is_initialized()


def destroy_process_group(group=None):
    if group is None or group is GroupMember.WORLD:
        _C._dist_destroy(None)
        _groups.clear()
        GroupMember.WORLD = globals()["group"].WORLD = None
        return
    if isinstance(group, ProcessGroup):
        _groups.pop(group._pg.id, None)
        _C._dist_destroy(group._pg)


def get_backend(group=None):
    _group(group, "get_backend")
    return "mpi"


def get_rank(group=None):
    if group is None:
        _check_init("get_rank")
        return _C._dist_rank()
    g = _group(group, "get_rank")
    return -1 if g is None else g.rank()


def get_world_size(group=None):
    if group is None:
        _check_init("get_world_size")
        return _C._dist_world_size()
    g = _group(group, "get_world_size")
    return -1 if g is None else g.size()


def new_group(ranks=None, timeout=None, backend=None, pg_options=None, use_local_synchronization=False,
              group_desc=None):
    """A group of the given global ranks; every rank must call it (non-members get NON_GROUP_MEMBER)."""
    _check_init("new_group")
    pg = _C._dist_new_group(sorted(int(r) for r in ranks) if ranks else [], _seconds(timeout))
    return GroupMember.NON_GROUP_MEMBER if pg is None else _wrap(pg)


def get_process_group_ranks(group):
    return _group(group, "get_process_group_ranks").ranks


def get_global_rank(group, group_rank):
    return _group(group, "get_global_rank")._pg.global_rank(group_rank)


def get_group_rank(group, global_rank):
    r = _group(group, "get_group_rank")._pg.group_rank(global_rank)
    if r < 0:
        raise ValueError(f"Global rank {global_rank} is not part of group {group}")
    return r


def _root(g, rank, group_rank, name, op):
    if rank is not None and group_rank is not None:
        raise ValueError(f"[{op}] pass {name} or group_{name}, not both")
    if group_rank is not None:
        return int(group_rank)
    if rank is None:
        raise ValueError(f"[{op}] {name} or group_{name} must be given")
    r = g._pg.group_rank(int(rank))
    if r < 0:
        raise ValueError(f"[{op}] global rank {rank} is not part of {g}")
    return r


def _finish(w, async_op):
    if async_op:
        return Work(w)
    w.wait()
    return None


def _run(op, group, async_op, fn):
    g = _group(group, op)
    if g is None:  # this rank is not in the group: nothing to do (torch warns and returns)
        return None
    return _finish(fn(g._pg), async_op)


def barrier(group=None, async_op=False, device_ids=None):
    return _run("barrier", group, async_op, lambda pg: pg.barrier())


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    o = op if type(op) is ReduceOp else ReduceOp._parse(op)
    g = _group(group, "all_reduce")
    if g is None:  # not a member
        return None
    if async_op:
        return Work(g._pg.all_reduce(tensor, int(o), False))
    g._pg.all_reduce(tensor, int(o), True)  # waits (a small one runs on this thread), raises its error
    return None


def all_gather(tensor_list, tensor, group=None, async_op=False):
    return _run("all_gather", group, async_op, lambda pg: pg.all_gather(list(tensor_list), tensor))


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    return _run("all_gather_into_tensor", group, async_op,
                lambda pg: pg.all_gather_into_tensor(output_tensor, input_tensor))


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    o = ReduceOp._parse(op)
    return _run("reduce_scatter", group, async_op, lambda pg: pg.reduce_scatter(output, list(input_list), int(o)))


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    o = ReduceOp._parse(op)
    return _run("reduce_scatter_tensor", group, async_op, lambda pg: pg.reduce_scatter_tensor(output, input, int(o)))


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False):
    return _run("all_to_all", group, async_op,
                lambda pg: pg.all_to_all(list(output_tensor_list), list(input_tensor_list)))


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None, group=None, async_op=False):
    os_ = [int(s) for s in output_split_sizes] if output_split_sizes else []
    is_ = [int(s) for s in input_split_sizes] if input_split_sizes else []
    return _run("all_to_all_single", group, async_op, lambda pg: pg.all_to_all_single(output, input, os_, is_))


def broadcast(tensor, src=None, group=None, async_op=False, group_src=None):
    g = _group(group, "broadcast")
    if g is None:
        return None
    return _finish(g._pg.broadcast(tensor, _root(g, src, group_src, "src", "broadcast")), async_op)


def reduce(tensor, dst=None, op=ReduceOp.SUM, group=None, async_op=False, group_dst=None):
    g = _group(group, "reduce")
    if g is None:
        return None
    o = ReduceOp._parse(op)
    return _finish(g._pg.reduce(tensor, _root(g, dst, group_dst, "dst", "reduce"), int(o)), async_op)


def gather(tensor, gather_list=None, dst=None, group=None, async_op=False, group_dst=None):
    g = _group(group, "gather")
    if g is None:
        return None
    root = _root(g, dst, group_dst, "dst", "gather")
    return _finish(g._pg.gather(list(gather_list) if gather_list else [], tensor, root), async_op)


def scatter(tensor, scatter_list=None, src=None, group=None, async_op=False, group_src=None):
    g = _group(group, "scatter")
    if g is None:
        return None
    root = _root(g, src, group_src, "src", "scatter")
    return _finish(g._pg.scatter(tensor, list(scatter_list) if scatter_list else [], root), async_op)


def _peer(g, rank, group_rank, name, op):
    if rank is None and group_rank is None:
        if op == "recv":
            return -1
        raise ValueError(f"[{op}] {name} must be given")
    return _root(g, rank, group_rank, name, op)


def isend(tensor, dst=None, group=None, tag=0, group_dst=None):
    g = _group(group, "isend")
    return None if g is None else Work(g._pg.send(tensor, _peer(g, dst, group_dst, "dst", "send"), tag))


def irecv(tensor, src=None, group=None, tag=0, group_src=None):
    g = _group(group, "irecv")
    return None if g is None else Work(g._pg.recv(tensor, _peer(g, src, group_src, "src", "recv"), tag))


def send(tensor, dst=None, group=None, tag=0, group_dst=None):
    w = isend(tensor, dst, group, tag, group_dst)
    if w is not None:
        w.wait()


def recv(tensor, src=None, group=None, tag=0, group_src=None):
    """Receives into tensor; returns the sender's global rank."""
    g = _group(group, "recv")
    if g is None:
        return -1
    w = g._pg.recv(tensor, _peer(g, src, group_src, "src", "recv"), tag)
    w.wait()
    return g._pg.global_rank(w.source)


def _objects_to_tensor(obj):
    import pickle
    data = pickle.dumps(obj)
    return _C.tensor(list(data), dtype=_C.uint8), len(data)


def broadcast_object_list(object_list, src=None, group=None, device=None, group_src=None):
    """Pickles the objects on src and fills object_list on every rank."""
    import pickle
    g = _group(group, "broadcast_object_list")
    if g is None:
        return
    root = _root(g, src, group_src, "src", "broadcast")
    n = _C.zeros(1, dtype=_C.int64)
    if g.rank() == root:
        t, k = _objects_to_tensor(list(object_list))
        n.fill_(k)
    g._pg.broadcast(n, root).wait()
    if g.rank() != root:
        t = _C.empty(int(n.item()), dtype=_C.uint8)
    g._pg.broadcast(t, root).wait()
    if g.rank() != root:
        object_list[:] = pickle.loads(bytes(t.tolist()))


def all_gather_object(object_list, obj, group=None):
    """Every rank's obj, pickled and gathered into object_list."""
    import pickle
    g = _group(group, "all_gather_object")
    if g is None:
        return
    t, k = _objects_to_tensor(obj)
    sizes = [_C.zeros(1, dtype=_C.int64) for _ in range(g.size())]
    g._pg.all_gather(sizes, _C.tensor([k], dtype=_C.int64)).wait()
    m = max(int(s.item()) for s in sizes)
    padded = _C.zeros(m, dtype=_C.uint8)
    padded[:k] = t
    outs = [_C.empty(m, dtype=_C.uint8) for _ in range(g.size())]
    g._pg.all_gather(outs, padded).wait()
    object_list[:] = [pickle.loads(bytes(o[:int(s.item())].tolist())) for o, s in zip(outs, sizes)]


from . import nn  # noqa: E402,F401
from . import _functional_collectives  # noqa: E402,F401
