"""nn.TransformerEncoderLayer, TransformerEncoder, TransformerDecoderLayer, TransformerDecoder and
Transformer with PyTorch's arguments, masks, forward signatures and parameter names, so a PyTorch
state_dict loads as is and gives the same outputs.

A layer is PyTorch's: attention and feed-forward sublayers, each with dropout on its output and a
residual, and LayerNorm placed after the residual (Post-LN, ``norm_first=False``, Vaswani et al.)
or before the sublayer (Pre-LN, ``norm_first=True``; the zoo's ``norm_position="pre"``):

    post:  x = norm1(x + sa(x));          x = norm2(x + ff(x))
    pre:   x = x + sa(norm1(x));          x = x + ff(norm2(x))
    ff(x) = dropout2(linear2(dropout(activation(linear1(x)))))

The decoder layer adds cross-attention over ``memory`` between the two (norm2, its own dropout),
the feed-forward norm becoming norm3. Attention is ``nn.MultiheadAttention`` (parameters
``self_attn.in_proj_weight``, ``in_proj_bias``, ``out_proj``), which runs the one fused
``scaled_dot_product_attention`` op that the zoo's blocks run; the zoo's ``TransformerBlock``
names its parameters ``attn.qkv`` / ``mlp.fc1`` and has neither cross-attention nor arbitrary
masks, so these layers compose the same ops under PyTorch's names instead.

Masks follow PyTorch: ``*_mask`` (L, S) or (B * nhead, L, S), bool (True = may not attend) or
float (added to the scores); ``*_key_padding_mask`` (B, S), True = padding; ``is_causal`` says
the mask is the causal one (it may then be omitted).

Padded positions. In training, or wherever a gradient is recorded, padded positions hold
whatever the layers compute there. PyTorch's TransformerEncoder has an inference path
(``enable_nested_tensor``) that runs only the unpadded tokens and writes 0 at the padded ones
before the final ``norm``; it is taken when the stack allows it (``use_nested_tensor``: Post-LN
TransformerEncoderLayers, batch_first, an even number of heads, ...), the first layer is in eval
mode, no gradient is recorded, a ``src_key_padding_mask`` is given without ``mask`` and its
padding sits at the end of each row. Unpadded outputs are the same either way (padded keys are
masked out), so here the same conditions select a final ``masked_fill(padding, 0)`` of the
layers' output, before ``norm``, as PyTorch's ``to_padded_tensor(0.0)``.
"""
import copy
import math
import warnings

import numpy as np

from ...autograd import autocast_state
from ...autograd.grad_mode import is_grad_enabled
from ...tensor.tensor import Tensor
from .. import functional as F
from .. import init
from ..functional.multi_head_attention import same_kind_masks
from .attention import MultiheadAttention
from .container import ModuleList
from .dropout import Dropout
from .linear import Linear
from .module import Module
from .normalization import LayerNorm


def _activation(activation):
    if callable(activation):
        return activation
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    raise RuntimeError(f"activation should be relu/gelu, not {activation}")


def _relu_or_gelu(activation):
    """PyTorch's ``activation_relu_or_gelu``: 1 for relu, 2 for gelu, 0 for any other activation."""
    from .activation import GELU, ReLU
    if activation is F.relu or isinstance(activation, ReLU):
        return 1
    if activation is F.gelu or isinstance(activation, GELU):
        return 2
    return 0


def _check_heads(d_model, nhead):
    if d_model % nhead:
        raise AssertionError(f"embed_dim must be divisible by num_heads (d_model={d_model}, nhead={nhead})")


def _check_input(name, x, d_model):
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a Tensor, got {type(x).__name__}")
    if x.ndim not in (2, 3):
        raise AssertionError(f"{name} should be unbatched 2D or batched 3D tensor but received {x.ndim}-D "
                             f"{name} tensor")
    if x.shape[-1] != d_model:
        raise AssertionError(f"was expecting embedding dimension of {d_model}, but got {x.shape[-1]}")


def _to(module, dtype, device):
    if dtype is not None:
        module.to(dtype)
    if device is not None and str(device) != "cpu":
        module.to(device)
    return module


class _Layer(Module):
    """What encoder and decoder layers share: self-attention, the feed-forward sublayer, one
    LayerNorm and one output dropout per sublayer (``norm1``, ``dropout1``, ...) and the norms'
    placement. ``cross_attention`` adds ``multihead_attn`` (the decoder's), registered after
    ``self_attn`` as PyTorch does, so parameters come in PyTorch's order."""

    def __init__(self, d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first,
                 norm_first, bias, device, dtype, cross_attention=False):
        super().__init__()
        _check_heads(d_model, nhead)
        self.d_model, self.batch_first, self.norm_first = d_model, batch_first, norm_first
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first)
        if cross_attention:
            self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                                     batch_first=batch_first)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias)
        self.activation = _activation(activation)
        self.activation_relu_or_gelu = _relu_or_gelu(self.activation)
        sublayers = 3 if cross_attention else 2
        for i in range(1, sublayers + 1):
            setattr(self, f"norm{i}", LayerNorm(d_model, eps=layer_norm_eps, bias=bias))
        for i in range(1, sublayers + 1):
            setattr(self, f"dropout{i}", Dropout(dropout))
        _to(self, dtype, device)

    def _ff_block(self, x, drop):
        return drop(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def _attend(self, attn, drop, q, kv, mask, kpm, is_causal):
        return drop(attn(q, kv, kv, attn_mask=mask, key_padding_mask=kpm, need_weights=False,
                         is_causal=bool(is_causal))[0])

    def _residual(self, x, norm, sublayer):
        if self.norm_first:
            return x + sublayer(norm(x))
        return norm(x + sublayer(x))


class TransformerEncoderLayer(_Layer):
    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu, layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first,
                         norm_first, bias, device, dtype)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        _check_input("query", src, self.d_model)
        src_key_padding_mask, src_mask = same_kind_masks(src_key_padding_mask, "src_key_padding_mask", src_mask,
                                                          "src_mask", src.dtype)
        x = self._residual(src, self.norm1, lambda h: self._attend(self.self_attn, self.dropout1, h, h, src_mask,
                                                                    src_key_padding_mask, is_causal))
        return self._residual(x, self.norm2, lambda h: self._ff_block(h, self.dropout2))


class TransformerDecoderLayer(_Layer):
    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu, layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first,
                         norm_first, bias, device, dtype, cross_attention=True)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        _check_input("query", tgt, self.d_model)
        _check_input("key", memory, self.d_model)
        x = self._residual(tgt, self.norm1, lambda h: self._attend(self.self_attn, self.dropout1, h, h, tgt_mask,
                                                                    tgt_key_padding_mask, tgt_is_causal))
        x = self._residual(x, self.norm2, lambda h: self._attend(self.multihead_attn, self.dropout2, h, memory,
                                                                  memory_mask, memory_key_padding_mask,
                                                                  memory_is_causal))
        return self._residual(x, self.norm3, lambda h: self._ff_block(h, self.dropout3))


def _clones(layer, n):
    return ModuleList([copy.deepcopy(layer) for _ in range(n)])


def _seq_len(layers, x):
    """The sequence length of a stack's input x (0 for an empty stack), read as its layers read it."""
    if not len(layers):
        return 0
    return x.shape[1 if getattr(layers[0], "batch_first", False) and x.ndim == 3 else 0]


def _is_causal_mask(mask, size):
    """Does ``mask`` equal generate_square_subsequent_mask(size) (PyTorch's detection of the hint)?"""
    if mask is None or tuple(mask.shape) != (size, size):
        return False
    m = mask._data if isinstance(mask, Tensor) else np.asarray(mask)
    if type(m) is not np.ndarray:
        return False
    upper = np.triu(np.ones((size, size), bool), k=1)
    if m.dtype == np.bool_:
        return bool(np.array_equal(m, upper))
    return bool(np.all(np.isneginf(m[upper])) and np.all(m[~upper] == 0))


def _why_not_nested(layer):
    """Why PyTorch's TransformerEncoder would not take its nested-tensor path with ``layer``
    ("" when it would), in PyTorch's words."""
    if not isinstance(layer, TransformerEncoderLayer):
        return "encoder_layer was not TransformerEncoderLayer"
    if layer.norm_first:
        return "encoder_layer.norm_first was True"
    if not layer.self_attn.batch_first:
        return "encoder_layer.self_attn.batch_first was not True(use batch_first for better inference performance)"
    if not layer.self_attn._qkv_same_embed_dim:
        return "encoder_layer.self_attn._qkv_same_embed_dim was not True"
    if layer.self_attn.in_proj_bias is None:
        return "encoder_layer.self_attn was passed bias=False"
    if not layer.activation_relu_or_gelu:
        return "encoder_layer.activation_relu_or_gelu was not True"
    if layer.norm1.eps != layer.norm2.eps:
        return "encoder_layer.norm1.eps was not equal to encoder_layer.norm2.eps"
    if layer.self_attn.num_heads % 2 == 1:
        return "encoder_layer.self_attn.num_heads is odd"
    return ""


def _padding_positions(mask):
    """The (B, S) bool array of padded positions of a key padding mask (bool: True; float: nonzero)."""
    m = mask.detach().cpu().numpy() if isinstance(mask, Tensor) else np.asarray(mask)
    return m if m.dtype == np.bool_ else m != 0


def _left_aligned(padding):
    """Does every row keep a prefix of its tokens (padding only at the end)?"""
    keep = ~padding
    return bool(np.all(keep[:, 1:] <= keep[:, :-1])) if keep.shape[-1] > 1 else True


class TransformerEncoder(Module):
    """``num_layers`` deep copies of ``encoder_layer``, then ``norm`` (if given). In inference
    with a ``src_key_padding_mask``, padded positions come out as 0 (before ``norm``) wherever
    PyTorch takes its nested-tensor path (see the module docstring)."""

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True):
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers)
        self.num_layers, self.norm = num_layers, norm
        self.enable_nested_tensor = enable_nested_tensor
        self.use_nested_tensor = enable_nested_tensor
        self.mask_check = mask_check
        why_not = _why_not_nested(encoder_layer)
        if enable_nested_tensor and why_not:
            warnings.warn(f"enable_nested_tensor is True, but self.use_nested_tensor is False because {why_not}")
            self.use_nested_tensor = False

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        src_key_padding_mask, mask = same_kind_masks(src_key_padding_mask, "src_key_padding_mask", mask, "mask",
                                                      src.dtype)
        if is_causal is None:
            is_causal = _is_causal_mask(mask, _seq_len(self.layers, src))
        padding = self._nested_padding(src, mask, src_key_padding_mask)
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, is_causal=is_causal, src_key_padding_mask=src_key_padding_mask)
        if padding is not None:
            from ...tensor.factories import tensor
            x = x.masked_fill(tensor(padding[:, :, None]).to(x.device), 0.0)
        return x if self.norm is None else self.norm(x)

    def _nested_padding(self, src, mask, src_key_padding_mask):
        """The (B, S) padded positions to zero when PyTorch would run its nested-tensor path, else None."""
        if not (getattr(self, "use_nested_tensor", False) and len(self.layers) and src_key_padding_mask is not None):
            return None
        first = self.layers[0]
        if first.training or src.ndim != 3 or mask is not None or autocast_state.state.on:
            return None
        if is_grad_enabled() and (src.requires_grad or any(p.requires_grad for p in first.parameters())):
            return None
        padding = _padding_positions(src_key_padding_mask)
        if padding.shape != tuple(src.shape[:2]):
            return None
        if getattr(self, "mask_check", True) and not _left_aligned(padding):
            return None
        return padding


class TransformerDecoder(Module):
    """``num_layers`` deep copies of ``decoder_layer``, then ``norm`` (if given)."""

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers)
        self.num_layers, self.norm = num_layers, norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        if tgt_is_causal is None:
            tgt_is_causal = _is_causal_mask(tgt_mask, _seq_len(self.layers, tgt))
        x = tgt
        for layer in self.layers:
            x = layer(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                      tgt_key_padding_mask=tgt_key_padding_mask, memory_key_padding_mask=memory_key_padding_mask,
                      tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)
        return x if self.norm is None else self.norm(x)


class Transformer(Module):
    """The encoder-decoder of Vaswani et al., as torch.nn.Transformer (final LayerNorms on both
    stacks; every weight matrix xavier_uniform_)."""

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6, dim_feedforward=2048,
                 dropout=0.1, activation=F.relu, custom_encoder=None, custom_decoder=None, layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        _check_heads(d_model, nhead)
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                                            batch_first, norm_first, bias)
            self.encoder = TransformerEncoder(layer, num_encoder_layers, LayerNorm(d_model, eps=layer_norm_eps,
                                                                                   bias=bias))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                                            batch_first, norm_first, bias)
            self.decoder = TransformerDecoder(layer, num_decoder_layers, LayerNorm(d_model, eps=layer_norm_eps,
                                                                                   bias=bias))
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)
        _to(self, dtype, device)

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        batched = src.ndim == 3
        bdim = 0 if self.batch_first else 1
        if batched and src.shape[bdim] != tgt.shape[bdim]:
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal,
                            memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """The (sz, sz) float mask (of ``dtype``, else the default dtype) with -inf above the
        diagonal (position i sees j <= i), 0 elsewhere."""
        from ...tensor.factories import full
        out = full((sz, sz), -math.inf, dtype=dtype).triu(1)
        return out if device is None or str(device) == "cpu" else out.to(device)
