"""kiln.nn: layers arrive with the autograd/nn issue; functional ops are available now."""
from . import functional  # noqa: F401
