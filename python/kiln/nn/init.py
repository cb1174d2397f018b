"""kiln.nn.init: in-place initialisers (the C++ kiln::nn::init), torch.nn.init's names."""
from .. import _C

_i = _C._nn.init
calculate_gain = _i.calculate_gain
_calculate_fan_in_and_fan_out = _i._calculate_fan_in_and_fan_out
uniform_ = _i.uniform_
normal_ = _i.normal_
constant_ = _i.constant_
zeros_ = _i.zeros_
ones_ = _i.ones_
eye_ = _i.eye_
xavier_uniform_ = _i.xavier_uniform_
xavier_normal_ = _i.xavier_normal_
kaiming_uniform_ = _i.kaiming_uniform_
kaiming_normal_ = _i.kaiming_normal_
trunc_normal_ = _i.trunc_normal_
orthogonal_ = _i.orthogonal_
