"""kiln.nn.parallel: DistributedDataParallel (torch.nn.parallel), on kiln.distributed."""
import contextlib

from ... import _C
from ..._tree import tensors_in
from ..module import Module

__all__ = ["DistributedDataParallel"]


class DistributedDataParallel(Module):
    """Replicates `module` on every rank of the group and averages gradients during backward.

    Parameters and buffers are broadcast from rank 0 at construction (and buffers before each forward
    when broadcast_buffers). Gradients go into buckets of about bucket_cap_mb in reverse parameter order;
    each bucket's all_reduce starts as soon as its gradients are ready, overlapping the rest of backward.
    `no_sync()` accumulates gradients locally. The reducer is C++ (kiln::distributed::Reducer)."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True,
                 init_sync=True, process_group=None, bucket_cap_mb=None, find_unused_parameters=False,
                 check_reduction=False, gradient_as_bucket_view=False, static_graph=False, **kwargs):
        super().__init__()
        from ... import distributed as dist
        if device_ids not in (None, []) or output_device is not None:
            raise ValueError("DistributedDataParallel device_ids and output_device arguments only work with "
                             "single-device/multiple-device GPU modules; kiln's modules are on the CPU")
        g = dist._group(process_group, "DistributedDataParallel")
        if g is None:
            raise RuntimeError("[DistributedDataParallel] this rank is not a member of the process group")
        params = [p for p in module.parameters() if p.requires_grad]
        if not params:
            raise RuntimeError("DistributedDataParallel is not needed when a module doesn't have any parameter "
                               "that requires a gradient.")
        self.module = module
        self.process_group = g
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.static_graph = static_graph
        self.bucket_bytes_cap = int((25 if bucket_cap_mb is None else bucket_cap_mb) * 1024 * 1024)
        self.reducer = _C._Reducer(params, g._pg, 25.0 if bucket_cap_mb is None else float(bucket_cap_mb),
                                   find_unused_parameters, gradient_as_bucket_view, static_graph, broadcast_buffers)
        if init_sync:
            self.reducer.broadcast_from_rank0(list(module.parameters()) + list(module.buffers()))

    def forward(self, *inputs, **kwargs):
        if self.broadcast_buffers:
            bufs = list(self.module.buffers())
            if bufs:
                self.reducer.broadcast_from_rank0(bufs)
        out = self.module(*inputs, **kwargs)
        if _C.is_grad_enabled() and self.reducer.require_sync():
            self.reducer.prepare_for_backward(tensors_in(out))
        return out

    @contextlib.contextmanager
    def no_sync(self):
        prev = self.reducer.require_sync()
        self.reducer.set_require_sync(False)
        try:
            yield
        finally:
            self.reducer.set_require_sync(prev)

    def _get_ddp_logging_data(self):
        return {"bucket_cap_bytes": self.bucket_bytes_cap, "buckets": self.reducer.bucket_indices(),
                "last_comm_wait_seconds": self.reducer.last_wait_seconds()}
