"""Which implementation the layer ops (conv2d, pooling, gelu, embedding) run: the Numba
kernels (default) or the NumPy reference; ``MINIDL_LAYER_IMPL=reference`` at import,
``set_implementation("reference")`` or ``with implementation("reference"):`` (tests run both).
See minidl.kernels.switch."""
from ..kernels.switch import ImplementationSwitch

LAYERS = ImplementationSwitch("layer", "MINIDL_LAYER_IMPL")
IMPLEMENTATIONS = LAYERS.choices
set_implementation, get_implementation, implementation, use_kernel = LAYERS.set, LAYERS.get, LAYERS.use, LAYERS.use_kernel
