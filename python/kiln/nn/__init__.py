"""kiln.nn: modules (Python Module base, layers computed in C++), functional, init and utils."""
from . import functional  # noqa: F401
from . import init  # noqa: F401
from . import utils  # noqa: F401
from .parameter import Parameter, Buffer  # noqa: F401
from .module import Module  # noqa: F401
from .containers import Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict  # noqa: F401
from .layers import *  # noqa: F401,F403
from .loss import *  # noqa: F401,F403
from .norm_conv import *  # noqa: F401,F403
from .transformer import *  # noqa: F401,F403
from .rnn import *  # noqa: F401,F403
from .lazy import *  # noqa: F401,F403
from . import parallel  # noqa: F401,E402
