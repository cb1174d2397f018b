"""kiln.autograd.graph: torch.autograd.graph's saved-tensor hooks (kiln/autograd's SavedTensorHooks)."""
import contextlib

from .. import _C

__all__ = ["saved_tensors_hooks", "save_on_cpu", "disable_saved_tensors_hooks"]


class saved_tensors_hooks:
    """Within the context, every tensor autograd saves for backward is passed to pack_hook and only
    its result is kept; unpack_hook(result) must give the tensor back when backward needs it."""

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook, self.unpack_hook = pack_hook, unpack_hook

    def __enter__(self):
        _C._push_saved_tensor_hooks(self.pack_hook, self.unpack_hook)

    def __exit__(self, *args):
        _C._pop_saved_tensor_hooks()


class save_on_cpu(saved_tensors_hooks):
    """torch's offload-to-CPU hooks; kiln tensors already live on the CPU, so tensors are kept as they
    are (pin_memory is accepted)."""

    def __init__(self, pin_memory=False, device_type="cuda"):
        super().__init__(lambda t: t, lambda t: t)


@contextlib.contextmanager
def disable_saved_tensors_hooks(error_message):
    """Installing saved-tensor hooks inside the context raises RuntimeError(error_message)."""
    prev = _C._saved_tensor_hooks_disabled()
    try:
        _C._set_saved_tensor_hooks_disabled(error_message)
        yield
    finally:
        _C._set_saved_tensor_hooks_disabled(prev)
