"""Losses: cross_entropy (fused log-softmax + NLL), nll_loss, mse_loss (``minidl.ops.loss``)."""
from ...ops.loss import cross_entropy, mse_loss, nll_loss  # noqa: F401
