"""Parameter initialisation, as ``torch.nn.init``: every function fills a tensor in place
(outside the graph) from minidl.random's generator and returns it.

fan_in / fan_out of a weight of shape (out, in, *kernel) are in * prod(kernel) and
out * prod(kernel). Kaiming (He) keeps the activations' variance: std = gain / sqrt(fan);
Xavier (Glorot) averages both directions: std = gain * sqrt(2 / (fan_in + fan_out)). A
uniform U(-b, b) has std b / sqrt(3), so the uniform variants use b = sqrt(3) * std.
A tensor without elements (say the weight of Linear(0, n)) has no fan to scale by: these
leave it as it is, with PyTorch's warning.
"""
import math
import warnings

import numpy as np

from ..autograd import grad_mode
from ..autograd import versions
from ..tensor.dtype import check_floating
from ..tensor.generator import numpy_generator


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity (PyTorch's table)."""
    linear_fns = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                  "conv_transpose3d", "sigmoid")
    if nonlinearity in linear_fns:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"calculate_gain: negative_slope {param!r} is not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


def _calculate_fan_in_and_fan_out(tensor):
    if tensor.ndim < 2:
        raise ValueError(f"fan in and fan out can not be computed for a tensor with fewer than 2 dimensions "
                         f"(got shape {list(tensor.shape)})")
    receptive = int(np.prod(tensor.shape[2:])) if tensor.ndim > 2 else 1
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _no_elements(tensor):
    """True (after PyTorch's warning) when ``tensor`` has no element to initialise."""
    if tensor.numel() == 0:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return True
    return False


def _fill(tensor, values):
    """Write ``values`` into ``tensor`` in place, outside the graph (so a leaf that requires
    grad may be initialised and no history is recorded), counting it as an in-place write as
    PyTorch's ``tensor.uniform_()`` under no_grad does: a backward that saved the old values
    then raises instead of using the new ones."""
    with grad_mode.no_grad():
        tensor._data[...] = values
    versions.bump(tensor._version_counter)
    return tensor


def _floating(tensor, op):
    """Random draws only fit a floating tensor: NumPy would truncate them into an integer one
    (PyTorch: "normal_kernel_cpu" not implemented for 'Long')."""
    check_floating(f"nn.init.{op}", tensor.dtype, "tensor")


def _gen(generator):
    """The NumPy generator to draw from: ``generator``'s (an md.Generator, as PyTorch's
    ``generator=`` takes, or a NumPy Generator), or minidl's global one."""
    return numpy_generator(generator)


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    _floating(tensor, "uniform_")
    return _fill(tensor, _gen(generator).uniform(a, b, tensor.shape))


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    _floating(tensor, "normal_")
    return _fill(tensor, _gen(generator).normal(mean, std, tensor.shape))


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """N(mean, std) conditioned on [a, b] (bounds in absolute terms, as PyTorch), by inverse-CDF
    sampling: u ~ U(Phi(alpha), Phi(beta)), x = mean + std * Phi^{-1}(u)."""
    _floating(tensor, "trunc_normal_")
    gen = _gen(generator)

    def cdf(v):
        return 0.5 * (1.0 + math.erf(v / math.sqrt(2.0)))
    lo, hi = cdf((a - mean) / std), cdf((b - mean) / std)
    u = gen.uniform(2 * lo - 1, 2 * hi - 1, tensor.shape)
    x = mean + std * math.sqrt(2.0) * _erfinv(u)
    return _fill(tensor, np.clip(x, a, b))


def _erfinv(y):
    """Inverse error function: Giles' single-precision approximation, then two Newton steps
    on erf (which make it accurate to float64 rounding)."""
    y = np.clip(np.asarray(y, dtype=np.float64), -1 + 1e-15, 1 - 1e-15)
    w = -np.log((1.0 - y) * (1.0 + y))
    small = w < 5.0
    ws = np.where(small, w - 2.5, np.sqrt(np.maximum(w, 5.0)) - 3.0)
    p_small = [2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
               -0.00125372503, -0.00417768164, 0.246640727, 1.50140941]
    p_large = [-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
               -0.0076224613, 0.00943887047, 1.00167406, 2.83297682]
    ps = np.zeros_like(ws)
    pl = np.zeros_like(ws)
    for cs, cl in zip(p_small, p_large):   # Horner
        ps = ps * ws + cs
        pl = pl * ws + cl
    x = np.where(small, ps, pl) * y
    erf = np.vectorize(math.erf, otypes=[np.float64])
    for _ in range(2):
        x = x - (erf(x) - y) / (2.0 / math.sqrt(math.pi) * np.exp(-x * x))
    return x


def constant_(tensor, val):
    return _fill(tensor, val)


def ones_(tensor):
    return _fill(tensor, 1.0)


def zeros_(tensor):
    return _fill(tensor, 0.0)


def xavier_uniform_(tensor, gain=1.0, generator=None):
    _floating(tensor, "xavier_uniform_")
    if _no_elements(tensor):
        return tensor
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    _floating(tensor, "xavier_normal_")
    if _no_elements(tensor):
        return tensor
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    _floating(tensor, "kaiming_uniform_")
    if _no_elements(tensor):
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    _floating(tensor, "kaiming_normal_")
    if _no_elements(tensor):
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return normal_(tensor, 0.0, std, generator)


def orthogonal_(tensor, gain=1, generator=None):
    """A (semi-)orthogonal matrix times ``gain`` (Saxe et al., 2013), as PyTorch: the tensor is
    seen as rows = shape[0] by cols = the rest; Q of the QR decomposition of a standard normal
    draw of that shape (transposed while rows < cols, so Q has orthonormal columns) is scaled
    column by column by the sign of R's diagonal, which makes Q uniform over the orthogonal
    matrices (Haar) rather than biased by the QR convention. Rows are then orthonormal if
    rows <= cols, columns otherwise."""
    if tensor.ndim < 2:
        raise ValueError(f"Only tensors with 2 or more dimensions are supported (got shape {list(tensor.shape)})")
    _floating(tensor, "orthogonal_")
    if tensor.numel() == 0:   # nothing to fill; PyTorch returns it without a warning here
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flattened = _gen(generator).normal(0.0, 1.0, (rows, cols))
    if rows < cols:
        flattened = flattened.T
    q, r = np.linalg.qr(flattened)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _fill(tensor, (gain * q).reshape(tensor.shape))


def eye_(tensor):
    """The identity matrix (ones on the main diagonal of a 2-D tensor of any shape), as
    PyTorch: it keeps a Linear layer's input as it is where the shapes allow."""
    if tensor.ndim != 2:
        raise ValueError(f"Only tensors with 2 dimensions are supported (got shape {list(tensor.shape)})")
    return _fill(tensor, np.eye(*tensor.shape))


def dirac_(tensor, groups=1):
    """The Dirac delta of a convolution weight (out, in, *kernel) of 3, 4 or 5 dims, as PyTorch:
    a one at the kernel's centre of in-channel d in out-channel d (within each of ``groups``
    groups of out-channels), zeros elsewhere, so the convolution keeps as many input channels
    as it can."""
    if tensor.ndim not in (3, 4, 5):
        raise ValueError(f"Only tensors with 3, 4, or 5 dimensions are supported (got shape {list(tensor.shape)})")
    out_chans, in_chans = tensor.shape[0], tensor.shape[1]
    if out_chans % groups != 0:
        raise ValueError(f"dim 0 must be divisible by groups (got {out_chans} out-channels and groups={groups})")
    per_group = out_chans // groups
    values = np.zeros(tensor.shape)
    centre = tuple(n // 2 for n in tensor.shape[2:])
    for g in range(groups):
        for d in range(min(per_group, in_chans)):
            values[(g * per_group + d, d) + centre] = 1
    return _fill(tensor, values)


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """A 2-D tensor as a sparse matrix (Martens, 2010), as PyTorch: N(0, std) values, then in
    each column ceil(sparsity * rows) randomly chosen entries set to zero."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    _floating(tensor, "sparse_")
    rows, cols = tensor.shape
    num_zeros = int(math.ceil(sparsity * rows))
    gen = _gen(generator)
    values = gen.normal(0.0, std, (rows, cols))
    for col in range(cols):
        values[gen.permutation(rows)[:num_zeros], col] = 0
    return _fill(tensor, values)


def _make_deprecate(meth):
    """PyTorch's old names without the trailing underscore (``nn.init.uniform``): the same
    function, with a FutureWarning."""
    new_name = meth.__name__
    old_name = new_name[:-1]

    def deprecated_init(*args, **kwargs):
        warnings.warn(f"`nn.init.{old_name}` is now deprecated in favor of `nn.init.{new_name}`.",
                      FutureWarning, stacklevel=2)
        return meth(*args, **kwargs)
    deprecated_init.__name__ = old_name
    deprecated_init.__doc__ = f"Deprecated alias of {new_name}."
    return deprecated_init


uniform = _make_deprecate(uniform_)
normal = _make_deprecate(normal_)
constant = _make_deprecate(constant_)
eye = _make_deprecate(eye_)
dirac = _make_deprecate(dirac_)
xavier_uniform = _make_deprecate(xavier_uniform_)
xavier_normal = _make_deprecate(xavier_normal_)
kaiming_uniform = _make_deprecate(kaiming_uniform_)
kaiming_normal = _make_deprecate(kaiming_normal_)
orthogonal = _make_deprecate(orthogonal_)
sparse = _make_deprecate(sparse_)


def default_layer_init_(weight, bias=None):
    """PyTorch's default initialisation of Linear and Conv weights and biases: Kaiming-uniform
    with a = sqrt(5) for the weight, which is U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and the same
    bound for the bias."""
    kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in, _ = _calculate_fan_in_and_fan_out(weight)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0
        uniform_(bias, -bound, bound)
