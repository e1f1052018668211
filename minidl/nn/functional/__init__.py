"""The functional forms of the layers (``import minidl.nn.functional as F``).

Each family lives in its own file; the ops they call (with hand-written backwards) are
in ``minidl.ops``.
"""
from ...ops import sigmoid, tanh  # noqa: F401
from ...ops.unary import add_relu  # noqa: F401
from .activation import dropout, gelu, relu  # noqa: F401
from .activation import celu_, elu_, hardtanh_, leaky_relu_, relu_, selu_  # noqa: F401
from .activation import (alpha_dropout, feature_alpha_dropout, hardshrink, rrelu, rrelu_, softshrink,  # noqa: F401
                         threshold, threshold_)
from .activation import (celu, elu, glu, gumbel_softmax, hardsigmoid, hardswish, hardtanh, leaky_relu,  # noqa: F401
                         logsigmoid, mish, prelu, relu6, selu, silu, softmin, softplus, softsign, tanhshrink)
from .activation import log_softmax, softmax  # noqa: F401  (PyTorch's signature, with dtype=)
from .conv import conv1d, conv2d, conv_transpose1d, conv_transpose2d, fold, unfold  # noqa: F401
from .conv import conv3d, conv_transpose3d  # noqa: F401
from .linear import linear  # noqa: F401
from .layers import (bilinear, dropout1d, dropout2d, dropout3d, embedding_bag, interpolate,  # noqa: F401
                     local_response_norm, normalize, one_hot, pad, pixel_shuffle, pixel_unshuffle)
from .layers import channel_shuffle, pdist  # noqa: F401
from .loss import cross_entropy, mse_loss, nll_loss  # noqa: F401
from .loss import (binary_cross_entropy, binary_cross_entropy_with_logits, cosine_similarity,  # noqa: F401
                   huber_loss, kl_div, l1_loss, smooth_l1_loss)
from .loss import (cosine_embedding_loss, hinge_embedding_loss, margin_ranking_loss, pairwise_distance,  # noqa: F401
                   triplet_margin_loss)
from .loss_extra import (ctc_loss, gaussian_nll_loss, multi_margin_loss, multilabel_margin_loss,  # noqa: F401
                         multilabel_soft_margin_loss, poisson_nll_loss, soft_margin_loss,
                         triplet_margin_with_distance_loss)
from .pooling import adaptive_avg_pool2d, avg_pool2d, max_pool2d, relu_max_pool2d  # noqa: F401
from .pooling import (adaptive_avg_pool1d, adaptive_max_pool1d, adaptive_max_pool2d, avg_pool1d,  # noqa: F401
                      max_pool1d)
from .pooling import adaptive_avg_pool3d, adaptive_max_pool3d, avg_pool3d, max_pool3d  # noqa: F401
from .sparse import embedding  # noqa: F401
from .attention import scaled_dot_product_attention  # noqa: F401
from .normalization import layer_norm, rms_norm, scale_norm  # noqa: F401
from .normalization import add_layer_norm, add_rms_norm  # noqa: F401
from .channel_normalization import (batch_norm, batch_norm_add_relu, batch_norm_relu, group_norm,  # noqa: F401
                                    group_norm_add_relu, group_norm_relu, instance_norm, masked_batch_norm)
from .batch_renorm import batch_renorm  # noqa: F401
from .weight_standardization import weight_standardization  # noqa: F401
from .pooling_extra import (adaptive_max_pool1d_with_indices, adaptive_max_pool2d_with_indices,  # noqa: F401
                            affine_grid, fractional_max_pool2d, fractional_max_pool2d_with_indices, grid_sample,
                            lp_pool1d, lp_pool2d, max_pool1d_with_indices, max_pool2d_with_indices, max_unpool1d,
                            max_unpool2d, upsample, upsample_bilinear, upsample_nearest)
from .pooling3d_extra import (adaptive_max_pool3d_with_indices, fractional_max_pool3d,  # noqa: F401
                              fractional_max_pool3d_with_indices, lp_pool3d, max_pool3d_with_indices, max_unpool3d)
from .multi_head_attention import multi_head_attention_forward  # noqa: F401
from .conv_tbc import conv_tbc  # noqa: F401
from ...ops.channel_shuffle import channel_shuffle as native_channel_shuffle  # noqa: F401
