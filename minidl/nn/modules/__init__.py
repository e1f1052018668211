"""Layers as Modules. One file per family; each module's forward calls nn.functional."""
from .module import Module
from .activation import GELU, LogSoftmax, ReLU, Sigmoid, Softmax, Softmin, Tanh  # noqa: F401
from .activation_elementwise import (CELU, ELU, GLU, SELU, LeakyReLU, LogSigmoid, Mish, PReLU, ReLU6,  # noqa: F401
                                     Hardsigmoid, Hardswish, Hardtanh, SiLU, Softplus, Softsign, Tanhshrink)
from .activation import Softmax2d  # noqa: F401
from .activation_elementwise import Hardshrink, RReLU, Softshrink, Threshold  # noqa: F401
from .channelshuffle import ChannelShuffle  # noqa: F401
from .container import ModuleDict, ModuleList, Sequential  # noqa: F401
from .parameter_containers import ParameterDict, ParameterList  # noqa: F401
from .conv import Conv2d  # noqa: F401
from .ws_conv import WSConv2d  # noqa: F401
from .conv_nd import Conv1d, ConvTranspose1d, ConvTranspose2d  # noqa: F401
from .conv3d import Conv3d, ConvTranspose3d  # noqa: F401
from .dropout import Dropout, Dropout1d, Dropout2d, Dropout3d  # noqa: F401
from .dropout import AlphaDropout, FeatureAlphaDropout  # noqa: F401
from .flatten import Flatten, Unflatten  # noqa: F401
from .padding import (CircularPad1d, CircularPad2d, CircularPad3d, ConstantPad1d, ConstantPad2d,  # noqa: F401
                      ConstantPad3d, ReflectionPad1d, ReflectionPad2d, ReflectionPad3d, ReplicationPad1d,
                      ReplicationPad2d, ReplicationPad3d, ZeroPad1d, ZeroPad2d, ZeroPad3d)
from .upsampling import PixelShuffle, PixelUnshuffle, Upsample  # noqa: F401
from .linear import Identity, Linear  # noqa: F401
from .loss import CrossEntropyLoss, MSELoss, NLLLoss  # noqa: F401
from .loss_pointwise import BCELoss, BCEWithLogitsLoss, HuberLoss, KLDivLoss, L1Loss, SmoothL1Loss  # noqa: F401
from .loss_embedding import (CosineEmbeddingLoss, HingeEmbeddingLoss, MarginRankingLoss,  # noqa: F401
                             TripletMarginLoss)
from .loss_extra import (CTCLoss, GaussianNLLLoss, MultiLabelMarginLoss, MultiLabelSoftMarginLoss,  # noqa: F401
                         MultiMarginLoss, PoissonNLLLoss, SoftMarginLoss, TripletMarginWithDistanceLoss)
from .distance import CosineSimilarity, PairwiseDistance  # noqa: F401
from .pooling import AdaptiveAvgPool2d, AvgPool2d, MaxPool2d  # noqa: F401
from .pooling1d import (AdaptiveAvgPool1d, AdaptiveMaxPool1d, AdaptiveMaxPool2d, AvgPool1d, Fold,  # noqa: F401
                        MaxPool1d, Unfold)
from .pooling3d import AdaptiveAvgPool3d, AdaptiveMaxPool3d, AvgPool3d, MaxPool3d  # noqa: F401
from .sparse import Embedding  # noqa: F401
from .normalization import FixNorm, LayerNorm, RMSNorm, ScaleNorm  # noqa: F401
from .batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d  # noqa: F401
from .batchrenorm import BatchRenorm1d, BatchRenorm2d  # noqa: F401
from .syncbatchnorm import SyncBatchNorm  # noqa: F401
from .lazy import (LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d, LazyConv1d, LazyConv2d,  # noqa: F401
                   LazyLinear, LazyModuleMixin)
from .bilinear import Bilinear  # noqa: F401
from .embedding_bag import EmbeddingBag  # noqa: F401
from .local_response_norm import LocalResponseNorm  # noqa: F401
from .instancenorm import InstanceNorm1d, InstanceNorm2d  # noqa: F401
from .instancenorm import InstanceNorm3d  # noqa: F401
from .lazy_instancenorm import LazyInstanceNorm1d, LazyInstanceNorm2d, LazyInstanceNorm3d  # noqa: F401
from .groupnorm import GroupNorm  # noqa: F401
from .attention import MultiheadAttention  # noqa: F401
from .positional import LearnedPositionalEmbedding, RotaryEmbedding, SinusoidalPositionalEncoding  # noqa: F401
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase  # noqa: F401
from .transformer import (Transformer, TransformerDecoder, TransformerDecoderLayer,  # noqa: F401
                          TransformerEncoder, TransformerEncoderLayer)
from .norm_lstm import BatchNormLSTM, LayerNormLSTM, NormLSTM  # noqa: F401
from .pooling_extra import (FractionalMaxPool2d, LPPool1d, LPPool2d, MaxUnpool1d, MaxUnpool2d,  # noqa: F401
                            UpsamplingBilinear2d, UpsamplingNearest2d)
from .lazy import LazyConv3d, LazyConvTranspose1d, LazyConvTranspose2d, LazyConvTranspose3d  # noqa: F401
from .uninitialized import UninitializedBuffer, UninitializedParameter  # noqa: F401
from .pooling3d_extra import FractionalMaxPool3d, LPPool3d, MaxUnpool3d  # noqa: F401
from .adaptive import AdaptiveLogSoftmaxWithLoss  # noqa: F401
from .cross_map_lrn import CrossMapLRN2d  # noqa: F401
from .deprecated import Container, NLLLoss2d  # noqa: F401
