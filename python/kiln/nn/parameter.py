"""nn.Parameter: a Tensor that a Module registers as a parameter."""
from .. import _C
from .._C import Tensor
from .._tensor_protocol import _disabled_function_impl


class Parameter(Tensor):
    """A leaf tensor that requires grad by default; assigning it to a Module attribute registers it.
    It shares storage with `data` (as torch's Parameter does). Ops on it return plain tensors (it opts
    out of the subclass protocol, as torch's does)."""

    __kiln_function__ = __torch_function__ = _disabled_function_impl

    def __init__(self, data=None, requires_grad=True):
        if data is None:
            data = _C.empty([0])
        super().__init__(data.detach())
        if requires_grad:
            self.requires_grad_(True)

    @classmethod
    def _wrap(cls, t):
        """A Parameter object for an existing tensor (same TensorImpl, e.g. a C++ module's parameter)."""
        p = cls.__new__(cls)
        Tensor.__init__(p, t)
        return p

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__



class Buffer(Tensor):
    """Marks a tensor to be registered as a buffer when assigned to a Module attribute."""

    __kiln_function__ = __torch_function__ = _disabled_function_impl

    def __init__(self, data, persistent=True):
        super().__init__(data)
        self.persistent = persistent
