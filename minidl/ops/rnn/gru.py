"""The GRU layer (one direction of one layer of nn.GRU) as one Function over the whole sequence.

Step t (PyTorch's gate order r, z, n; the reset gate acts on the hidden projection *including
its bias* b_hn, inside the candidate, as PyTorch and cuDNN define it):

    a = x_t W_ih^T + b_ih,   b = h_{t-1} W_hh^T + b_hh            (n, 3H) each
    r = sigma(a_r + b_r),  z = sigma(a_z + b_z)
    n = tanh(a_n + r * b_n)
    h_t = (1 - z) * n + z * h_{t-1}

Backward, dh_t = dL/dh_t (output gradient plus what step t+1 sent back):

    dn = dh_t (1 - z) (1 - n^2)              (through tanh: dL/d(a_n + r b_n))
    dz = dh_t (h_{t-1} - n) z (1 - z)
    dr = dn * b_n * r (1 - r)
    da = [dr, dz, dn]                        the input side's pre-activations
    db = [dr, dz, dn * r]                    the hidden side's: the candidate sees b_n through r
    dh_{t-1} = dh_t * z + db W_hh
    dW_ih += da^T x_t,  dW_hh += db^T h_{t-1},  db_ih += sum da,  db_hh += sum db

The forward keeps (r, z, n), b_n and h_{t-1} per step. Elementwise step: ``gru_step_forward_reference`` /
``gru_step_backward_reference`` below (NumPy) or the fused kernels of
``minidl.kernels.cpu.rnn_gates`` (cuda: ``kernels.cuda.rnn_gates``); the loop is ``_loop``'s.
"""
from ...autograd.op_function import Function
from ...backends import namespace_of
from ..low_precision import float32_compute
from . import _loop


def _sigmoid(xp, x):
    return 1.0 / (1.0 + xp.exp(-x))


def gru_step_forward_reference(gates, hg, bhh, h_prev, ghn_out, h_out):
    """Reference: gates (n, 3H) = x W_ih^T + b_ih in, (r, z, n) out; hg = h W_hh^T (no bias),
    bhh added here; b_n (hidden side of the candidate, with its bias) and h_t written out."""
    xp = namespace_of(gates)
    H = h_prev.shape[1]
    b = hg + bhh
    gates[:, :2 * H] = _sigmoid(xp, gates[:, :2 * H] + b[:, :2 * H])
    r, z = gates[:, :H], gates[:, H:2 * H]
    gates[:, 2 * H:] = xp.tanh(gates[:, 2 * H:] + r * b[:, 2 * H:])
    ghn_out[...] = b[:, 2 * H:]
    h_out[...] = (1 - z) * gates[:, 2 * H:] + z * h_prev


def gru_step_backward_reference(gates, ghn, h_prev, dy, dh, dgi, dgh):
    """Reference: dgi, dgh the input and hidden sides' pre-activation gradients; dh in: the
    state's gradient from step t+1, out: its direct part z * dh_t of dL/dh_{t-1}."""
    H = h_prev.shape[1]
    r, z, n = gates[:, :H], gates[:, H:2 * H], gates[:, 2 * H:]
    dht = dy + dh
    dn = dht * (1 - z) * (1 - n * n)
    dz = dht * (h_prev - n) * z * (1 - z)
    dr = dn * ghn * r * (1 - r)
    dgi[:, :H], dgi[:, H:2 * H], dgi[:, 2 * H:] = dr, dz, dn
    dgh[:, :H], dgh[:, H:2 * H], dgh[:, 2 * H:] = dr, dz, dn * r
    dh[...] = dht * z


GRU_GATES = _loop.gate_kernels(("gru_step_forward", "gru_step_backward"), __name__)


@float32_compute   # float16/bfloat16 inputs: computed in float32, rounded once (low_precision.py)
class GRULayer(Function):
    """(y (N, H), h_n (B, H)) = GRU over packed x (N, I). Arguments: x, w_ih (3H, I), w_hh (3H, H),
    b_ih, b_hh (3H,) or None, h0 (B, H), batch_sizes, reverse."""

    @staticmethod
    def forward(ctx, x, w_ih, w_hh, b_ih, b_hh, h0, batch_sizes, reverse):
        impl = ctx.impl = GRU_GATES.select(x)   # backward runs the same implementation
        xp = namespace_of(x)
        dt = x.dtype
        N, H = x.shape[0], w_hh.shape[0] // 3
        plan = _loop.steps(batch_sizes, reverse)
        x = xp.ascontiguousarray(x)
        G = _loop.projection(x, w_ih, b_ih)
        bhh = xp.zeros(3 * H, dt) if b_hh is None else xp.ascontiguousarray(b_hh, dtype=dt)
        h = _loop.state(h0, dt)
        Y, GHN, Hprev = xp.empty((N, H), dt), xp.empty((N, H), dt), xp.empty((N, H), dt)
        hg = xp.empty((h.shape[0], 3 * H), dt)
        w_hh_t = _loop.transposed(w_hh)
        step = impl.gru_step_forward   # looked up once per layer, not once per step
        for off, n in plan:
            s = slice(off, off + n)
            Hprev[s] = h[:n]
            xp.matmul(h[:n], w_hh_t, out=hg[:n])
            step(G[s], hg[:n], bhh, Hprev[s], GHN[s], Y[s])
            h[:n] = Y[s]
        ctx.save_for_backward(x, w_ih, w_hh, G, GHN, Hprev)
        ctx.plan, ctx.has_bias, ctx.batch = plan, b_ih is not None, h.shape[0]
        return Y, h

    @staticmethod
    def backward(ctx, dY, dhn):
        x, w_ih, w_hh, G, GHN, Hprev = ctx.saved_tensors
        xp = namespace_of(x)
        dt = x.dtype
        N, H = Hprev.shape
        dY = _loop.grad_for_reading(dY, (N, H), dt, x)
        dh = _loop.grad_or_zeros(dhn, (ctx.batch, H), dt, x)
        dGI, dGH = xp.empty((N, 3 * H), dt), xp.empty((N, 3 * H), dt)
        through_w = xp.empty((ctx.batch, H), dt)
        step = ctx.impl.gru_step_backward
        for off, n in reversed(ctx.plan):
            s = slice(off, off + n)
            step(G[s], GHN[s], Hprev[s], dY[s], dh[:n], dGI[s], dGH[s])
            xp.matmul(dGH[s], w_hh, out=through_w[:n])
            xp.add(dh[:n], through_w[:n], out=dh[:n])
        need = ctx.needs_input_grad
        dx, dw_ih = _loop.input_grads(ctx, dGI, x, w_ih)
        dw_hh = xp.matmul(dGH.T, Hprev) if need[2] else None
        db_ih = _loop.bias_grad(ctx.has_bias and need[3], dGI)
        db_hh = _loop.bias_grad(ctx.has_bias and need[4], dGH)
        return dx, dw_ih, dw_hh, db_ih, db_hh, dh, None, None
