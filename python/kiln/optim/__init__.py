"""kiln.optim: the C++ optimisers of kiln/optim (torch.optim's names, signatures and state dicts)."""
import collections.abc as _abc

from .. import _C

_optim = _C._optim
Optimizer = _optim.Optimizer
SGD = _optim.SGD
Adam = _optim.Adam
AdamW = _optim.AdamW
RMSprop = _optim.RMSprop
Adagrad = _optim.Adagrad
Rprop = _optim.Rprop
ASGD = _optim.ASGD
Adamax = _optim.Adamax
NAdam = _optim.NAdam
RAdam = _optim.RAdam
LBFGS = _optim.LBFGS
ParamGroup = _optim.ParamGroup  # a live view of one C++ param group, used like torch's group dict
ParamState = _optim.ParamState  # a live view of one parameter's state: opt.state[p]["exp_avg"] = t writes it

_abc.MutableMapping.register(ParamGroup)
_abc.MutableMapping.register(ParamState)

from . import lr_scheduler  # noqa: E402,F401

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Rprop", "ASGD", "Adamax", "NAdam", "RAdam", "LBFGS",
           "lr_scheduler"]
