"""kiln.optim.lr_scheduler: the C++ schedulers of kiln/optim/lr_scheduler.h."""
from .. import _C

_s = _C._optim.lr_scheduler
LRScheduler = _s.LRScheduler
StepLR = _s.StepLR
MultiStepLR = _s.MultiStepLR
ExponentialLR = _s.ExponentialLR
CosineAnnealingLR = _s.CosineAnnealingLR
LinearLR = _s.LinearLR
LambdaLR = _s.LambdaLR
SequentialLR = _s.SequentialLR
OneCycleLR = _s.OneCycleLR
ReduceLROnPlateau = _s.ReduceLROnPlateau
ConstantLR = _s.ConstantLR
PolynomialLR = _s.PolynomialLR
CosineAnnealingWarmRestarts = _s.CosineAnnealingWarmRestarts
CyclicLR = _s.CyclicLR

__all__ = ["LRScheduler", "StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "LinearLR", "LambdaLR",
           "SequentialLR", "OneCycleLR", "ReduceLROnPlateau", "ConstantLR", "PolynomialLR",
           "CosineAnnealingWarmRestarts", "CyclicLR"]
