"""The "layer" family's switch (conv2d, pooling, gelu, embedding, linear's bias, cross-entropy):
the Numba kernels (default) or the NumPy reference; ``MINIDL_LAYER_IMPL=reference`` at import,
``set_implementation("reference")``, ``with implementation("reference"):`` or
``minidl.implementation(layer="reference")``.
See minidl.kernels.switch for the rule."""
from ..kernels.switch import LAYER

LAYERS = LAYER
IMPLEMENTATIONS = LAYER.choices
set_implementation, get_implementation, implementation, use_kernel = LAYER.set, LAYER.get, LAYER.use, LAYER.use_kernel
