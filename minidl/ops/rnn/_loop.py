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

Devices. The loops are written once against the array namespace ``xp`` of their input (NumPy on
the CPU, ``minidl.backends.cuda``'s on cuda): buffers come from ``xp.empty``, GEMMs are
``xp.matmul``, a step's rows are slices (views) of the packed buffers, and the step's gates run
the fused kernel of the input's device (``kernels/<device>/rnn_gates.py``), chosen once per node.
"""
import numpy as np

from ...backends import namespace_of
from ...kernels.switch import ImplementationSwitch

RNN = ImplementationSwitch("rnn", "MINIDL_RNN_IMPL")
IMPLEMENTATIONS = RNN.choices
set_implementation, get_implementation, implementation = RNN.set, RNN.get, RNN.use
# Each cell's step kernels (``<cell>_step_forward`` / ``_backward``): a Function picks them once per
# node, ``ctx.impl = <CELL>_GATES.select(x)`` in forward, and backward calls the same ones.
CPU_GATES = "minidl.kernels.cpu.rnn_gates"
CUDA_GATES = "minidl.kernels.cuda.rnn_gates"


def gate_kernels(names, reference):
    """The implementations of one cell's step (``names``), with the reference in ``reference``."""
    return RNN.kernels(names, reference, cpu=CPU_GATES, cuda=CUDA_GATES)


def steps(batch_sizes, reverse):
    """[(offset, n)] for the steps in the order the forward runs them."""
    bs = [int(b) for b in batch_sizes]
    offsets = np.concatenate([[0], np.cumsum(bs, dtype=np.int64)[:-1]]) if bs else []
    out = [(int(o), b) for o, b in zip(offsets, bs)]
    return out[::-1] if reverse else out


def projection(x, w, *biases):
    """x W^T (+ each bias): the input projection of every step in one GEMM."""
    g = namespace_of(x).matmul(x, w.T)
    biases = [b for b in biases if b is not None]
    if biases:   # one pass over the (N, kH) result for both biases
        g += biases[0] if len(biases) == 1 else biases[0] + biases[1]
    return g


def transposed(w):
    """W^T as a C-contiguous copy, for the per-step GEMMs h W^T: OpenBLAS runs the (32, 256) x
    (256, 1024) product 30-50% faster from a contiguous W^T than from the transposed view of W
    (docs/performance.md); the copy is made once per layer call, not per step."""
    return namespace_of(w).ascontiguousarray(w.T)


def state(h0, dtype):
    """A writeable C-contiguous copy of an initial state (the loop updates it in place)."""
    xp = namespace_of(h0)
    out = xp.empty(h0.shape, dtype)
    xp.copyto(out, h0)
    return out


def input_grads(ctx, dg, x, w_ih):
    """dx = dG W_ih and dW_ih = dG^T x for the input projection (None where not needed)."""
    xp = namespace_of(dg)
    dx = xp.matmul(dg, w_ih) if ctx.needs_input_grad[0] else None
    dw = xp.matmul(dg.T, x) if ctx.needs_input_grad[1] else None
    return dx, dw


def bias_grad(need, dg):
    return dg.sum(axis=0) if need else None


def grad_for_reading(g, shape, dtype, like):
    """An incoming gradient the loop only reads, C-contiguous (uncopied when it already is;
    zeros on the device of ``like`` when none came)."""
    if g is None:
        return namespace_of(like).zeros(shape, dtype)
    return namespace_of(g).ascontiguousarray(g, dtype=dtype)


def grad_or_zeros(g, shape, dtype, like):
    """An incoming gradient as a writeable C-contiguous array on the device of ``like`` (zeros
    when none came)."""
    if g is None:
        return namespace_of(like).zeros(shape, dtype)
    return state(g, dtype)


def copy(a):
    """A second, unshared copy (b_ih and b_hh get equal gradients; each keeps its own .grad)."""
    return None if a is None else a.copy()
