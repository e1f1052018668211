"""Losses: cross_entropy (fused log-softmax + NLL), nll_loss, mse_loss (``minidl.ops.loss``); the elementwise
losses, the distances and the embedding / ranking losses."""
from ...ops.loss import cross_entropy, mse_loss, nll_loss  # noqa: F401
from ...ops.loss_pointwise import (binary_cross_entropy, binary_cross_entropy_with_logits, huber_loss,  # noqa: F401
                                   kl_div, l1_loss, smooth_l1_loss)
from ...ops.distance import cosine_similarity, pairwise_distance  # noqa: F401
from ...ops.loss_embedding import (cosine_embedding_loss, hinge_embedding_loss, margin_ranking_loss,  # noqa: F401
                                   triplet_margin_loss)
