"""ShapeError: the operands' shapes do not fit the op.

PyTorch raises RuntimeError for these ("mat1 and mat2 shapes cannot be multiplied", "The size
of tensor a (3) must match the size of tensor b (4)"), so a ported script's ``except
RuntimeError`` has to catch them; NumPy, whose habits minidl's checks grew from, raises
ValueError, which minidl's own callers and tests expect. ShapeError is both.
"""


class ShapeError(RuntimeError, ValueError):
    """Operand shapes that do not fit the op (a RuntimeError, as PyTorch, and a ValueError)."""


def broadcast_shape(op, a_shape, b_shape, a_name="input", b_name="other"):
    """The shape two operands broadcast to, or a ShapeError naming ``op``, both shapes and, as
    PyTorch, the first dim (from the right) where they differ: NumPy's message names neither
    the op nor the operands."""
    a_shape, b_shape = tuple(a_shape), tuple(b_shape)
    out = []
    for i in range(1, max(len(a_shape), len(b_shape)) + 1):
        m = a_shape[-i] if i <= len(a_shape) else 1
        n = b_shape[-i] if i <= len(b_shape) else 1
        if m != n and m != 1 and n != 1:
            raise ShapeError(f"{op}: The size of tensor a ({m}) must match the size of tensor b ({n}) at "
                             f"non-singleton dimension {max(len(a_shape), len(b_shape)) - i}; got {a_name} of "
                             f"shape {list(a_shape)} and {b_name} of shape {list(b_shape)}")
        out.append(n if m == 1 else m)
    return tuple(reversed(out))
