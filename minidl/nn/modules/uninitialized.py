"""UninitializedParameter and UninitializedBuffer: what a lazy module (lazy.py) holds before its
first forward has told it the sizes, as ``torch.nn.UninitializedParameter`` / ``UninitializedBuffer``.

Each is an empty tensor of the dtype and device it will have, tagged so that code can ask
``isinstance(p, nn.UninitializedParameter)`` (or ``is_lazy(p)``) whether it is still a
placeholder. ``materialize(shape)`` gives it storage of that shape and turns it, in place, into
what it stands for (``cls_to_become``: a Parameter, or a Buffer), so that an optimizer given the
placeholder before the first forward holds the real tensor after it. Its shape is unknown until
then: reading ``shape`` raises PyTorch's RuntimeError, and its repr is ``<UninitializedParameter>``.

An UninitializedParameter is a Parameter and an UninitializedBuffer a Buffer, as in PyTorch
(whose ``isinstance(b, nn.Buffer)`` holds for any tensor marked as a buffer); a module keeps an
UninitializedBuffer as registered rather than unwrapping it to a plain Tensor, so that it stays
recognisable until its module materializes it.
"""
from ...tensor import dtype as dtypes
from ...tensor.factories import empty
from ..parameter import Buffer, Parameter


class UninitializedTensorMixin:
    """materialize, and the shape that cannot be read before it (PyTorch's mixin)."""
    __slots__ = ()
    cls_to_become = None

    def materialize(self, shape, device=None, dtype=None):
        """Give this placeholder (uninitialized) storage of ``shape``, on ``device`` with ``dtype``
        (by default its own), and make it a ``cls_to_become`` in place."""
        data = empty(shape, dtype=dtype if dtype is not None else self.dtype,
                     device=device if device is not None else self.device)
        self._become(data._data)

    def _become(self, array):
        """Take ``array`` as storage and become ``cls_to_become`` (what a lazy module's first forward does)."""
        self._data = array
        self.__class__ = self.cls_to_become

    @property
    def shape(self):
        raise RuntimeError("Can't access the shape of an uninitialized parameter or buffer. This error usually "
                           "happens in `load_state_dict` when trying to load an uninitialized parameter into an "
                           "initialized one. Call `forward` to initialize the parameters before accessing their "
                           "attributes.")

    def share_memory_(self):
        raise RuntimeError("Can't share memory on an uninitialized parameter or buffer. Call `forward` to "
                           "initialize the parameters before calling `module.share_memory()`.")

    def __repr__(self):
        return f"<{type(self).__name__}>"


def _placeholder(dtype, device):
    return empty(0, dtype=dtypes.to_dtype(dtype) if dtype is not None else None,
                 device=device if device is not None else "cpu")


class UninitializedParameter(UninitializedTensorMixin, Parameter):
    """A Parameter whose shape is not known yet; ``materialize`` makes it a Parameter."""
    __slots__ = ()
    cls_to_become = Parameter

    def __new__(cls, requires_grad=True, device=None, dtype=None):
        return super().__new__(cls, _placeholder(dtype, device), requires_grad)

    def __init__(self, requires_grad=True, device=None, dtype=None):
        pass

    def __deepcopy__(self, memo):
        if id(self) not in memo:
            memo[id(self)] = type(self)(self.requires_grad, self.device, self.dtype)
        return memo[id(self)]


class UninitializedBuffer(UninitializedTensorMixin, Buffer):
    """A buffer whose shape is not known yet; ``materialize`` makes it a Buffer (a Tensor)."""
    __slots__ = ()
    cls_to_become = Buffer

    def __new__(cls, requires_grad=False, device=None, dtype=None, persistent=True):
        b = super().__new__(cls, _placeholder(dtype, device), persistent=persistent)
        if requires_grad:
            b.requires_grad_(True)
        return b

    def __init__(self, requires_grad=False, device=None, dtype=None, persistent=True):
        pass

    def _as_tensor(self):
        """Registered as itself: the placeholder stays recognisable (and is materialized in place)."""
        return self

    def __deepcopy__(self, memo):
        if id(self) not in memo:
            memo[id(self)] = type(self)(self.requires_grad, self.device, self.dtype, self.persistent)
        return memo[id(self)]


def is_lazy(param):
    """Whether ``param`` is an UninitializedParameter or UninitializedBuffer (``torch.nn.parameter.is_lazy``)."""
    return isinstance(param, UninitializedTensorMixin)
