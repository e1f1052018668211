"""The Elman RNN layer (one direction of one layer of nn.RNN, tanh or relu) as one Function.

Step t:

    a   = x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh           (n, H)
    h_t = tanh(a)       or  relu(a)

Backward, dh_t = dL/dh_t (output gradient plus what step t+1 sent back):

    da = dh_t * (1 - h_t^2)      (tanh' written with the output, so nothing else is kept)
    da = dh_t * [h_t > 0]        (relu)
    dh_{t-1} = da W_hh,  dW_hh += da^T h_{t-1},  dW_ih += da^T x_t,  db_ih = db_hh += sum da

Through T steps dh is multiplied by W_hh^T diag(act') T times, so it shrinks or grows
geometrically with W_hh's spectral radius: the vanishing/exploding gradient that gated cells
(LSTM's additive cell state, GRU's interpolation) were designed around.
"""
from ...autograd.op_function import Function
from ...backends import namespace_of
from ..low_precision import float32_compute
from . import _loop


def rnn_step_forward_reference(gates, hg, h_out, relu):
    """Reference: h_t = act(gates + hg); gates holds the input side with both biases."""
    xp = namespace_of(gates)
    a = gates + hg
    h_out[...] = xp.maximum(a, 0) if relu else xp.tanh(a)


def rnn_step_backward_reference(h, dy, dh, dgates, relu):
    """Reference: dgates = (dy + dh) * act'(a), act' read off the output h."""
    d = dy + dh
    dgates[...] = namespace_of(h).where(h > 0, d, 0) if relu else d * (1 - h * h)


RNN_GATES = _loop.gate_kernels(("rnn_step_forward", "rnn_step_backward"), __name__)


@float32_compute   # float16/bfloat16 inputs: computed in float32, rounded once (low_precision.py)
class RNNLayer(Function):
    """(y (N, H), h_n (B, H)) = Elman RNN over packed x (N, I). Arguments: x, w_ih (H, I),
    w_hh (H, H), b_ih, b_hh (H,) or None, h0 (B, H), batch_sizes, reverse, relu (bool)."""

    @staticmethod
    def forward(ctx, x, w_ih, w_hh, b_ih, b_hh, h0, batch_sizes, reverse, relu):
        impl = ctx.impl = RNN_GATES.select(x)   # backward runs the same implementation
        xp = namespace_of(x)
        dt = x.dtype
        N, H = x.shape[0], w_hh.shape[0]
        plan = _loop.steps(batch_sizes, reverse)
        x = xp.ascontiguousarray(x)
        G = _loop.projection(x, w_ih, b_ih, b_hh)
        h = _loop.state(h0, dt)
        Y, Hprev = xp.empty((N, H), dt), xp.empty((N, H), dt)
        hg = xp.empty((h.shape[0], H), dt)
        w_hh_t = _loop.transposed(w_hh)
        step = impl.rnn_step_forward   # looked up once per layer, not once per step
        for off, n in plan:
            s = slice(off, off + n)
            Hprev[s] = h[:n]
            xp.matmul(h[:n], w_hh_t, out=hg[:n])
            step(G[s], hg[:n], Y[s], relu)
            h[:n] = Y[s]
        ctx.save_for_backward(x, w_ih, w_hh, Y, Hprev)
        ctx.plan, ctx.relu = plan, relu
        ctx.has_bias, ctx.batch = b_ih is not None, h.shape[0]
        return Y, h

    @staticmethod
    def backward(ctx, dY, dhn):
        x, w_ih, w_hh, Y, Hprev = ctx.saved_tensors
        xp = namespace_of(x)
        dt = x.dtype
        N, H = Y.shape
        dY = _loop.grad_for_reading(dY, (N, H), dt, x)
        dh = _loop.grad_or_zeros(dhn, (ctx.batch, H), dt, x)
        dG = xp.empty((N, H), dt)
        step = ctx.impl.rnn_step_backward
        for off, n in reversed(ctx.plan):
            s = slice(off, off + n)
            step(Y[s], dY[s], dh[:n], dG[s], ctx.relu)
            xp.matmul(dG[s], w_hh, out=dh[:n])
        need = ctx.needs_input_grad
        dx, dw_ih = _loop.input_grads(ctx, dG, x, w_ih)
        dw_hh = xp.matmul(dG.T, Hprev) if need[2] else None
        db = _loop.bias_grad(ctx.has_bias and (need[3] or need[4]), dG)
        return dx, dw_ih, dw_hh, db, _loop.copy(db), dh, None, None, None
