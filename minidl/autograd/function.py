"""Function: one differentiable op, with its forward and its backward written by hand.

Subclass it with two static methods, as ``torch.autograd.Function``::

    class Cube(Function):
        @staticmethod
        def forward(ctx, x):             # x is the tensor's array (NumPy on the CPU)
            ctx.save_for_backward(x)
            return x ** 3
        @staticmethod
        def backward(ctx, grad):          # dL/dy in, dL/dx out, as arrays
            (x,) = ctx.saved_tensors
            return 3 * x ** 2 * grad

    y = Cube.apply(t)

Unlike PyTorch, forward and backward see *arrays*, not Tensors: an op is defined in
the array language (NumPy), and the Tensor layer around it only records the graph.
Arguments that are not Tensors (dims, flags, Python numbers) reach forward unchanged and
get ``None`` as their gradient. backward returns one gradient per forward argument (a
single value when forward took one argument); ``None`` means "no gradient".

The ``ctx`` object *is* the graph node: ``apply`` records on it the input tensors, and the
engine later calls ``backward(ctx, ...)`` and then frees what the node saved.
"""
from . import grad_mode


class Function:
    # set on each node by apply
    inputs = ()             # the forward arguments that are Tensors (None elsewhere)
    needs_input_grad = ()   # per forward argument: does it need a gradient?
    n_outputs = 1
    freed = False

    @staticmethod
    def forward(ctx, *args):
        raise NotImplementedError

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError

    # ctx helpers, named as in PyTorch
    def save_for_backward(self, *arrays):
        self.saved_tensors = arrays

    @classmethod
    def apply(cls, *args):
        Tensor = _Tensor or _load_tensor()
        record = grad_mode._enabled
        arrays, tensors, needs = [], [], []
        any_needs = False
        array_type = None   # all Tensor arguments must live on one device: same array type
        for a in args:
            if isinstance(a, Tensor):
                data = a._data
                if array_type is None:
                    array_type = type(data)
                elif type(data) is not array_type:
                    _check_same_device(cls, args)
                arrays.append(data)
                tensors.append(a)
                n = record and a._requires_grad
                needs.append(n)
                any_needs = any_needs or n
            else:
                arrays.append(a)
                tensors.append(None)
                needs.append(False)

        ctx = cls.__new__(cls)
        ctx.needs_input_grad = tuple(needs)
        out = cls.forward(ctx, *arrays)

        node = ctx if any_needs else None
        if isinstance(out, tuple):
            outs = tuple(Tensor._wrap(o, node, i) for i, o in enumerate(out))
            ctx.n_outputs = len(out)
            ctx.output_meta = [(o.shape, o.dtype) for o in outs]
        else:
            outs = Tensor._wrap(out, node, 0)
        if any_needs:
            ctx.inputs = tuple(tensors)
        return outs


_Tensor = None


def _load_tensor():
    # imported on first use: the tensor module itself imports this one
    global _Tensor
    from ..tensor.tensor import Tensor
    _Tensor = Tensor
    return Tensor


def _check_same_device(cls, args):
    devices = [a.device for a in args if isinstance(a, _Tensor)]
    for d in devices[1:]:
        if d != devices[0]:
            raise RuntimeError(f"{cls.__name__}: expected all tensors on the same device, "
                               f"but found {devices[0]} and {d}")
