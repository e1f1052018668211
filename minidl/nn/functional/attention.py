"""Attention in functional form; the op (forward, backward, kernel switch) is in minidl.ops.attention."""
from ...ops.attention import scaled_dot_product_attention  # noqa: F401
