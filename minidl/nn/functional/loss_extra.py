"""Further losses: the likelihoods of a Poisson and a Gaussian (``minidl.ops.loss_likelihood``), the
margin and logistic classification losses (``minidl.ops.loss_margin``) and CTC (``minidl.ops.ctc``)."""
from ...ops.ctc import ctc_loss  # noqa: F401
from ...ops.loss_likelihood import gaussian_nll_loss, poisson_nll_loss  # noqa: F401
from ...ops.loss_margin import (multi_margin_loss, multilabel_margin_loss, multilabel_soft_margin_loss,  # noqa: F401
                                soft_margin_loss, triplet_margin_with_distance_loss)
