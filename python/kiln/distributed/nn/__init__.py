"""kiln.distributed.nn: differentiable collectives (torch.distributed.nn)."""
from . import functional  # noqa: F401
