"""md.Size: the type of ``tensor.shape`` and ``tensor.size()``, as torch.Size.

A tuple of ints (it compares, hashes and unpacks as one, and NumPy takes it as a shape)
that prints as ``minidl.Size([2, 3])``; slicing it or adding a tuple gives a Size again.
"""


class Size(tuple):
    __slots__ = ()

    def __new__(cls, sizes=()):
        return super().__new__(cls, (int(n) for n in sizes))

    @classmethod
    def of_shape(cls, shape):
        """The Size of a NumPy (or device) array's shape, a tuple of Python ints already: no
        conversion (``tensor.shape`` is read on every op, and the generator above costs ~1 us)."""
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
