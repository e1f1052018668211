"""Normalization ops: each norm as a Function with a closed-form backward, a NumPy reference
and a fused kernel, one norm per file (<norm>.py); ``residual_norm`` fuses a residual add with
LayerNorm or RMSNorm of its sum.

Implementation switch (one for every norm in this package; API stable):

    from minidl.ops.normalization import set_implementation, get_implementation, implementation, use_kernel
    set_implementation("reference")      # or "numba" (default); returns the previous setting
    with implementation("reference"):    # temporarily, e.g. in tests and benchmarks
        y = F.layer_norm(x, (768,))
    # the environment variable MINIDL_NORM_IMPL=reference sets the default at import;
    # minidl.implementation(norm="reference") is the same switch

Inside a Function: ``ctx.impl = <NORM>.select(x)`` in forward (the reference, or the kernels of
x's device: ``minidl.kernels.cpu.<norm>``, ``minidl.kernels.cuda.<norm>``, all with the reference's
array-level signature), then ``ctx.impl.<norm>_forward(...)`` and, in backward, the same
implementation's ``<norm>_backward(...)``; the rule is minidl.kernels.switch's, the same on every
device (``minidl.implementation(norm="reference")`` runs the references on cuda too).
``_dispatch`` holds what every norm Function shares (row layout, output buffers, parameter-gradient
casts); ``running_stats`` the running-estimate update of BatchNorm and InstanceNorm.
Kernel files share helpers: ``minidl.kernels.cpu._threads`` (when to run on one thread, row
chunks), ``_numerics`` (fastmath flags, compute dtype, split means, partial sums), ``_row_norm``
(the row norms' reductions and array wrappers), ``_channel_rows`` (the channel norms' inner loops) and
``_stream`` (streaming stores for outputs larger than the cache).
"""
from ._dispatch import (IMPLEMENTATIONS, get_implementation, implementation, param_grad,  # noqa: F401
                        set_implementation, use_kernel)
from .layer_norm import LayerNormFunction, layer_norm_backward_reference, layer_norm_forward_reference  # noqa: F401
from .rms_norm import RMSNormFunction, rms_norm_backward_reference, rms_norm_forward_reference  # noqa: F401
from .residual_norm import AddLayerNormFunction, AddRMSNormFunction  # noqa: F401
from .scale_norm import ScaleNormFunction, scale_norm_backward_reference, scale_norm_forward_reference  # noqa: F401
from .batch_norm import BatchNormFunction, batch_norm_backward_reference, batch_norm_forward_reference  # noqa: F401
from .instance_norm import InstanceNormFunction, instance_norm_backward_reference, instance_norm_forward_reference  # noqa: F401
from .group_norm import GroupNormFunction, group_norm_backward_reference, group_norm_forward_reference  # noqa: F401
