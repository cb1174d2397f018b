"""kiln.amp: automatic mixed precision, torch.amp's names. The casting rules and the scaler's ops are
C++ (kiln/amp); this package holds the context manager and the scaler's per-optimiser bookkeeping."""
from .autocast_mode import autocast, custom_bwd, custom_fwd, is_autocast_available
from .grad_scaler import GradScaler

__all__ = ["autocast", "custom_bwd", "custom_fwd", "is_autocast_available", "GradScaler"]
