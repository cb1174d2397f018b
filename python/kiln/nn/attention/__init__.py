"""kiln.nn.attention: attention building blocks beyond F.scaled_dot_product_attention, as
torch.nn.attention (flex_attention)."""
from . import flex_attention  # noqa: F401
