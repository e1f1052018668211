"""Losses on pairs and triplets of embeddings, with PyTorch's semantics: margin_ranking_loss,
hinge_embedding_loss, cosine_embedding_loss and triplet_margin_loss.

Each is written as PyTorch defines it, a composition of recorded ops (sub, mul, sum, sqrt,
clamp, where, minimum, pairwise_distance), so its gradient is those ops' chain rule; the
hinge max(0, m - z) is ``clamp(min=0)``, whose gradient passes at z = m, as PyTorch's
``clamp_min``. The partials each composition yields are stated in its docstring. The targets
(+1 / -1 labels) are constants: they get no gradient. Reductions: "none" (the per-sample
losses), "sum", "mean" (sum / number of samples; an empty mean is nan, as PyTorch's).
"""
from .distance import _floating_operands, pairwise_distance
from .elementwise_math import minimum
from .indexing import where
from .loss_pointwise import _check_reduction, _legacy
from ..tensor.tensor import Tensor


def _reduced(loss, reduction):
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.mean()


def _target(op, target, like):
    """The labels as a Tensor of the inputs' dtype (PyTorch promotes integer labels)."""
    if not isinstance(target, Tensor):
        raise TypeError(f"{op}: expected target to be a Tensor, got {type(target).__name__}")
    return target if target.dtype == like.dtype else target.to(like.dtype)


def _reduction(size_average, reduce, reduction):
    reduction = _legacy(size_average, reduce, reduction)
    _check_reduction(reduction)
    return reduction


def margin_ranking_loss(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    """As ``torch.nn.functional.margin_ranking_loss``: with y = +1 where input1 should rank
    higher and -1 where input2 should, l = max(0, -y (x1 - x2) + margin).
    dl/dx1 = -y and dl/dx2 = y where -y (x1 - x2) + margin >= 0, else 0."""
    reduction = _reduction(size_average, reduce, reduction)
    _floating_operands("margin_ranking_loss", [("input1", input1), ("input2", input2)])
    y = _target("margin_ranking_loss", target, input1)
    if not input1.ndim == input2.ndim == y.ndim:
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same dimension but got sizes: "
                           f"input1: {list(input1.shape)}, input2: {list(input2.shape)}, target: {list(y.shape)}")
    return _reduced((-y * (input1 - input2) + margin).clamp(min=0), reduction)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    """As ``torch.nn.functional.hinge_embedding_loss``: for distances x and labels y,
    l = x where y = 1, max(0, margin - x) where y = -1 (both terms for any other label, as
    PyTorch sums them). dl/dx = 1 where y = 1, -1 where y = -1 and x <= margin, else 0."""
    reduction = _reduction(size_average, reduce, reduction)
    _floating_operands("hinge_embedding_loss", [("input", input)])
    y = _target("hinge_embedding_loss", target, input)
    margin_term = where(y != 1, (margin - input).clamp(min=0), 0.0)
    self_term = where(y != -1, input, 0.0)
    return _reduced(margin_term + self_term, reduction)


_COSINE_EPS = 1e-12   # PyTorch's: added to each squared norm, so a zero vector gives cos = 0, not nan


def cosine_embedding_loss(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    """As ``torch.nn.functional.cosine_embedding_loss``: with c = x1 . x2 / sqrt((|x1|**2 + e)
    (|x2|**2 + e)) along the vectors' dim (e = 1e-12), l = 1 - c where y = 1 and
    max(0, c - margin) where y = -1 (0 for any other label). dl/dc = -1 (y = 1) or 1 (y = -1
    and c >= margin); dc/dx1 = x2 / D - c x1 / (|x1|**2 + e), D the denominator (x2 likewise).
    One pair is 1-D inputs with a 0-d target; a batch is 2-D (N, D) inputs with an (N,) target."""
    op = "cosine_embedding_loss"
    reduction = _reduction(size_average, reduce, reduction)
    _floating_operands(op, [("input1", input1), ("input2", input2)])
    y = _target(op, target, input1)
    if y.ndim not in (0, 1):
        raise RuntimeError(f"{op}: 0D or 1D target tensor expected, multi-target not supported; got a target "
                           f"of shape {list(y.shape)}")
    want = y.ndim + 1
    if input1.ndim != want or input2.ndim != want:
        raise RuntimeError(f"{op}: {y.ndim}D target tensor expects {want}D input tensors, but found inputs with "
                           f"sizes {list(input1.shape)} and {list(input2.shape)}.")
    d = y.ndim
    dot = (input1 * input2).sum(d)
    square1 = (input1 * input1).sum(d) + _COSINE_EPS
    square2 = (input2 * input2).sum(d) + _COSINE_EPS
    cos = dot / (square1 * square2).sqrt()
    return _reduced(where(y == 1, 1 - cos, 0.0) + where(y == -1, (cos - margin).clamp(min=0), 0.0), reduction)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, size_average=None,
                        reduce=None, reduction="mean"):
    """As ``torch.nn.functional.triplet_margin_loss``: with d(a, b) = pairwise_distance(a, b, p,
    eps) over the last dim, l = max(0, margin + d(a, pos) - d(a, neg)); ``swap`` uses
    min(d(a, neg), d(pos, neg)) as the negative distance (Balntas et al., 2016).
    dl/dd(a, pos) = 1 and dl/dd(a, neg) = -1 where the hinge is active, else 0; the distances'
    gradients are pairwise_distance's (a tie in the swap's min shares the gradient, as PyTorch)."""
    op = "triplet_margin_loss"
    reduction = _reduction(size_average, reduce, reduction)
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    _floating_operands(op, [("anchor", anchor), ("positive", positive), ("negative", negative)])
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise RuntimeError(f"{op}: The anchor, positive, and negative tensors are expected to have the same number "
                           f"of dimensions, but got: anchor {anchor.ndim}D, positive {positive.ndim}D, and "
                           f"negative {negative.ndim}D inputs")
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return _reduced((margin + d_pos - d_neg).clamp(min=0), reduction)
