"""Conv1d, ConvTranspose1d and ConvTranspose2d, with PyTorch's constructors, initialisation
(kaiming_uniform(a=sqrt 5) on the weight, U(-1/sqrt(fan_in), 1/sqrt(fan_in)) on the bias,
fan_in from the weight's dims 1..) and repr. Conv2d is in conv.py."""
from ...ops.conv1d import conv1d
from ...ops.conv_transpose import conv_transpose1d, conv_transpose2d
from ...tensor.size import check_sizes
from .. import functional as F
from .. import init
from .linear import _add_weight_and_bias
from .module import Module


PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _tuple(v, n):
    return (int(v),) * n if isinstance(v, int) else tuple(int(a) for a in v)


def check_padding_mode(name, padding_mode, transposed=False):
    """PyTorch's constructor checks: one of the four modes, and only "zeros" for a transposed
    convolution (its padding removes output rows, it has no input rows to fill)."""
    if padding_mode not in PADDING_MODES:
        raise ValueError(f"{name}: padding_mode must be one of {set(PADDING_MODES)}, but got "
                         f"padding_mode={padding_mode!r}")
    if transposed and padding_mode != "zeros":
        raise ValueError(f'Only "zeros" padding mode is supported for {name}')


def reversed_padding(padding, kernel_size, dilation):
    """The ``F.pad`` amounts (last dim first, (before, after) each) that a non-"zeros"
    ``padding_mode`` pads the input with before a convolution of padding 0: ``p`` on both sides
    of each dim, or, for "same", the total d (k - 1) split with the odd one after (as the
    functional form's zero padding, and as PyTorch's ``_reversed_padding_repeated_twice``);
    "valid" pads nothing."""
    if padding == "valid":
        return [0, 0] * len(kernel_size)
    out = []
    for i in reversed(range(len(kernel_size))):
        if padding == "same":
            total = dilation[i] * (kernel_size[i] - 1)
            out += [total // 2, total - total // 2]
        else:
            out += [padding[i], padding[i]]
    return out


def pad_for_mode(module, input):
    """(input, padding) for the functional convolution: the input padded by the module's
    ``padding_mode`` with padding 0 after it, or the input and the module's own padding for
    "zeros" (the convolution pads with zeros itself)."""
    if module.padding_mode == "zeros":
        return input, module.padding
    padded = F.pad(input, module._reversed_padding_repeated_twice, mode=module.padding_mode)
    return padded, (0,) * len(module.kernel_size)


class _ConvNd(Module):
    dims, transposed = 1, False   # set by subclasses

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None, output_padding=0):
        super().__init__()
        name, n = type(self).__name__, self.dims
        if not isinstance(groups, int) or groups < 1:
            raise ValueError(f"{name}: groups must be a positive integer, got groups={groups!r}")
        check_sizes(name, in_channels=in_channels, out_channels=out_channels)
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"{name}: in_channels ({in_channels}) and out_channels ({out_channels}) must both be "
                             f"divisible by groups ({groups})")
        if isinstance(padding, str) and self.transposed:   # PyTorch's argument parser: a TypeError
            raise TypeError(f"{name}: padding must be an int or a tuple of ints, got {padding!r}")
        if isinstance(padding, str) and padding not in ("same", "valid"):
            raise ValueError(f"{name}: padding must be an int, a tuple, 'same' or 'valid', got {padding!r}")
        check_padding_mode(name, padding_mode, self.transposed)
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.kernel_size, self.stride = _tuple(kernel_size, n), _tuple(stride, n)
        if min(self.kernel_size) < 1:
            raise RuntimeError(f"{name}: kernel_size must be positive, got kernel_size={kernel_size!r}")
        self.padding = padding if isinstance(padding, str) else _tuple(padding, n)
        self.dilation, self.output_padding = _tuple(dilation, n), _tuple(output_padding, n)
        self.groups, self.padding_mode = int(groups), padding_mode
        self._reversed_padding_repeated_twice = reversed_padding(self.padding, self.kernel_size, self.dilation)
        shape = ((self.in_channels, self.out_channels // self.groups) if self.transposed
                 else (self.out_channels, self.in_channels // self.groups))
        _add_weight_and_bias(self, shape + self.kernel_size, bias, self.out_channels, dtype, device)

    def reset_parameters(self):
        init.default_layer_init_(self.weight, self.bias)

    def extra_repr(self):
        n = self.dims
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * n:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * n:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * n:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        mode = getattr(self, "padding_mode", "zeros")   # a lazy conv keeps its arguments aside until built
        if mode != "zeros":
            s += f", padding_mode={mode}"
        return s


class Conv1d(_ConvNd):
    """Weight (out_channels, in_channels/groups, k) over (N, C, L) input."""
    dims = 1

    def _conv_forward(self, input, weight, bias):
        input, padding = pad_for_mode(self, input)
        return conv1d(input, weight, bias, self.stride, padding, self.dilation, self.groups)

    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)


class _ConvTransposeNd(_ConvNd):
    transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, device, dtype, output_padding)

    def _output_padding(self, input, output_size):
        """The output_padding that makes the output ``output_size`` (PyTorch's forward argument)."""
        if output_size is None:
            return self.output_padding
        want = tuple(output_size)[-self.dims:]
        spatial = tuple(input.shape[-self.dims:])
        pads = []
        for n, w, s, p, d, k in zip(spatial, want, self.stride, self.padding, self.dilation, self.kernel_size):
            smallest = (n - 1) * s - 2 * p + d * (k - 1) + 1
            if not smallest <= w < smallest + s:
                raise ValueError(f"requested an output size of {list(want)}, but valid sizes range from "
                                 f"{smallest} to {smallest + s - 1} (for an input of {list(spatial)})")
            pads.append(w - smallest)
        return tuple(pads)


class ConvTranspose1d(_ConvTransposeNd):
    """Weight (in_channels, out_channels/groups, k) over (N, C, L) input."""
    dims = 1

    def forward(self, input, output_size=None):
        return conv_transpose1d(input, self.weight, self.bias, self.stride, self.padding,
                                self._output_padding(input, output_size), self.groups, self.dilation)


class ConvTranspose2d(_ConvTransposeNd):
    """Weight (in_channels, out_channels/groups, kH, kW) over (N, C, H, W) input."""
    dims = 2

    def forward(self, input, output_size=None):
        return conv_transpose2d(input, self.weight, self.bias, self.stride, self.padding,
                                self._output_padding(input, output_size), self.groups, self.dilation)
