"""autocast's op policy: which dtype each op runs in, as PyTorch's tables say, in one place.

Every differentiable op is one ``Function`` subclass, and every call of one goes through
``Function.apply``. That is the seam: when autocast is enabled in the thread (a thread-local
flag, ``autograd/autocast_state.py``, checked only while some thread has autocast on),
``apply`` looks the op's class up in ``RULES`` and, when it is there, hands the call to ``run``
below, which casts the op's Tensor arguments by the op's rule for their device, then calls the
op. No op knows about autocast.

The rules (PyTorch's names, from its autocast op reference):

- ``lower`` (linear, matmul/mm/bmm, addmm/baddbmm/addbmm, einsum, conv, conv_transpose,
  prelu, scaled_dot_product_attention, the LSTM/GRU/RNN layers): the floating inputs are cast to the low dtype
  (float16 or bfloat16), and the op runs as a tensor core runs it: products of the rounded
  inputs accumulated in float32 (float32 BLAS, or the device's float32 tiled matmul), the
  output rounded to the low dtype once, its backward likewise (``ops/low_precision.py``).
- ``fp32`` (losses, the 3-D and fractional poolings, max_unpool and grid_sample on the CPU and,
  on cuda, softmax, log_softmax, exp, log, pow, sum, layer_norm, group_norm...): float16/bfloat16
  inputs are cast to float32, the op runs in float32.
- ``promote`` (cat, stack on the CPU; bilinear, scatter_add on cuda): the floating inputs are
  cast to the widest floating dtype among them, as PyTorch picks it: starting from the low
  dtype, a float32 input makes it float32, float64 inputs are skipped (and left as they are),
  and a low-precision input of the other kind (float16 in a bfloat16 region, or the reverse)
  met before any float32 one is an error, PyTorch's RuntimeError.
- ``promote_sum`` (the fused residual add + norm): the two summands are cast to the wider of
  their dtypes, as the unfused ``x + r`` promotes; the parameters stay as they are.
- ``like_state`` (the GRU on the CPU, whose PyTorch layer and cell are a loop of linears and
  pointwise ops: the gates come out in the low dtype and ``h' = (1 - z) n + z h`` promotes them
  with the state h, so the output has the state's dtype, float32 for a float32 state whatever
  the input's): input and weights cast to the dtype of the state (the zero state a layer makes
  when none is given has the input's dtype). The gates then run in that dtype too, where PyTorch
  rounds the gate products to the low dtype first: the same dtypes, values within that rounding.
- ``banned`` (binary_cross_entropy on cuda): refused with PyTorch's message.
- ops without a rule run in whatever dtype their inputs have; a binary op of a low-precision
  and a float32 tensor then promotes to float32 by the ordinary rules (``ops/arithmetic.py``).

As in PyTorch, a float64 tensor is never cast, nor is a tensor of another device or a
non-floating one. The CPU and cuda tables differ as PyTorch's do: on the CPU softmax, the
norms, exp/log/pow and sum have no rule (they run in the input's dtype), on cuda they run in
float32; batch_norm has no rule on either device (its kernels read a low-precision input with
float32 parameters and return the input's dtype).

The casts are ordinary recorded ops (``Cast``), whose backward casts the gradient back, so a
float32 master weight gets a float32 gradient. The cast of a weight (a float32 leaf that
requires grad, not a view) to the low dtype is cached until the outermost autocast region
exits (``cache_enabled``), so a weight used by several ops in one forward pass is rounded once;
the cache is per grad mode (a cast made under no_grad has no history to give). Unlike PyTorch,
an entry is also renewed when the weight was written in place since (its version counter
moved), so a region that updates its weights never reads a stale copy.
"""
import importlib

import numpy as np

from ..autograd import autocast_state, grad_mode
from ..autograd import op_function as _op_function
from ..ops.shape import Cast
from ..tensor import dtype as dtypes

LOWER, FP32, PROMOTE, BANNED = "lower_precision_fp", "fp32", "promote", "banned"
PROMOTE_SUM = "promote_sum"   # a fused x + r then op: x and r promoted as the unfused + would
LIKE_STATE = "like_state"     # the other floating operands cast to the recurrent state's dtype

# minidl Function (module:class)            name in minidl's dtype checks    cpu      cuda
TABLE = (
    ("linear:Linear",                          "linear",                          LOWER,   LOWER),
    ("linalg:MatMul",                          "matmul",                          LOWER,   LOWER),
    # linear + GELU fused (a Transformer MLP): linear's rule; GELU then runs on the float32
    # product before the one rounding, where the unfused pair would round twice
    ("linear_gelu:LinearGelu",                 "linear_gelu",                     LOWER,   LOWER),
    ("conv:Conv2d",                            "conv2d",                          LOWER,   LOWER),
    ("conv_transpose:ConvTranspose2d",         "conv_transpose2d",                LOWER,   LOWER),
    ("conv3d:Conv3d",                          "conv3d",                          LOWER,   LOWER),
    ("conv3d:ConvTranspose3d",                 "conv_transpose3d",                LOWER,   LOWER),
    ("attention:ScaledDotProductAttention",    "scaled_dot_product_attention",    LOWER,   LOWER),
    ("activation_elementwise:PReLU",           "prelu",                           LOWER,   LOWER),
    # recurrent layers (PyTorch: mkldnn_rnn_layer on the CPU, the cudnn RNN on cuda)
    ("rnn.lstm:LSTMLayer",                     "LSTM",                            LOWER,   LOWER),
    ("rnn.gru:GRULayer",                       "GRU",                             LIKE_STATE, LOWER),
    ("rnn.rnn_cell:RNNLayer",                  "RNN",                             LOWER,   LOWER),
    # the cells run one step of the same layers (the names let their dtype checks pass under autocast)
    ("rnn.lstm:LSTMLayer",                     "LSTMCell",                        LOWER,   LOWER),
    ("rnn.gru:GRULayer",                       "GRUCell",                         LIKE_STATE, LOWER),
    ("rnn.rnn_cell:RNNLayer",                  "RNNCell",                         LOWER,   LOWER),
    ("addmm:AddMatMul",                        "addmm",                           LOWER,   LOWER),
    ("addmm:AddMatMul",                        "baddbmm",                         LOWER,   LOWER),
    ("addmm:AddMatMul",                        "addbmm",                          LOWER,   LOWER),
    ("einsum:Einsum",                          "einsum",                          LOWER,   LOWER),
    # losses
    ("loss:CrossEntropy",                      "cross_entropy",                   FP32,    FP32),
    ("loss:CrossEntropyProbs",                 "cross_entropy",                   FP32,    FP32),
    ("loss:NLLLoss",                           "nll_loss",                        FP32,    FP32),
    ("loss:MSELoss",                           "mse_loss",                        FP32,    FP32),
    ("loss_pointwise:L1",                      "l1_loss",                         FP32,    FP32),
    ("loss_pointwise:SmoothL1",                "smooth_l1_loss",                  FP32,    FP32),
    ("loss_pointwise:Huber",                   "huber_loss",                      FP32,    FP32),
    ("loss_pointwise:KLDiv",                   "kl_div",                          FP32,    FP32),
    ("loss_pointwise:BinaryCrossEntropyWithLogits", "binary_cross_entropy_with_logits", FP32, FP32),
    ("loss_pointwise:BinaryCrossEntropy",      "binary_cross_entropy",            FP32,    BANNED),
    ("loss_margin:SoftMargin",                 "soft_margin_loss",                FP32,    FP32),
    ("loss_margin:MultiMargin",                "multi_margin_loss",               FP32,    FP32),
    ("loss_margin:MultiLabelMargin",           "multilabel_margin_loss",          FP32,    FP32),
    ("loss_likelihood:PoissonNLL",             "poisson_nll_loss",                FP32,    FP32),
    ("ctc:CTCLoss",                            "ctc_loss",                        FP32,    None),
    # poolings and resampling that PyTorch's CPU table runs in float32
    ("pooling3d:MaxPool3d",                    "max_pool3d",                      FP32,    None),
    ("pooling3d:AvgPool3d",                    "avg_pool3d",                      FP32,    None),
    ("pooling3d:AdaptiveAvgPool3d",            "adaptive_avg_pool3d",             FP32,    None),
    ("pooling3d:AdaptiveMaxPool3d",            "adaptive_max_pool3d",             FP32,    None),
    ("fractional_pool:FractionalMaxPool2d",    "fractional_max_pool2d",           FP32,    None),
    ("fractional_pool3d:FractionalMaxPool3d",  "fractional_max_pool3d",           FP32,    None),
    ("unpool:MaxUnpool2d",                     "max_unpool2d",                    FP32,    None),
    ("grid_sample:GridSample2d",               "grid_sampler",                    FP32,    None),
    # linear algebra that PyTorch's CPU table runs in float32 (no LAPACK for the 2-byte dtypes); the
    # names are the ones the ops' dtype checks (ops/linalg_*.py) ask about
    ("linalg_solve:InvEx",                     "linalg.inv",                      FP32,    None),
    ("linalg_solve:InvEx",                     "linalg.inv_ex",                   FP32,    None),
    ("linalg_solve:SolveEx",                   "linalg.solve",                    FP32,    None),
    ("linalg_solve:SolveEx",                   "linalg.solve_ex",                 FP32,    None),
    ("linalg_factor:CholeskyEx",               "linalg.cholesky",                 FP32,    None),
    ("linalg_factor:CholeskyEx",               "linalg.cholesky_ex",              FP32,    None),
    ("linalg_decompositions:QR",               "linalg.qr",                       FP32,    None),
    ("linalg_decompositions:Eigh",             "linalg.eigh",                     FP32,    None),
    ("linalg_decompositions:EigvalsH",         "linalg.eigh",                     FP32,    None),
    ("linalg_decompositions:SVD",              "linalg.svd",                      FP32,    None),
    ("linalg_decompositions:SvdVals",          "linalg.svd",                      FP32,    None),
    ("linalg_pseudoinverse:Lstsq",             "torch.linalg.lstsq",              FP32,    None),
    ("linalg_factor:CholeskySolve",            "cholesky_solve",                  FP32,    None),
    ("linalg_householder:Geqrf",               "geqrf",                           FP32,    None),
    # reductions and pointwise math
    ("cumulative:Prod",                        "prod",                            FP32,    FP32),
    ("cumulative:Cumsum",                      "cumsum",                          None,    FP32),
    ("cumulative:Cumprod",                     "cumprod",                         None,    FP32),
    ("cumulative:LogSumExp",                   "logsumexp",                       None,    FP32),
    ("reduction:Sum",                          "sum",                             None,    FP32),
    ("softmax:Softmax",                        "softmax",                         None,    FP32),
    ("softmax:LogSoftmax",                     "log_softmax",                     None,    FP32),
    ("unary:Exp",                              "exp",                             None,    FP32),
    ("unary:Log",                              "log",                             None,    FP32),
    ("arithmetic:Pow",                         "pow",                             None,    FP32),
    ("trigonometric:Tan",                      "tan",                             None,    FP32),
    ("elementwise_math:Log1p",                 "log1p",                           None,    FP32),
    ("elementwise_math:Expm1",                 "expm1",                           None,    FP32),
    ("activation_elementwise:Softplus",        "softplus",                        None,    FP32),
    ("distance:CosineSimilarity",              "cosine_similarity",               None,    FP32),
    ("normalize:Normalize",                    "normalize",                       None,    FP32),
    # norms (PyTorch: layer_norm and group_norm in float32 on cuda; the CPU runs them as they come)
    ("normalization.layer_norm:LayerNormFunction", "layer_norm",                  None,    FP32),
    # residual add fused with the norm: the unfused x + r promotes (a float32 residual stream plus
    # a low-precision sublayer output is float32), then the norm's own rule
    ("normalization.residual_norm:AddLayerNormFunction", "add_layer_norm",        PROMOTE_SUM, FP32),
    ("normalization.residual_norm:AddRMSNormFunction", "add_rms_norm",            PROMOTE_SUM, PROMOTE_SUM),
    ("normalization.group_norm:GroupNormFunction", "group_norm",                  None,    FP32),
    # promotion of mixed floating inputs
    ("join:Cat",                               "cat",                             PROMOTE, None),
    ("join:Stack",                             "stack",                           PROMOTE, None),
    ("bilinear:Bilinear",                      "bilinear",                        None,    PROMOTE),
    ("scatter:ScatterAdd",                     "scatter_add",                     None,    PROMOTE),
)

# functions that PyTorch's tables name but minidl composes of other ops (no Function of their own
# carries the rule): ``run_composite`` casts their operands, then runs them with autocast off, as
# PyTorch's autocast layer runs such an op whole
#  name                                  cpu      cuda
COMPOSITES = (
    ("pinverse",                         FP32,    None),
    ("trace",                            FP32,    None),
    ("cdist",                            FP32,    FP32),
    ("linalg.matrix_rank",               FP32,    None),
    ("linalg.householder_product",       FP32,    None),
    ("linalg.vecdot",                    LOWER,   None),
    ("triangular_solve",                 FP32,    None),
)

DEVICES = ("cpu", "cuda")
# the low dtype of a device whose dtype was never set (a region or set_autocast_dtype sets it)
DEFAULT_DTYPE = {"cpu": "bfloat16", "cuda": "float16"}
_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_BF16 = dtypes.bfloat16.dtype if dtypes.bfloat16 is not None else None


_NAMES = {}   # Function class -> the op's name, for messages
# the position of the recurrent state among the arguments of a like_state op
STATE_ARG = {"rnn.gru:GRULayer": 5}
_STATE_INDEX = {}   # Function class -> that position


def _load():
    """Fill autocast_state.RULES (by Function class) and RULES_BY_NAME (by op name) from TABLE.
    An op module that is missing (an optional part) is skipped."""
    for where, name, *rules in TABLE:
        module, cls_name = where.split(":")
        try:
            cls = getattr(importlib.import_module(f"minidl.ops.{module}"), cls_name)
        except (ImportError, AttributeError):
            continue
        per_device = {d: r for d, r in zip(DEVICES, rules) if r is not None}
        if LIKE_STATE in rules:
            _STATE_INDEX[cls] = STATE_ARG[where]
        autocast_state.RULES[cls] = per_device
        _NAMES.setdefault(cls, name)
        autocast_state.RULES_BY_NAME.setdefault(name, {}).update(per_device)
    for name, *rules in COMPOSITES:
        autocast_state.RULES_BY_NAME.setdefault(name, {}).update(
            {d: r for d, r in zip(DEVICES, rules) if r is not None})


_BANNED_MESSAGES = {
    "binary_cross_entropy": (
        "minidl.nn.functional.binary_cross_entropy and minidl.nn.BCELoss are unsafe to autocast.\n"
        "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
        "In this case, combine the two layers using minidl.nn.functional.binary_cross_entropy_with_logits\n"
        "or minidl.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
        "safe to autocast."),
}


def _device_type(data):
    return "cpu" if type(data) is np.ndarray else "cuda"


def _eligible(a, device):
    """A floating tensor of the autocast device that is not float64: what autocast casts."""
    if not isinstance(a, _op_function.Tensor):
        return False
    dt = a._data.dtype
    return (dt.kind == "f" or dt == _BF16) and dt != _F64 and _device_type(a._data) == device


def _call(cls, args):
    """cls.apply(*args) with autocast off for the op itself (its own internals are not cast
    again, as in PyTorch, where the autocast layer is excluded while the op runs)."""
    state = autocast_state.state
    state.on = False
    try:
        return cls.apply(*args)
    finally:
        state.on = True


def outside_autocast(fn, *args):
    """fn(*args) with autocast's casts off in this thread while it runs: for a function that PyTorch
    lists under no autocast rule but that minidl composes of ops that have one (dot and mv are
    matmuls here, yet torch.dot and torch.mv run in their inputs' dtype under autocast)."""
    state = autocast_state.state
    if not state.on:
        return fn(*args)
    state.on = False
    try:
        return fn(*args)
    finally:
        state.on = True


def run_composite(name, fn, *args):
    """``fn(*args)`` for the function PyTorch names ``name`` in COMPOSITES, under its rule for the
    device of its first Tensor argument: its float16/bfloat16/float32 operands cast to float32
    (``fp32``) or to the low dtype (``lower_precision_fp``), then fn run with autocast off (the ops
    it is made of are not cast again). Without autocast, or without a rule there, ``fn(*args)``."""
    state = autocast_state.state
    if not state.on:
        return fn(*args)
    device = next((_device_type(a._data) for a in args if isinstance(a, _op_function.Tensor)), None)
    rule = autocast_state.RULES_BY_NAME.get(name, {}).get(device) if device is not None and state.enabled[device] \
        else None
    if rule is None:
        return fn(*args)
    if rule == LOWER:
        low = low_dtype(device, state)
        args = [_lowered(a, low, state) if _eligible(a, device) else a for a in args]
    else:
        args = [Cast.apply(a, _F32) if _eligible(a, device) and a._data.dtype != _F32 else a for a in args]
    return outside_autocast(fn, *args)


def lowers(device):
    """True when autocast lowers a matmul on ``device`` in this thread now (a composite that ends in
    one, such as linalg.pinv, then returns the low dtype, as PyTorch's does)."""
    state = autocast_state.state
    return state.on and state.enabled.get(device, False)


def _lowered(a, low, state):
    """Cast(a, low), from the region's cache for a weight."""
    if a._data.dtype == low:
        return a
    cacheable = (state.cache_enabled and a._requires_grad and a._node is None and a._base is None
                 and a._data.dtype == _F32)
    if not cacheable:
        return Cast.apply(a, low)
    key = (id(a), low, grad_mode._state.enabled)
    hit = state.cache.get(key)
    version = a._version_counter.value
    if hit is not None and hit[0] is a and hit[1] == version:
        return hit[2]
    out = Cast.apply(a, low)
    state.cache[key] = (a, version, out)    # holds the weight: the key's id stays its own
    return out


def low_dtype(device, state):
    """The NumPy dtype autocast lowers to on ``device`` in this thread: the region's, or the
    device's default when autocast was turned on by ``set_autocast_enabled`` alone."""
    d = state.dtype[device]
    return np.dtype(dtypes.to_dtype(dtypes.by_name(DEFAULT_DTYPE[device]) if d is None else d))


def _lower(cls, args, device, state):
    low = low_dtype(device, state)
    new, cast, kept = [], False, None
    for a in args:
        if _eligible(a, device):
            a, cast = _lowered(a, low, state), True
        elif isinstance(a, _op_function.Tensor) and (a._data.dtype == _F64 or a._data.dtype.kind in "iu"):
            kept = a
        new.append(a)
    if cast and kept is not None:   # float64 and integers are never cast: PyTorch refuses the mix as well
        raise dtypes.DtypeMismatchError(
            f"{_NAMES[cls]}: expected all operands in one floating dtype under autocast, but got "
            f"{dtypes.name_of(kept._data.dtype)} and {dtypes.name_of(low)} (autocast casts float32, float16 and "
            f"bfloat16 operands to {dtypes.name_of(low)}, never float64 or integer ones)")
    return _call(cls, new)


def _cast_all(cls, args, device, target):
    new = [Cast.apply(a, target) if _eligible(a, device) and a._data.dtype != target else a for a in args]
    return _call(cls, new)


def _promoted(cls, args, device, state):
    """The dtype a ``promote`` op casts its floating operands to: PyTorch's ``prioritize``, which
    starts from the low dtype, goes to float32 at the first float32 operand and refuses a
    low-precision operand of the other kind while it is still at the low dtype (float64
    operands are not eligible, so they neither count nor get cast)."""
    low = low_dtype(device, state)
    current = low
    for a in args:
        if not _eligible(a, device):
            continue
        dt = a._data.dtype
        if current == _F32 or dt == _F32:
            current = _F32
        elif dt != low:
            raise RuntimeError(f"{_NAMES[cls]}: under autocast to {dtypes.name_of(low)}, expected floating operands "
                               f"in {dtypes.name_of(low)}, float32 or float64 (a float32 one before any other), but "
                               f"got {dtypes.name_of(dt)}")
    return current


def run(cls, args):
    """Call the op ``cls`` with ``args`` under its autocast rule for the device of its first
    Tensor argument (Function.apply hands every call of an op in RULES here)."""
    state = autocast_state.state
    device = next((_device_type(a._data) for a in args if isinstance(a, _op_function.Tensor)), None)
    rule = autocast_state.RULES[cls].get(device) if device is not None and state.enabled[device] else None
    if rule is None:
        return _call(cls, args)
    if rule == LOWER:
        return _lower(cls, args, device, state)
    if rule == FP32:
        return _cast_all(cls, args, device, _F32)
    if rule == PROMOTE:
        if not any(_eligible(a, device) for a in args):
            return _call(cls, args)
        return _cast_all(cls, args, device, _promoted(cls, args, device, state))
    if rule == LIKE_STATE:
        h = args[_STATE_INDEX[cls]]
        dt = h._data.dtype if isinstance(h, _op_function.Tensor) else getattr(h, "dtype", None)
        if dt is None or not (dt.kind == "f" or dt == _BF16) or dt == _F64:
            return _call(cls, args)
        return _cast_all(cls, args, device, dt)
    if rule == PROMOTE_SUM:
        x, r = args[:2]
        if _eligible(x, device) and _eligible(r, device) and x._data.dtype != r._data.dtype:
            wide = np.result_type(x._data.dtype, r._data.dtype)
            args = tuple(Cast.apply(a, wide) if a._data.dtype != wide else a for a in (x, r)) + tuple(args[2:])
        return _call(cls, args)
    raise RuntimeError(_BANNED_MESSAGES[_NAMES[cls]])


_load()
autocast_state.run = run
