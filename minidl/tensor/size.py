"""md.Size: the type of ``tensor.shape`` and ``tensor.size()``, as torch.Size.

A tuple of ints (it compares, hashes and unpacks as one, and NumPy takes it as a shape)
that prints as ``minidl.Size([2, 3])``; slicing it or adding a tuple gives a Size again.
``as_ints`` reads the size (or dims, pads...) arguments that ops take as a tuple of ints.
"""
import operator


def as_ints(values, op, name):
    """The sequence ``values`` as a tuple of Python ints, or a TypeError naming ``op``'s
    argument ``name`` and the element that is not an int. Anything with ``__index__`` counts
    (a NumPy integer, an integer 0-d tensor), as in PyTorch; a float or a bool does not, since
    int() would silently truncate ``zeros(2.5)`` to two elements."""
    out = []
    for i, v in enumerate(values):
        try:
            if isinstance(v, bool):
                raise TypeError
            out.append(operator.index(v))
        except TypeError:
            raise TypeError(f"{op}(): argument '{name}' must be a tuple of ints, but found element of type "
                            f"{type(v).__name__} ({v!r}) at pos {i}") from None
    return tuple(out)


def check_sizes(op, **sizes):
    """RuntimeError naming the first negative size argument of ``op`` (a layer's constructor),
    PyTorch's error type; NumPy's "negative dimensions are not allowed" names no argument."""
    for name, n in sizes.items():
        if n < 0:
            raise RuntimeError(f"{op}: {name} must be non-negative, got {name}={n} (Trying to create tensor with "
                               f"negative dimension {n})")


class Size(tuple):
    __slots__ = ()

    def __new__(cls, sizes=()):
        if not isinstance(sizes, (tuple, list)):
            sizes = tuple(sizes)    # a generator is read once; a non-iterable raises TypeError here
        try:
            return tuple.__new__(cls, map(operator.index, sizes))
        except TypeError:
            pass
        for i, n in enumerate(sizes):   # only on failure: name the element, as PyTorch; int() would truncate 2.5
            try:
                operator.index(n)
            except TypeError:
                module = type(n).__module__
                kind = type(n).__name__ if module == "builtins" or module.startswith("minidl") else \
                    f"{module}.{type(n).__name__}"
                raise TypeError(f"minidl.Size() takes an iterable of 'int' (item {i} is '{kind}')") from None
        return tuple.__new__(cls, map(operator.index, sizes))

    @classmethod
    def of_shape(cls, shape):
        """The Size of a NumPy (or device) array's shape, a tuple of Python ints already: no
        conversion (``tensor.shape`` is read on every op, and the conversion above costs ~1 us)."""
        return tuple.__new__(cls, shape)

    def __repr__(self):
        return f"minidl.Size({list(self)})"

    __str__ = __repr__

    def __getitem__(self, index):
        out = tuple.__getitem__(self, index)
        return Size(out) if isinstance(index, slice) else out

    def __add__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple.__add__(self, other))

    def __radd__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple.__add__(other, self))

    def __mul__(self, n):
        return Size(tuple.__mul__(self, n))

    __rmul__ = __mul__

    def numel(self):
        """The number of elements a tensor of this size holds (1 for ``Size([])``)."""
        n = 1
        for s in self:
            n *= s
        return n

    def __reduce__(self):
        return (Size, (tuple(self),))
