"""BatchNorm followed by ReLU, r = relu(BN(x)), and with a residual added before the ReLU,
r = relu(BN(x) + s) (the end of a ResNet block, s its shortcut), on the CPU: the per-channel
fused kernels of ``batch_norm`` with a ReLU epilogue, so the pair (or trio) costs BatchNorm's
passes alone.

Forward writes relu((x - mean) * rstd * gamma + beta [+ s]) where BatchNorm would write its
output: no second pass, no separate ReLU output, no mask, and no sum written and read back.
Backward reads r, the op's output (the next layer keeps it for its own backward anyway), and
uses dy only where r != 0, which is ReLU's own mask (NaN passes, 0 and -0.0 do not): the sums
and dx of BatchNorm's backward then run on that masked dy inside the same passes, so the
gradients are exactly those of the ops run one after the other (the derivation is BatchNorm's,
in ``minidl.ops.normalization.batch_norm``). With a residual whose gradient is wanted, the first
pass also writes the masked dy, ds, which the second pass then reads instead of dy and r.

Inputs the fused kernels do not take (the (N, C) layout, channels too big to stay in cache,
float16/bfloat16, a residual of another dtype) run BatchNorm's own kernels and then the
(add +) ReLU, with the same results.
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


def _residual_view(residual, x, v):
    """The kernels' rows view of the residual, or None where it cannot join x's kernels (the
    fallback then adds it)."""
    if residual.shape != x.shape:
        raise ValueError(f"batch_norm_relu: expected a residual of shape {x.shape}, got {residual.shape}")
    if v is None or residual.dtype != x.dtype:
        return None
    return _view(residual, None)[1]


def _rows(x, residual):
    """(x's rows view, the residual's) when the fused kernels take both, else None."""
    v = _fusable(x)
    if residual is None:
        return (v, None) if v is not None else None
    sv = _residual_view(residual, x, v)
    return (v, sv) if sv is not None else None


def _relu(y, residual):
    """The fallback's epilogue: relu(y), or relu(y + residual)."""
    return relu_forward(y)[0] if residual is None else add_relu_forward(y, residual)[0]


def batch_norm_relu_forward(x, weight=None, bias=None, eps=1e-5, residual=None):
    """Training forward: (relu(BN(x) [+ residual]), mean, rstd), the statistics as
    batch_norm_forward's."""
    rows = _rows(x, residual)
    if rows is None:
        y, mean, rstd = batch_norm_forward(x, weight, bias, eps)
        return _relu(y, residual), mean, rstd
    v, sv = rows
    c = x.shape[1]
    y, yv = _output(x, v.shape)
    mean, rstd = np.empty(c), np.empty(c)
    with threads_for(v.size):
        _fused_forward_rows(v, None, c, _vector(weight, c, 1.0), _vector(bias, c, 0.0), float(eps), False,
                            yv, mean, rstd, should_stream(yv), True, sv)
    return y, mean, rstd


def batch_norm_relu_apply(x, mean, rstd, weight=None, bias=None, residual=None):
    """relu(BN(x) [+ residual]) with the given (eval) statistics."""
    rows = _rows(x, residual)
    if rows is None:
        return _relu(batch_norm_apply(x, mean, rstd, weight, bias), residual)
    v, sv = rows
    c = x.shape[1]
    y, yv = _output(x, v.shape)
    with threads_for(v.size):
        _fused_forward_rows(v, None, c, _vector(weight, c, 1.0), _vector(bias, c, 0.0), 0.0, True, yv,
                            np.ascontiguousarray(mean, dtype=np.float64), np.ascontiguousarray(rstd, dtype=np.float64),
                            should_stream(yv), True, sv)
    return y


def batch_norm_relu_backward(dy, r, x, mean, rstd, weight=None, training=True, need_dx=True, need_dweight=True,
                             need_dbias=True, need_dresidual=False):
    """(dx, dweight, dbias, dresidual) of r = relu(BN(x) [+ residual]) for the output gradient dy,
    the first three as batch_norm_backward's; dresidual (dy where r != 0) only with
    ``need_dresidual``, else None."""
    v = _fusable(x)
    if v is None or r.shape != x.shape or r.dtype != x.dtype or (
            need_dresidual and (dy.dtype != x.dtype or dy.shape != x.shape)):
        ds = relu_backward(r != 0, dy)
        return batch_norm_backward(ds, x, mean, rstd, weight, training, None, need_dx, need_dweight,
                                   need_dbias) + (ds if need_dresidual else None,)
    c = x.shape[1]
    dyv, rv = _grad_view(dy, x, None), _view(r, None)[1]
    dx, dxv = _output(x, v.shape)
    ds, dsv = _output(x, v.shape) if need_dresidual else (None, None)
    sdy, sdyx = np.empty(c), np.empty(c)
    rstd = np.ascontiguousarray(rstd, dtype=np.float64)
    with threads_for(v.size):
        _fused_backward_rows(dyv, v, None, c, np.ascontiguousarray(mean, dtype=np.float64), rstd,
                             _vector(weight, c, 1.0), training, v.size / c, dxv, sdy, sdyx, should_stream(dxv), rv,
                             dsv)
    return dx, rstd * sdyx, sdy, ds
