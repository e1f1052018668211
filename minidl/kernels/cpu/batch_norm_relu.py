"""BatchNorm followed by ReLU, r = relu(BN(x)), on the CPU: the per-channel fused kernels of
``batch_norm`` with a ReLU epilogue, so the pair costs BatchNorm's passes alone.

Forward writes relu((x - mean) * rstd * gamma + beta) where BatchNorm would write its output:
no second pass, no separate ReLU output and no mask. Backward reads r, the pair's output (the
next layer keeps it for its own backward anyway), and uses dy only where r != 0, which is
ReLU's own mask (NaN passes, 0 and -0.0 do not): the sums and dx of BatchNorm's backward then
run on that masked dy inside the same pass, so the gradients are exactly those of the two ops
run one after the other (the derivation is BatchNorm's, in ``minidl.ops.normalization.batch_norm``).

Inputs the fused kernels do not take (the (N, C) layout, channels too big to stay in cache,
float16/bfloat16) run BatchNorm's own kernels and ReLU after them, with the same results.
"""
import numpy as np

from .batch_norm import (_fused, _fused_backward_rows, _fused_forward_rows, _grad_view, _output, _vector, _view,
                         batch_norm_apply, batch_norm_backward, batch_norm_forward)
from .relu import add_relu_forward, relu_backward, relu_forward
from ._stream import should_stream
from ._threads import threads_for

_WIDE = (np.dtype(np.float32), np.dtype(np.float64))


def _fusable(x):
    """The kernels' rows view of x when the fused per-channel kernels take it, else None."""
    if x.size == 0 or x.dtype not in _WIDE:
        return None
    layout, v = _view(x, None)
    with threads_for(v.size):
        return v if _fused(layout, v, x.shape[1], None) else None


def batch_norm_relu_forward(x, weight=None, bias=None, eps=1e-5):
    """Training forward: (relu(BN(x)), mean, rstd), the statistics as batch_norm_forward's."""
    v = _fusable(x)
    if v is None:
        y, mean, rstd = batch_norm_forward(x, weight, bias, eps)
        return relu_forward(y)[0], mean, rstd
    c = x.shape[1]
    y, yv = _output(x, v.shape)
    mean, rstd = np.empty(c), np.empty(c)
    with threads_for(v.size):
        _fused_forward_rows(v, None, c, _vector(weight, c, 1.0), _vector(bias, c, 0.0), float(eps), False,
                            yv, mean, rstd, should_stream(yv), True)
    return y, mean, rstd


def batch_norm_relu_apply(x, mean, rstd, weight=None, bias=None):
    """relu(BN(x)) with the given (eval) statistics."""
    v = _fusable(x)
    if v is None:
        return relu_forward(batch_norm_apply(x, mean, rstd, weight, bias))[0]
    c = x.shape[1]
    y, yv = _output(x, v.shape)
    with threads_for(v.size):
        _fused_forward_rows(v, None, c, _vector(weight, c, 1.0), _vector(bias, c, 0.0), 0.0, True, yv,
                            np.ascontiguousarray(mean, dtype=np.float64), np.ascontiguousarray(rstd, dtype=np.float64),
                            should_stream(yv), True)
    return y


def batch_norm_relu_backward(dy, r, x, mean, rstd, weight=None, training=True, need_dx=True, need_dweight=True,
                             need_dbias=True):
    """(dx, dweight, dbias) of r = relu(BN(x)) for the output gradient dy, as batch_norm_backward's."""
    v = _fusable(x)
    if v is None or r.shape != x.shape or r.dtype != x.dtype:
        return batch_norm_backward(relu_backward(r != 0, dy), x, mean, rstd, weight, training, None, need_dx,
                                   need_dweight, need_dbias)
    c = x.shape[1]
    dyv, rv = _grad_view(dy, x, None), _view(r, None)[1]
    dx, dxv = _output(x, v.shape)
    sdy, sdyx = np.empty(c), np.empty(c)
    rstd = np.ascontiguousarray(rstd, dtype=np.float64)
    with threads_for(v.size):
        _fused_backward_rows(dyv, v, None, c, np.ascontiguousarray(mean, dtype=np.float64), rstd,
                             _vector(weight, c, 1.0), training, v.size / c, dxv, sdy, sdyx, should_stream(dxv), rv)
    return dx, rstd * sdyx, sdy


# BatchNorm + add + ReLU, r = relu(BN(x) + s), the end of a ResNet block: the residual s joins the
# forward's epilogue (one pass writes r, where BN, the add and ReLU would write BN(x) and the sum
# and read them back), and the first backward pass writes ds = dy where r != 0, which the second
# reads instead of dy and r (BN's gradient of the same masked dy). The fallback runs the ops.
def _residual_view(residual, x, v):
    """The kernels' rows view of the residual, or None where it cannot join x's kernels (the
    fallback then adds it)."""
    if residual.shape != x.shape:
        raise ValueError(f"batch_norm_add_relu: expected a residual of shape {x.shape}, got {residual.shape}")
    if v is None or residual.dtype != x.dtype:
        return None
    return _view(residual, None)[1]


def batch_norm_add_relu_forward(x, residual, weight=None, bias=None, eps=1e-5):
    """Training forward: (relu(BN(x) + residual), mean, rstd)."""
    v = _fusable(x)
    sv = _residual_view(residual, x, v)
    if sv is None:
        y, mean, rstd = batch_norm_forward(x, weight, bias, eps)
        return add_relu_forward(y, residual)[0], mean, rstd
    c = x.shape[1]
    y, yv = _output(x, v.shape)
    mean, rstd = np.empty(c), np.empty(c)
    with threads_for(v.size):
        _fused_forward_rows(v, None, c, _vector(weight, c, 1.0), _vector(bias, c, 0.0), float(eps), False,
                            yv, mean, rstd, should_stream(yv), True, sv)
    return y, mean, rstd


def batch_norm_add_relu_apply(x, residual, mean, rstd, weight=None, bias=None):
    """relu(BN(x) + residual) with the given (eval) statistics."""
    v = _fusable(x)
    sv = _residual_view(residual, x, v)
    if sv is None:
        return add_relu_forward(batch_norm_apply(x, mean, rstd, weight, bias), residual)[0]
    c = x.shape[1]
    y, yv = _output(x, v.shape)
    with threads_for(v.size):
        _fused_forward_rows(v, None, c, _vector(weight, c, 1.0), _vector(bias, c, 0.0), 0.0, True, yv,
                            np.ascontiguousarray(mean, dtype=np.float64), np.ascontiguousarray(rstd, dtype=np.float64),
                            should_stream(yv), True, sv)
    return y


def batch_norm_add_relu_backward(dy, r, x, mean, rstd, weight=None, training=True, need_dx=True, need_dweight=True,
                                 need_dbias=True, need_dresidual=True):
    """(dx, dweight, dbias, dresidual) of r = relu(BN(x) + residual) for the output gradient dy."""
    v = _fusable(x)
    if v is None or r.shape != x.shape or r.dtype != x.dtype or dy.dtype != x.dtype or dy.shape != x.shape:
        ds = relu_backward(r != 0, dy)
        return batch_norm_backward(ds, x, mean, rstd, weight, training, None, need_dx, need_dweight,
                                   need_dbias) + (ds,)
    c = x.shape[1]
    dyv, rv = _grad_view(dy, x, None), _view(r, None)[1]
    dx, dxv = _output(x, v.shape)
    ds, dsv = _output(x, v.shape)
    sdy, sdyx = np.empty(c), np.empty(c)
    rstd = np.ascontiguousarray(rstd, dtype=np.float64)
    with threads_for(v.size):
        _fused_backward_rows(dyv, v, None, c, np.ascontiguousarray(mean, dtype=np.float64), rstd,
                             _vector(weight, c, 1.0), training, v.size / c, dxv, sdy, sdyx, should_stream(dxv), rv,
                             dsv)
    return dx, rstd * sdyx, sdy, ds
