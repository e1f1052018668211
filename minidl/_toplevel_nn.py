"""The neural-network ops PyTorch also offers at its top level (torch.conv2d, torch.batch_norm,
torch.kl_div, torch.lstm_cell...), with the top-level signatures, which are ATen's rather
than nn.functional's: the norms take (input, weight, bias, running_mean, running_var, ...),
the losses an integer ``reduction`` (0 "none", 1 "mean", 2 "sum"), the pooling functions a
positional (kernel_size, stride, padding, dilation, ceil_mode) with an empty stride meaning
the kernel size, and the cells the weights as arguments.

Each is a thin wrapper around minidl's nn.functional (or the ops behind it), imported on the
first call so that ``import minidl`` stays light; the math, the checks and the gradients are
those functions'. Only feature_dropout, convolution and the cells pick among existing ops.
"""
import operator


def _F():
    from .nn import functional
    return functional


# convolution ---------------------------------------------------------------------------------
def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _F().conv1d(input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _F().conv2d(input, weight, bias, stride, padding, dilation, groups)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _F().conv3d(input, weight, bias, stride, padding, dilation, groups)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _F().conv_transpose1d(input, weight, bias, stride, padding, output_padding, groups, dilation)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _F().conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups, dilation)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _F().conv_transpose3d(input, weight, bias, stride, padding, output_padding, groups, dilation)


def conv_tbc(input, weight, bias, pad=0):
    return _F().conv_tbc(input, weight, bias, pad)


def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """The convolution (``transposed``: the transposed one) of as many spatial dims as ``weight``
    has beyond its first two, 1 to 3."""
    k = weight.ndim - 2
    if k not in (1, 2, 3):
        raise RuntimeError(f"convolution: expected a 3-D, 4-D or 5-D weight (1 to 3 spatial dims), got "
                           f"{weight.ndim}-D of shape {list(weight.shape)}")
    if transposed:
        return getattr(_F(), f"conv_transpose{k}d")(input, weight, bias, stride, padding, output_padding, groups,
                                                    dilation)
    return getattr(_F(), f"conv{k}d")(input, weight, bias, stride, padding, dilation, groups)


# normalization -------------------------------------------------------------------------------
def batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled):
    return _F().batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps, cudnn_enabled):
    return _F().instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05, cudnn_enable=True):
    return _F().layer_norm(input, normalized_shape, weight, bias, eps)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-05, cudnn_enabled=True):
    return _F().group_norm(input, num_groups, weight, bias, eps)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    return _F().rms_norm(input, normalized_shape, weight, eps)


# dropout and activations ---------------------------------------------------------------------
def dropout(input, p, train):
    return _F().dropout(input, p, train)


def dropout_(input, p, train):
    return _F().dropout(input, p, train, inplace=True)


def alpha_dropout_(input, p, train):
    return _F().alpha_dropout(input, p, train, inplace=True)


def feature_alpha_dropout_(input, p, train):
    return _F().feature_alpha_dropout(input, p, train, inplace=True)


def _feature_dropout(input, p, train, inplace):
    if input.ndim < 2:
        raise RuntimeError(f"Feature dropout requires at least 2 dimensions in the input, got {input.ndim}-D "
                           f"of shape {list(input.shape)}")
    from .ops.channel_dropout import _channel_dropout
    return _channel_dropout(input, p, train, inplace, input.ndim - 2, "feature_dropout")


def feature_dropout(input, p, train):
    """Dropout of whole features: each (sample, channel) slice of an (N, C, *) input is zeroed
    with probability p, the kept ones scaled by 1/(1-p) (nn.functional.dropout2d's rule for any
    number of trailing dims; a 2-D input drops single elements)."""
    return _feature_dropout(input, p, train, False)


def feature_dropout_(input, p, train):
    return _feature_dropout(input, p, train, True)


def celu(input, alpha=1.0):
    return _F().celu(input, alpha)


def celu_(input, alpha=1.0):
    return _F().celu(input, alpha, inplace=True)


def selu(input):
    return _F().selu(input)


def selu_(input):
    return _F().selu(input, inplace=True)


# embeddings, distances, shuffles -------------------------------------------------------------
def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """nn.functional.embedding with the weight first; a negative ``padding_idx`` means none."""
    if scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding: scale_grad_by_freq and sparse are not supported")
    return _F().embedding(indices, weight, None if padding_idx < 0 else padding_idx)


def embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                  per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """(output, offset2bag, bag_size, max_indices), as ATen's: ``output`` is nn.functional's
    embedding_bag (``mode`` 0 sum, 1 mean, 2 max; ``padding_idx`` None or negative: none) and
    the rest say how the bags were formed, as PyTorch's CPU kernel reports them: for mean and max
    the bag of each index, the bag sizes without padding and (max) the row each output element
    came from, else the sizes; for sum, where the kernel tracks no sizes, zeros (its float32
    fast path also leaves offset2bag empty)."""
    if not isinstance(mode, int) or isinstance(mode, bool) or mode not in (0, 1, 2):
        raise ValueError(f"embedding_bag: mode must be 0 (sum), 1 (mean) or 2 (max), got {mode!r}")
    pad = None if padding_idx is None or padding_idx < 0 else padding_idx
    out = _F().embedding_bag(indices, weight, offsets, None, 2, scale_grad_by_freq, ("sum", "mean", "max")[mode],
                             sparse, per_sample_weights, include_last_offset, pad)
    return (out, *_bag_bookkeeping(weight, indices, offsets, mode, include_last_offset, pad))


def _bag_bookkeeping(weight, indices, offsets, mode, include_last_offset, pad):
    """(offset2bag, bag_size, max_indices) of embedding_bag, as int64 tensors."""
    import numpy as np

    from .ops.embedding_bag import _flat_bags
    from .tensor.tensor import Tensor
    idx, bag, B = _flat_bags(indices, offsets, include_last_offset)
    keep = np.ones(idx.size, bool) if pad is None else idx != pad % weight.shape[0]
    size = np.bincount(bag[keep], minlength=B).astype(np.int64)
    if mode == 0:
        size[:] = 0
    max_indices = size.copy()
    if mode == 2:
        w = weight.numpy(force=True)
        max_indices = np.zeros((B, w.shape[1]), np.int64)
        for b in range(B):
            rows = idx[keep & (bag == b)]
            if rows.size:
                max_indices[b] = rows[np.argmax(w[rows], axis=0)]
    return tuple(Tensor._wrap(a, None, 0) for a in (bag.astype(np.int64), size, max_indices))


def bilinear(input1, input2, weight, bias=None):
    return _F().bilinear(input1, input2, weight, bias)


def cosine_similarity(x1, x2, dim=1, eps=1e-08):
    return _F().cosine_similarity(x1, x2, dim, eps)


def pairwise_distance(x1, x2, p=2.0, eps=1e-06, keepdim=False):
    return _F().pairwise_distance(x1, x2, p, eps, keepdim)


def pixel_shuffle(input, upscale_factor):
    return _F().pixel_shuffle(input, upscale_factor)


def pixel_unshuffle(input, downscale_factor):
    return _F().pixel_unshuffle(input, downscale_factor)


def native_channel_shuffle(input, groups):
    return _F().native_channel_shuffle(input, groups)


def constant_pad_nd(input, pad, value=0):
    """Pad (a negative amount: crop) the last len(pad) // 2 dims with ``value``, as F.pad's
    constant mode."""
    return _F().pad(input, pad, "constant", value)


# pooling -------------------------------------------------------------------------------------
def _stride(stride):
    """ATen's empty stride (its default) stands for the kernel size, as nn.functional's None."""
    return None if stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0) else stride


def max_pool1d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return _F().max_pool1d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode)


def max_pool2d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return _F().max_pool2d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode)


def max_pool3d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return _F().max_pool3d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode)


def max_pool1d_with_indices(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return _F().max_pool1d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode, True)


def avg_pool1d(input, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True):
    return _F().avg_pool1d(input, kernel_size, _stride(stride), padding, ceil_mode, count_include_pad)


def adaptive_avg_pool1d(input, output_size):
    return _F().adaptive_avg_pool1d(input, output_size)


def adaptive_max_pool1d(input, output_size):
    """(values, indices): ATen's form always returns both."""
    return _F().adaptive_max_pool1d(input, output_size, True)


# losses --------------------------------------------------------------------------------------
_REDUCTIONS = ("none", "mean", "sum")


def _reduction(op, reduction):
    """ATen's integer reduction (0 none, 1 mean, 2 sum) as nn.functional's name."""
    if isinstance(reduction, bool) or not hasattr(reduction, "__index__"):
        raise TypeError(f"{op}(): argument 'reduction' must be int (0 none, 1 mean, 2 sum), "
                        f"not {type(reduction).__name__}")
    r = operator.index(reduction)
    if r not in (0, 1, 2):
        raise ValueError(f"{op}: reduction must be 0 (none), 1 (mean) or 2 (sum), got {r}")
    return _REDUCTIONS[r]


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction=1, zero_infinity=False):
    return _F().ctc_loss(log_probs, targets, input_lengths, target_lengths, blank,
                         _reduction("ctc_loss", reduction), zero_infinity)


def kl_div(input, target, reduction=1, *, log_target=False):
    """ATen's mean is over all elements, as nn.functional's "mean" (without its warning)."""
    r = _reduction("kl_div", reduction)
    out = _F().kl_div(input, target, reduction="none" if r == "mean" else r, log_target=log_target)
    return out.mean() if r == "mean" else out


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=1):
    return _F().margin_ranking_loss(input1, input2, target, margin,
                                    reduction=_reduction("margin_ranking_loss", reduction))


def hinge_embedding_loss(input, target, margin=1.0, reduction=1):
    return _F().hinge_embedding_loss(input, target, margin, reduction=_reduction("hinge_embedding_loss", reduction))


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-06, swap=False, reduction=1):
    return _F().triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap,
                                    reduction=_reduction("triplet_margin_loss", reduction))


def poisson_nll_loss(input, target, log_input, full, eps, reduction):
    return _F().poisson_nll_loss(input, target, log_input, full, eps=eps,
                                 reduction=_reduction("poisson_nll_loss", reduction))


def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None, reduction=1):
    return _F().binary_cross_entropy_with_logits(
        input, target, weight, reduction=_reduction("binary_cross_entropy_with_logits", reduction),
        pos_weight=pos_weight)


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=1):
    return _F().cosine_embedding_loss(input1, input2, target, margin,
                                      reduction=_reduction("cosine_embedding_loss", reduction))


# sampling grids ------------------------------------------------------------------------------
def _enum(op, what, value, names):
    if isinstance(value, bool) or not hasattr(value, "__index__") or not 0 <= operator.index(value) < len(names):
        raise ValueError(f"{op}: {what} must be one of " + ", ".join(f"{i} ({n})" for i, n in enumerate(names))
                         + f", got {value!r}")
    return names[operator.index(value)]


def grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners):
    """nn.functional.grid_sample with ATen's integer modes: interpolation 0 bilinear, 1 nearest,
    2 bicubic; padding 0 zeros, 1 border, 2 reflection."""
    mode = _enum("grid_sampler", "interpolation_mode", interpolation_mode, ("bilinear", "nearest", "bicubic"))
    pad = _enum("grid_sampler", "padding_mode", padding_mode, ("zeros", "border", "reflection"))
    return _F().grid_sample(input, grid, mode, pad, bool(align_corners))


def affine_grid_generator(theta, size, align_corners):
    return _F().affine_grid(theta, list(size), bool(align_corners))


# recurrent cells -----------------------------------------------------------------------------
def _cell_input(op, input, states, w_ih, w_hh, gates):
    """(2-D input, 2-D states, batched?) after the checks of the nn cells."""
    if input.ndim not in (1, 2):
        raise ValueError(f"{op}: Expected input to be 1D or 2D, got {input.ndim}D instead")
    batched = input.ndim == 2
    x = input if batched else input.unsqueeze(0)
    H = w_hh.shape[1]
    if w_ih.ndim != 2 or w_hh.ndim != 2 or w_ih.shape[0] != gates * H or w_hh.shape[0] != gates * H:
        raise RuntimeError(f"{op}: expected w_ih ({gates} * hidden_size, input_size) and w_hh ({gates} * "
                           f"hidden_size, hidden_size), got {list(w_ih.shape)} and {list(w_hh.shape)}")
    if x.shape[1] != w_ih.shape[1]:
        raise RuntimeError(f"{op}: input has inconsistent input_size: got {x.shape[1]} expected {w_ih.shape[1]}")
    out = []
    for i, s in enumerate(states):
        s = s if s.ndim == 2 else s.unsqueeze(0)
        if tuple(s.shape) != (x.shape[0], H):
            raise RuntimeError(f"{op}: hidden{i} has shape {list(s.shape)}, expected {[x.shape[0], H]} (batch, "
                               "hidden_size)")
        out.append(s)
    return x, out, batched


def _rnn_cell(op, input, hx, w_ih, w_hh, b_ih, b_hh, relu):
    from .ops.rnn.rnn_cell import RNNLayer
    x, (h0,), batched = _cell_input(op, input, [hx], w_ih, w_hh, 1)
    y, _ = RNNLayer.apply(x, w_ih, w_hh, b_ih, b_hh, h0, (x.shape[0],), False, relu)
    return y if batched else y.squeeze(0)


def rnn_tanh_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One step h' = tanh(x w_ih^T + b_ih + h w_hh^T + b_hh) (nn.RNNCell's)."""
    return _rnn_cell("rnn_tanh_cell", input, hx, w_ih, w_hh, b_ih, b_hh, False)


def rnn_relu_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One step h' = relu(x w_ih^T + b_ih + h w_hh^T + b_hh)."""
    return _rnn_cell("rnn_relu_cell", input, hx, w_ih, w_hh, b_ih, b_hh, True)


def gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One step of nn.GRUCell with the weights given."""
    from .ops.rnn.gru import GRULayer
    x, (h0,), batched = _cell_input("gru_cell", input, [hx], w_ih, w_hh, 3)
    y, _ = GRULayer.apply(x, w_ih, w_hh, b_ih, b_hh, h0, (x.shape[0],), False)
    return y if batched else y.squeeze(0)


def lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One step of nn.LSTMCell with the weights given: ``hx`` is (h, c); returns (h', c')."""
    from .ops.rnn.lstm import LSTMLayer
    if len(hx) != 2:
        raise RuntimeError(f"lstm_cell: hx must be (h, c), got {len(hx)} tensors")
    x, (h0, c0), batched = _cell_input("lstm_cell", input, list(hx), w_ih, w_hh, 4)
    _, h, c = LSTMLayer.apply(x, w_ih, w_hh, b_ih, b_hh, None, h0, c0, (x.shape[0],), False)
    return (h, c) if batched else (h.squeeze(0), c.squeeze(0))
