"""The LSTM layer (one direction of one layer of nn.LSTM) as one Function over the whole sequence.

Step t, for the sequences still running (PyTorch's gate order i, f, g, o in the rows of W_ih,
W_hh and the biases; sigma the logistic sigmoid):

    G   = x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh          (n, 4H)
    i = sigma(G_i),  f = sigma(G_f),  g = tanh(G_g),  o = sigma(G_o)
    c_t = f * c_{t-1} + i * g
    m_t = o * tanh(c_t)
    h_t = m_t                 or, with a projection (proj_size P > 0),  h_t = m_t W_hr^T   (n, P)

Backward, with dh_t = dL/dh_t (the output's gradient plus what step t+1 sent back) and dc_t
(what step t+1 sent back through the cell state):

    dm    = dh_t                  (projection: dm = dh_t W_hr, and dW_hr += dh_t^T m_t)
    do    = dm * tanh(c_t)
    dc    = dc_t + dm * o * (1 - tanh(c_t)^2)          the cell state's total gradient
    di    = dc * g,   dg = dc * i,   df = dc * c_{t-1}
    dc_{t-1} = dc * f                                   dc flows back through the forget gate:
                                                        no weight matrix, no squashing, which
                                                        is why LSTM gradients survive long spans
    dG    = [di * i(1-i), df * f(1-f), dg * (1-g^2), do * o(1-o)]
    dh_{t-1} = dG W_hh,   dW_hh += dG^T h_{t-1},   dW_ih += dG^T x_t,   db_ih = db_hh += sum dG

The forward keeps per step the activations (i, f, g, o), c_{t-1}, c_t and h_{t-1}; the backward
recomputes tanh(c_t). The loop, the layout and the GEMMs outside it are ``_loop``'s; the step's
elementwise part is ``lstm_step_forward_reference`` / ``lstm_step_backward_reference`` below (NumPy)
or the fused kernels of ``minidl.kernels.{cpu,cuda}.rnn_gates`` (same signatures, same in-place writes).
"""
from ...autograd.op_function import Function
from ...backends import namespace_of
from ..low_precision import float32_compute
from . import _loop


def _sigmoid(xp, x):
    return 1.0 / (1.0 + xp.exp(-x))


def lstm_step_forward_reference(gates, hg, c, c_prev_out, c_out, h_out):
    """Reference: gates (n, 4H) pre-activations (input part) in, activations out; hg the hidden
    projection; c the cell state, updated in place; c_{t-1}, c_t and m_t written out."""
    xp = namespace_of(gates)
    H = c.shape[1]
    a = gates + hg
    gates[:, :2 * H] = _sigmoid(xp, a[:, :2 * H])
    gates[:, 2 * H:3 * H] = xp.tanh(a[:, 2 * H:3 * H])
    gates[:, 3 * H:] = _sigmoid(xp, a[:, 3 * H:])
    i, f, g, o = gates[:, :H], gates[:, H:2 * H], gates[:, 2 * H:3 * H], gates[:, 3 * H:]
    c_prev_out[...] = c
    c[...] = f * c + i * g
    c_out[...] = c
    h_out[...] = o * xp.tanh(c)


def lstm_step_backward_reference(gates, c, c_prev, dy, dh, dc, dgates):
    """Reference: dgates = dL/dG of the step; dc updated in place from dL/dc_t to dL/dc_{t-1}."""
    H = c.shape[1]
    i, f, g, o = gates[:, :H], gates[:, H:2 * H], gates[:, 2 * H:3 * H], gates[:, 3 * H:]
    tc = namespace_of(c).tanh(c)
    dht = dy + dh
    dct = dc + dht * o * (1 - tc * tc)
    dgates[:, :H] = dct * g * i * (1 - i)
    dgates[:, H:2 * H] = dct * c_prev * f * (1 - f)
    dgates[:, 2 * H:3 * H] = dct * i * (1 - g * g)
    dgates[:, 3 * H:] = dht * tc * o * (1 - o)
    dc[...] = dct * f


LSTM_GATES = _loop.gate_kernels(("lstm_step_forward", "lstm_step_backward"), __name__)


@float32_compute   # float16/bfloat16 inputs: computed in float32, rounded once (low_precision.py)
class LSTMLayer(Function):
    """(y (N, P), h_n (B, P), c_n (B, H)) = LSTM over packed x (N, I); see the module docstring.

    Arguments: x, w_ih (4H, I), w_hh (4H, P), b_ih, b_hh (4H,) or None, w_hr (P, H) or None,
    h0 (B, P), c0 (B, H), batch_sizes (ints), reverse (bool). P = H without a projection."""

    @staticmethod
    def forward(ctx, x, w_ih, w_hh, b_ih, b_hh, w_hr, h0, c0, batch_sizes, reverse):
        impl = ctx.impl = LSTM_GATES.select(x)   # backward runs the same implementation
        xp = namespace_of(x)
        dt = x.dtype
        N, H = x.shape[0], w_hh.shape[0] // 4
        P = H if w_hr is None else w_hr.shape[0]
        plan = _loop.steps(batch_sizes, reverse)
        x = xp.ascontiguousarray(x)
        G = _loop.projection(x, w_ih, b_ih, b_hh)
        h, c = _loop.state(h0, dt), _loop.state(c0, dt)
        Y = xp.empty((N, P), dt)
        M = Y if w_hr is None else xp.empty((N, H), dt)      # o * tanh(c) per step
        C, Cprev, Hprev = xp.empty((N, H), dt), xp.empty((N, H), dt), xp.empty((N, P), dt)
        hg = xp.empty((h.shape[0], 4 * H), dt)
        w_hh_t = _loop.transposed(w_hh)
        w_hr_t = None if w_hr is None else _loop.transposed(w_hr)
        step = impl.lstm_step_forward   # looked up once per layer, not once per step
        for off, n in plan:
            s = slice(off, off + n)
            Hprev[s] = h[:n]
            xp.matmul(h[:n], w_hh_t, out=hg[:n])
            step(G[s], hg[:n], c[:n], Cprev[s], C[s], M[s])
            if w_hr is not None:
                xp.matmul(M[s], w_hr_t, out=Y[s])
            h[:n] = Y[s]
        ctx.save_for_backward(x, w_ih, w_hh, w_hr, G, C, Cprev, Hprev, M)
        ctx.plan, ctx.has_bias, ctx.batch = plan, b_ih is not None, h.shape[0]
        return Y, h, c

    @staticmethod
    def backward(ctx, dY, dhn, dcn):
        x, w_ih, w_hh, w_hr, G, C, Cprev, Hprev, M = ctx.saved_tensors
        xp = namespace_of(x)
        dt = x.dtype
        N, H = C.shape
        P = Hprev.shape[1]
        dY = _loop.grad_for_reading(dY, (N, P), dt, x)
        B = ctx.batch
        dh = _loop.grad_or_zeros(dhn, (B, P), dt, x)
        dc = _loop.grad_or_zeros(dcn, (B, H), dt, x)
        dG = xp.empty((N, 4 * H), dt)
        proj = w_hr is not None
        if proj:
            dHP, dM, zero = xp.empty((N, P), dt), xp.empty((B, H), dt), xp.zeros((B, H), dt)
        step = ctx.impl.lstm_step_backward
        for off, n in reversed(ctx.plan):
            s = slice(off, off + n)
            if proj:
                xp.add(dY[s], dh[:n], out=dHP[s])
                xp.matmul(dHP[s], w_hr, out=dM[:n])
                step(G[s], C[s], Cprev[s], dM[:n], zero[:n], dc[:n], dG[s])
            else:
                step(G[s], C[s], Cprev[s], dY[s], dh[:n], dc[:n], dG[s])
            xp.matmul(dG[s], w_hh, out=dh[:n])
        need = ctx.needs_input_grad
        dx, dw_ih = _loop.input_grads(ctx, dG, x, w_ih)
        dw_hh = xp.matmul(dG.T, Hprev) if need[2] else None
        db = _loop.bias_grad(ctx.has_bias and (need[3] or need[4]), dG)
        dw_hr = xp.matmul(dHP.T, M) if proj and need[5] else None
        return dx, dw_ih, dw_hh, db, _loop.copy(db), dw_hr, dh, dc, None, None
