"""The rest of PyTorch's top level, installed by _namespace.py's tables like the rest: the
neural-network ops torch also offers as torch.X (_toplevel_nn.py), the in-place functions
``md.abs_(t)`` ... (each the tensor's own in-place method), the window functions
(tensor/windows.py), segment_reduce (ops/segment_reduce.py), the randomized low-rank SVD and
PCA (ops/lowrank.py), a few tensor functions and the ``*_copy`` view forms
(_toplevel_tensor.py), and interchange and process settings (_toplevel_process.py).
"""
from . import _toplevel_nn as _nn
from . import _toplevel_process as _process
from . import _toplevel_tensor as _tensor
from .ops import lowrank as _lowrank
from .ops.segment_reduce import segment_reduce
from .tensor import windows as _windows

# md.X_(t, ...) is t.X_(...): the in-place methods PyTorch also offers at its top level
INPLACE_METHODS = (
    "abs_", "acos_", "acosh_", "addmv_", "arccos_", "arccosh_", "arcsin_", "arcsinh_", "arctan_", "arctanh_",
    "asin_", "asinh_", "atan_", "atanh_", "ceil_", "clamp_", "clamp_max_", "clamp_min_", "clip_", "cos_", "cosh_",
    "deg2rad_", "detach_", "erf_", "erfc_", "exp2_", "exp_", "expm1_", "fill_", "fix_", "floor_", "frac_", "gcd_",
    "i0_", "lcm_", "ldexp_", "log10_", "log1p_", "log2_", "log_", "logit_", "nan_to_num_", "neg_", "negative_",
    "rad2deg_", "reciprocal_", "relu_", "round_", "rsqrt_", "sigmoid_", "sin_", "sinc_", "sinh_", "sqrt_",
    "square_", "tan_", "tanh_", "trunc_", "xlogy_", "zero_",
)


def _inplace(name):
    def fn(input, *args, **kwargs):
        return getattr(input, name)(*args, **kwargs)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"md.{name}(t, ...) is t.{name}(...): t itself, changed in place."
    return fn


_NN = (
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "conv_tbc",
    "convolution", "batch_norm", "instance_norm", "layer_norm", "group_norm", "rms_norm", "dropout", "dropout_",
    "alpha_dropout_", "feature_alpha_dropout_", "feature_dropout", "feature_dropout_", "celu", "celu_", "selu",
    "selu_", "embedding", "embedding_bag", "bilinear", "cosine_similarity", "pairwise_distance", "pixel_shuffle",
    "pixel_unshuffle", "native_channel_shuffle", "constant_pad_nd", "max_pool1d", "max_pool2d", "max_pool3d",
    "max_pool1d_with_indices", "avg_pool1d", "adaptive_avg_pool1d", "adaptive_max_pool1d", "ctc_loss", "kl_div",
    "margin_ranking_loss", "hinge_embedding_loss", "triplet_margin_loss", "poisson_nll_loss",
    "binary_cross_entropy_with_logits", "cosine_embedding_loss", "grid_sampler", "affine_grid_generator",
    "rnn_tanh_cell", "rnn_relu_cell", "gru_cell", "lstm_cell",
)
_WINDOWS = ("hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window")
_TENSOR = ("unravel_index", "scalar_tensor", "rsub", "is_signed", "fill", "frobenius_norm", "nuclear_norm",
           "split_with_sizes", "empty_permuted", "histogramdd", "get_device")
_PROCESS = ("typename", "is_storage", "set_flush_denormal", "set_warn_always", "is_warn_always_enabled",
            "to_dlpack", "from_dlpack", "frombuffer", "get_autocast_cpu_dtype", "set_autocast_cpu_dtype",
            "is_autocast_cpu_enabled", "set_autocast_cpu_enabled", "get_autocast_gpu_dtype",
            "set_autocast_gpu_dtype", "set_default_tensor_type")

BOTH = {"as_strided_": _tensor.as_strided_}

MODULE_ONLY = {
    **{name: getattr(_nn, name) for name in _NN},
    **{name: _inplace(name) for name in INPLACE_METHODS},
    **{name: getattr(_windows, name) for name in _WINDOWS},
    **{name: getattr(_tensor, name) for name in _TENSOR},
    **_tensor.COPIES,
    **{name: getattr(_process, name) for name in _PROCESS},
    "segment_reduce": segment_reduce, "svd_lowrank": _lowrank.svd_lowrank, "pca_lowrank": _lowrank.pca_lowrank,
}

METHODS_ONLY = dict(_process.METHODS)
