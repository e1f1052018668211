"""What every recurrent layer (LSTM, GRU, Elman RNN) shares: the packed layout of the sequence,
the order of the steps, and the GEMMs outside the loop over time.

Layout. A layer runs on PyTorch's packed layout: ``x`` is (N, I), the steps' rows one after
the other, step t holding the first ``batch_sizes[t]`` sequences of a batch sorted by length
(longest first), N = sum(batch_sizes). A padded (T, B, I) batch of equal lengths is the same
array reshaped, with batch_sizes = [B] * T. Since batch_sizes never grows, the sequences still
running at step t are the leading rows of the state: each step works on ``h[:n]``, and a
sequence that has ended simply stops being updated, so the state left at the end is each
sequence's state at its own length, and padded steps produce no output at all.

A reverse direction runs t = T-1, ..., 0; a sequence joins when t reaches its last step, still
holding its initial state: the same prefix rule, read backwards.

Cost. The input projection x W_ih^T of every step is one (N, I) x (I, kH) GEMM before the loop;
only the hidden projection h W_hh^T depends on the previous step and runs per step. Backward
mirrors it: per step only dh_{t-1} = dG_t W_hh (a GEMM) and the gates' backward (a fused kernel);
the weight gradients are sums over the steps,

    dW_ih = sum_t dG_t^T x_t,   dW_hh = sum_t dG_t^T h_{t-1},   db = sum_t sum_rows dG_t,

accumulated as one GEMM each over the stacked steps after the loop (dG and h_{t-1} of every step
are kept in (N, .) buffers), and dx = dG W_ih is one GEMM too.
"""
import numpy as np

from ...kernels.switch import ImplementationSwitch

RNN = ImplementationSwitch("rnn", "MINIDL_RNN_IMPL")
IMPLEMENTATIONS = RNN.choices
set_implementation, get_implementation, implementation = RNN.set, RNN.get, RNN.use
# Each cell's step kernels (``<cell>_step_forward`` / ``_backward``): a Function picks them once per
# node, ``ctx.impl = <CELL>_GATES.select(x)`` in forward, and backward calls the same ones.
CPU_GATES = "minidl.kernels.cpu.rnn_gates"


def steps(batch_sizes, reverse):
    """[(offset, n)] for the steps in the order the forward runs them."""
    bs = [int(b) for b in batch_sizes]
    offsets = np.concatenate([[0], np.cumsum(bs, dtype=np.int64)[:-1]]) if bs else []
    out = [(int(o), b) for o, b in zip(offsets, bs)]
    return out[::-1] if reverse else out


def projection(x, w, *biases):
    """x W^T (+ each bias): the input projection of every step in one GEMM."""
    g = np.matmul(x, w.T)
    biases = [b for b in biases if b is not None]
    if biases:   # one pass over the (N, kH) result for both biases
        g += biases[0] if len(biases) == 1 else biases[0] + biases[1]
    return g


def state(h0, dtype):
    """A writeable copy of an initial state (the loop updates it in place)."""
    return np.array(h0, dtype=dtype, order="C", copy=True)


def input_grads(ctx, dg, x, w_ih):
    """dx = dG W_ih and dW_ih = dG^T x for the input projection (None where not needed)."""
    dx = np.matmul(dg, w_ih) if ctx.needs_input_grad[0] else None
    dw = np.matmul(dg.T, x) if ctx.needs_input_grad[1] else None
    return dx, dw


def bias_grad(need, dg):
    return dg.sum(axis=0) if need else None


def grad_or_zeros(g, shape, dtype):
    """An incoming gradient as a writeable C-contiguous array (zeros when none came)."""
    if g is None:
        return np.zeros(shape, dtype)
    return np.array(g, dtype=dtype, order="C", copy=True)


def copy(a):
    """A second, unshared copy (b_ih and b_hh get equal gradients; each keeps its own .grad)."""
    return None if a is None else a.copy()
