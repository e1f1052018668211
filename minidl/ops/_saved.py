"""The integer and bool arrays a backward reads (indices, targets, masks) are the op's own.

Forward gets the caller's arrays as they are (a Tensor's ``_data`` is one too: the caller
can still write to the Tensor), and a caller may change them before backward runs:
``idx[1] = 10**7`` after an embedding lookup, or writing into the indices max_pool2d
returned. Backward's kernels trust their indices (Numba checks no bounds; a negative one
wraps), so what they read must be exactly what forward checked and used: a private copy,
which no one else can reach. Index arrays, targets and masks are small next to the
activations (one value per selected row or element), so the copy is cheap; and it is only
made when backward will run.
"""


def keep_for_backward(ctx, array):
    """A private copy of ``array`` for backward, or None when no input of ``ctx`` needs a
    gradient (then the node is dropped after forward and nothing is kept)."""
    if array is None or not any(ctx.needs_input_grad):
        return None
    return array.copy()
