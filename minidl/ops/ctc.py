"""Connectionist temporal classification (Graves, Fernandez, Gomez and Schmidhuber, 2006), with
PyTorch's semantics: ``ctc_loss``.

A sample has log-probabilities lp[t, c] = log y_t^c for T frames and C classes (class ``blank``
meaning "no label") and a target l of S labels. A path assigns a class to every frame; it
reads as l when, after merging repeats and dropping blanks, it spells l. The loss is
-log P(l), P(l) the summed probability prod_t y_t^{path_t} of the paths that read as l.

The extended target l' puts a blank around every label (length L = 2S + 1: blank, l_1, blank,
l_2, ..., blank). Every path that reads as l walks through l' one step at a time: from s it
stays at s, moves to s + 1, or skips to s + 2 when l'_{s+2} != l'_s (a skip over a blank
between two different labels; a blank between two equal labels cannot be skipped).

Forward variables (the paper's eqs. 5-7): alpha_t(s) is the probability of the first t + 1
frames of the paths that are at s at frame t,

    alpha_0(0) = y_0^blank,   alpha_0(1) = y_0^{l_1},   alpha_0(s) = 0 for s > 1
    alpha_t(s) = y_t^{l'_s} (alpha_{t-1}(s) + alpha_{t-1}(s-1) + [l'_s != l'_{s-2}] alpha_{t-1}(s-2))
    P(l) = alpha_{T-1}(L-1) + alpha_{T-1}(L-2)       (ending on the last blank or the last label)

Backward variables (eqs. 10-11), the probability of frames t..T-1 of the paths at s at t:

    beta_{T-1}(L-1) = y_{T-1}^blank,   beta_{T-1}(L-2) = y_{T-1}^{l_S},   else 0
    beta_t(s) = y_t^{l'_s} (beta_{t+1}(s) + beta_{t+1}(s+1) + [l'_s != l'_{s+2}] beta_{t+1}(s+2))

Both count frame t's emission, so alpha_t(s) beta_t(s) / y_t^{l'_s} is the probability of all
the paths through s at t, and for every t, sum_s alpha_t(s) beta_t(s) / y_t^{l'_s} = P(l)
(eq. 14). A class c appears at the positions s with l'_s = c, so the derivative of the loss
(eq. 15, in log space) is

    d(-log P) / d lp[t, c] = -(1 / P) sum_{s : l'_s = c} alpha_t(s) beta_t(s) / y_t^c

What PyTorch returns as the gradient with respect to log_probs is this plus y_t^c = exp(lp[t, c]):

    g[t, c] = exp(lp[t, c]) - exp(log sum_{s : l'_s = c} alpha_t(s) beta_t(s) + nll - lp[t, c])

that is, eq. 16, the gradient with respect to the unnormalised outputs u of a softmax. The two
agree wherever it matters: log_probs come from log_softmax(u), whose backward maps g to
g - softmax(u) sum_c g, and the added exp(lp) (which sums to 1 over c) is removed by it, so the
gradient reaching u is exact. (A gradcheck on log_probs themselves, as free inputs, sees the
difference; one through log_softmax does not.) Frames at or past a sample's input length get 0.

Everything is in log space (a product is a sum, a sum a logsumexp) and computed in float64.
The recursions run over t in Python, each step vectorised over the batch and the L positions,
so a sample costs O(T L). An impossible target (too long for its input length) has P = 0:
its loss is inf and its gradient nan, as PyTorch's; ``zero_infinity`` makes both 0.
"""
import numpy as np

from ..autograd import autocast_state
from ..autograd.op_function import Function
from ..tensor.tensor import Tensor

_NEG_INF = -np.inf


def _logsumexp3(a, b, c):
    """log(e**a + e**b + e**c) elementwise; -inf where all three are (PyTorch's shift by 0)."""
    m = np.maximum(np.maximum(a, b), c)
    m = np.where(m == _NEG_INF, 0.0, m)
    with np.errstate(divide="ignore"):
        return np.log(np.exp(a - m) + np.exp(b - m) + np.exp(c - m)) + m


def _shift(a, k):
    """a (N, L) moved k places right (k > 0) or left (k < 0) along L, filled with -inf."""
    out = np.full_like(a, _NEG_INF)
    if k > 0:
        out[:, k:] = a[:, :-k]
    else:
        out[:, :k] = a[:, -k:]
    return out


def extended_targets(targets, target_lengths, blank):
    """l' per sample, (N, L) with L = 2 max(S) + 1: blank at even positions, the labels at odd
    ones; ``valid`` marks s < 2 S_n + 1 and ``skip`` the s that may be reached from s - 2."""
    N = targets.shape[0]
    S = int(target_lengths.max()) if N else 0
    L = 2 * S + 1
    ext = np.full((N, L), blank, dtype=np.int64)
    ext[:, 1::2] = targets[:, :S]
    pos = np.arange(L)
    valid = pos[None, :] < (2 * target_lengths + 1)[:, None]
    skip = np.zeros((N, L), dtype=bool)
    skip[:, 2:] = ext[:, 2:] != ext[:, :-2]
    return ext, valid, skip & valid


def ctc_alpha(lpe, valid, skip, target_lengths):
    """log alpha (T, N, L) from the emissions lpe[t, n, s] = lp[t, n, l'_s] (module docstring)."""
    T, N, L = lpe.shape
    alpha = np.full((T, N, L), _NEG_INF)
    if T == 0:
        return alpha
    alpha[0, :, 0] = lpe[0, :, 0]
    if L > 1:
        alpha[0, :, 1] = np.where(target_lengths > 0, lpe[0, :, 1], _NEG_INF)
    for t in range(1, T):
        a = alpha[t - 1]
        step = _logsumexp3(a, _shift(a, 1), np.where(skip, _shift(a, 2), _NEG_INF))
        alpha[t] = np.where(valid, step + lpe[t], _NEG_INF)
    return alpha


def ctc_beta(lpe, valid, skip, input_lengths, target_lengths):
    """log beta (T, N, L), each sample started at its own last frame input_length - 1 (and -inf
    at the frames past it)."""
    T, N, L = lpe.shape
    beta = np.full((T, N, L), _NEG_INF)
    pos = np.arange(L)[None, :]
    end = 2 * target_lengths[:, None]
    last = (pos == end) | ((pos == end - 1) & (target_lengths[:, None] > 0))
    skip_up = _shift(skip.astype(float), -2) > 0      # may s + 2 be reached from s
    nxt = np.full((N, L), _NEG_INF)
    for t in range(T - 1, -1, -1):
        step = _logsumexp3(nxt, _shift(nxt, -1), np.where(skip_up, _shift(nxt, -2), _NEG_INF)) + lpe[t]
        start = np.where(last, lpe[t], _NEG_INF)
        cur = np.where((t == input_lengths - 1)[:, None], start, np.where((t < input_lengths - 1)[:, None], step,
                                                                            _NEG_INF))
        beta[t] = nxt = np.where(valid, cur, _NEG_INF)
    return beta


def ctc_nll(alpha, input_lengths, target_lengths):
    """-log P(l) per sample from log alpha at its last frame; an empty input spells only the
    empty target (loss 0, else inf)."""
    T, N, L = alpha.shape
    nll = np.where(target_lengths == 0, 0.0, np.inf)
    if T == 0 or N == 0:
        return nll
    n = np.arange(N)
    final = alpha[np.maximum(input_lengths - 1, 0), n]               # (N, L)
    end = 2 * target_lengths
    a_blank = final[n, end]
    a_label = np.where(target_lengths > 0, final[n, np.maximum(end - 1, 0)], _NEG_INF)
    with np.errstate(divide="ignore"):
        return np.where(input_lengths > 0, -np.logaddexp(a_blank, a_label), nll)


def ctc_grad(lp, ext, valid, alpha, beta, nll, input_lengths):
    """PyTorch's gradient of the per-sample losses with respect to lp (T, N, C), per unit
    cotangent: exp(lp) - exp(log sum_{s: l'_s = c} alpha beta + nll - lp), 0 at t >= the
    input length. The sum over positions of one class is a bincount, O(T L) per sample."""
    T, N, C = lp.shape
    ab = np.where(valid[None], alpha + beta, _NEG_INF)
    m = ab.max(axis=2, keepdims=True) if ab.shape[2] else np.zeros((T, N, 1))
    m = np.where(np.isfinite(m), m, 0.0)
    idx = (np.arange(T * N).reshape(T, N, 1) * C + ext[None]).reshape(-1)
    acc = np.bincount(idx, weights=np.exp(ab - m).reshape(-1), minlength=T * N * C).reshape(T, N, C)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        res = np.log(acc) + m
        grad = np.exp(lp) - np.exp(res + nll[None, :, None] - lp)
    inside = np.arange(T)[:, None] < input_lengths[None, :]
    return np.where(inside[:, :, None], grad, 0.0)


class CTCLoss(Function):
    """Per-sample CTC negative log-likelihoods (N,) of log_probs (T, N, C) and padded targets
    (N, S); the module docstring derives forward and backward. With ``zero_infinity`` an
    infinite loss and its gradient are 0."""

    @staticmethod
    def forward(ctx, log_probs, targets, input_lengths, target_lengths, blank, zero_infinity):
        lp = log_probs.astype(np.float64)
        ext, valid, skip = extended_targets(targets, target_lengths, blank)
        lpe = np.take_along_axis(lp, np.broadcast_to(ext[None], (lp.shape[0],) + ext.shape), axis=2)
        alpha = ctc_alpha(lpe, valid, skip, target_lengths)
        nll = ctc_nll(alpha, input_lengths, target_lengths)
        ctx.save_for_backward(lp, ext, valid, skip, alpha, nll, input_lengths, target_lengths)
        ctx.args = (zero_infinity, log_probs.dtype)
        if zero_infinity:
            nll = np.where(nll == np.inf, 0.0, nll)
        return nll.astype(log_probs.dtype)

    @staticmethod
    def backward(ctx, g):
        lp, ext, valid, skip, alpha, nll, input_lengths, target_lengths = ctx.saved_tensors
        zero_infinity, dtype = ctx.args
        lpe = np.take_along_axis(lp, np.broadcast_to(ext[None], (lp.shape[0],) + ext.shape), axis=2)
        beta = ctc_beta(lpe, valid, skip, input_lengths, target_lengths)
        grad = ctc_grad(lp, ext, valid, alpha, beta, nll, input_lengths)
        if zero_infinity:
            grad = np.where((nll == np.inf)[None, :, None], 0.0, grad)
        grad = grad * np.asarray(g, dtype=np.float64)[None, :, None]
        return grad.astype(dtype), None, None, None, None, None


# functional entry point ------------------------------------------------------------------

def _lengths(name, lengths, N):
    """input_lengths or target_lengths (a Tensor of an integer dtype, or a sequence of ints) as
    an int64 (N,) array."""
    if isinstance(lengths, Tensor):
        if lengths.dtype.kind not in "iu":
            raise RuntimeError(f"{name} must be integral, got a tensor of dtype {lengths.dtype}")
        a = np.asarray(lengths.detach().cpu().numpy()).reshape(-1)
    elif isinstance(lengths, (list, tuple, np.ndarray)):
        a = np.asarray(lengths)
        if a.size and a.dtype.kind not in "iu":
            raise RuntimeError(f"{name} must be integral, got {lengths!r}")
        a = a.reshape(-1)
    else:
        raise TypeError(f"ctc_loss: expected {name} to be a Tensor or a tuple of ints, got {type(lengths).__name__}")
    if a.shape[0] != N:
        raise RuntimeError(f"{name} must be of size batch_size: expected {N} lengths, got {a.shape[0]}")
    return a.astype(np.int64)


def _padded_targets(targets, target_lengths, N, C, blank):
    """targets, padded (N, S) or concatenated 1-D, as a padded int64 (N, max(S_n)) array, checked:
    class indices other than blank within each sample's target length."""
    t = targets.detach().cpu().numpy() if isinstance(targets, Tensor) else np.asarray(targets)
    if t.dtype.kind not in "iuf":
        raise RuntimeError(f"ctc_loss: expected targets of class indices, got dtype {t.dtype}")
    t = t.astype(np.int64)
    S = int(target_lengths.max()) if N else 0
    if t.ndim == 1:
        total = int(target_lengths.sum())
        if t.shape[0] != total:
            raise RuntimeError(f"ctc_loss: concatenated targets must have size sum(target_lengths) = {total} at "
                               f"dimension 0, got size {t.shape[0]}")
        padded = np.zeros((N, S), dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(target_lengths)[:-1]]).astype(np.int64)
        for n in range(N):
            padded[n, :target_lengths[n]] = t[starts[n]:starts[n] + target_lengths[n]]
    elif t.ndim == 2:
        if t.shape[0] != N:
            raise RuntimeError(f"ctc_loss: padded targets must have size {N} (the batch size) at dimension 0, got "
                               f"size {t.shape[0]}")
        if t.shape[1] < S:
            raise RuntimeError(f"ctc_loss: padded targets must have size at least max(target_lengths) = {S} at "
                               f"dimension 1, got size {t.shape[1]}")
        padded = t[:, :S]
    else:
        raise RuntimeError(f"ctc_loss: expected targets of 1 to 2 dimensions (concatenated or padded), got a "
                           f"{t.ndim}-dimensional tensor")
    used = np.arange(S)[None, :] < target_lengths[:, None]
    bad = used & ((padded < 0) | (padded >= C))
    if bad.any():
        raise RuntimeError(f"ctc_loss: targets must be class indices in [0, {C}), got {int(padded[bad][0])}")
    if (used & (padded == blank)).any():   # PyTorch documents it as invalid (and then computes a wrong gradient)
        raise RuntimeError(f"ctc_loss: targets cannot contain the blank class {blank}")
    return np.where(used, padded, 0)


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    """As ``torch.nn.functional.ctc_loss``: ``log_probs`` (T, N, C) or unbatched (T, C) hold
    log-probabilities (log_softmax over C), ``targets`` the labels padded (N, S) or
    concatenated 1-D (an unbatched target is 1-D of length target_lengths), the lengths are
    integer Tensors or tuples of ints. Targets may not contain ``blank`` (PyTorch documents
    that as invalid). "mean" divides each loss by its target length (at least 1) and averages
    over the batch; "sum" sums; "none" gives the (N,) losses. See the module docstring for the
    recursion and the gradient."""
    op = "ctc_loss"
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if not isinstance(log_probs, Tensor):
        raise TypeError(f"{op}: expected log_probs to be a Tensor, got {type(log_probs).__name__}")
    if log_probs.device != "cpu":
        raise NotImplementedError(f"{op} is not implemented for device '{log_probs.device}': its recursion runs "
                                  f"in NumPy on the host; move the tensors to the CPU with .cpu()")
    # float16/bfloat16 log_probs pass where autocast casts them to float32 for the op (minidl/amp/policy.py)
    low_cast = log_probs.dtype.name in ("float16", "bfloat16") and autocast_state.state.on and autocast_state.casts(
        op, "cpu")
    if log_probs.dtype not in (np.float32, np.float64) and not low_cast:
        raise NotImplementedError(f"\"{op}\" not implemented for '{log_probs.dtype}': expected float32 or float64 "
                                  f"log_probs")
    if log_probs.ndim not in (2, 3):
        raise RuntimeError(f"{op}: expected log_probs of shape (T, N, C) or (T, C), got shape {list(log_probs.shape)}")
    unbatched = log_probs.ndim == 2
    lp = log_probs.reshape(log_probs.shape[0], 1, log_probs.shape[1]) if unbatched else log_probs
    T, N, C = lp.shape
    if 0 in lp.shape:
        raise RuntimeError(f"{op}: log_probs tensor must not be empty, got shape {list(log_probs.shape)}")
    if not 0 <= blank < C:
        raise RuntimeError(f"{op}: blank must be in label range [0, {C}), got {blank}")
    il = _lengths("input_lengths", input_lengths, N)
    tl = _lengths("target_lengths", target_lengths, N)
    if (il < 0).any() or (il > T).any():
        bad = il[(il < 0) | (il > T)][0]
        raise RuntimeError(f"{op}: expected input_lengths to have values in [0, {T}] (T, the number of frames), "
                           f"got value {bad}")
    if (tl < 0).any():
        raise RuntimeError(f"{op}: expected target_lengths to have value at least 0, got value {tl[tl < 0][0]}")
    padded = _padded_targets(targets, tl, N, C, blank)
    loss = CTCLoss.apply(lp, padded, il, tl, int(blank), bool(zero_infinity))
    if reduction == "mean":
        from ..tensor.factories import tensor
        return (loss / tensor(np.maximum(tl, 1).astype(loss.dtype))).mean()
    if reduction == "sum":
        return loss.sum()
    return loss.reshape(()) if unbatched else loss
