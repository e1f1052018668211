"""np.einsum for cuda arrays, composed of the device's views, sums and batched matmul (no kernel
of its own).

    out[o] = sum over the indices not in the output of  prod_k operand_k[its indices]

is computed in three steps, each an existing device op:

1. per operand: a repeated index ("ii") is its diagonal, a strided view (the two axes' strides
   added); an index no other operand and not the output has is summed away at once (``sum``);
2. the operands are contracted pairwise, left to right. For A and B, each index is one of:
   batch (in both, needed later: by the output or a remaining operand), contracted (in both, not
   needed later), A's own, B's own (kept). A is permuted to (batch, A's own, contracted) and
   reshaped to (batch..., M, K), B to (batch..., K, N); ``matmul`` gives (batch..., M, N), reshaped
   back to one axis per index. A size-1 axis broadcasts against the other operand's size, as
   in NumPy (the operands are broadcast to the common sizes first);
3. the result's axes are permuted into the output's order.

The result is NumPy's up to the order of the additions. ``optimize`` is accepted and ignored
(the left-to-right order is what these small contractions need).
"""
import math

import numpy as np

from .array import asarray, broadcast_to
from .creation import _full
from .reduction import matmul


def _parse(subscripts, operands):
    """The operands' index strings and the output's, with '...' written out as letters the
    subscripts do not use (NumPy's rule: the broadcast axes, leading an implicit output)."""
    eq = subscripts.replace(" ", "")
    lhs, out = eq.split("->") if "->" in eq else (eq, None)
    ins = lhs.split(",")
    if len(ins) != len(operands):
        raise ValueError(f"einsum: {len(ins)} operands in the subscripts {subscripts!r} but {len(operands)} given")
    used = set(eq) - set(",->.")
    spare = iter(c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz" if c not in used)
    n_ell = max((x.ndim - (len(s) - 3) for s, x in zip(ins, operands) if "..." in s), default=0)
    ell = "".join(next(spare) for _ in range(n_ell))
    full = []
    for s, x in zip(ins, operands):
        if "..." in s:
            k = x.ndim - (len(s) - 3)
            s = s.replace("...", ell[n_ell - k:] if k else "")
        if len(s) != x.ndim:
            raise ValueError(f"einsum: operand of {x.ndim} dims for subscripts {s!r}")
        full.append(s)
    if out is None:
        letters = "".join(full)
        out = ell + "".join(sorted(c for c in set(letters) - set(ell) if letters.count(c) == 1))
    else:
        out = out.replace("...", ell)
    return full, out


def _diagonals(x, sub):
    """x with each repeated index taken once (its diagonal: a view), and the reduced subscripts."""
    while len(set(sub)) != len(sub):
        c = next(c for c in sub if sub.count(c) > 1)
        i = sub.index(c)
        j = sub.index(c, i + 1)
        keep = [d for d in range(x.ndim) if d != j]
        st = list(x.elem_strides)
        st[i] += st[j]
        shape = tuple(x.shape[d] for d in keep)
        x = x._view(shape, tuple(st[d] for d in keep))
        sub = sub[:j] + sub[j + 1:]
    return x, sub


def _sizes(*pairs):
    """Each index's size over (array, subscripts) pairs, a size 1 giving way to the other's."""
    size = {}
    for x, s in pairs:
        for c, n in zip(s, x.shape):
            size[c] = n if size.get(c, 1) == 1 else size[c]
    return size


def _contract(a, sa, b, sb, needed):
    """a (indices sa) and b (sb) contracted over their shared indices not in ``needed``."""
    size = _sizes((a, sa), (b, sb))
    batch = [c for c in sa if c in sb and c in needed]
    summed = [c for c in sa if c in sb and c not in needed]
    own_a = [c for c in sa if c not in sb]
    own_b = [c for c in sb if c not in sa]
    a = broadcast_to(a.transpose([sa.index(c) for c in batch + own_a + summed]),
                     tuple(size[c] for c in batch + own_a + summed))
    b = broadcast_to(b.transpose([sb.index(c) for c in batch + summed + own_b]),
                     tuple(size[c] for c in batch + summed + own_b))
    nb = tuple(size[c] for c in batch)
    m, k, n = (math.prod(size[c] for c in part) for part in (own_a, summed, own_b))
    y = matmul(a.reshape(nb + (m, k)), b.reshape(nb + (k, n)))
    return y.reshape(tuple(size[c] for c in batch + own_a + own_b)), "".join(batch + own_a + own_b)


def einsum(subscripts, *operands, optimize=False, dtype=None, out=None):
    """NumPy's einsum over cuda arrays (see the module docstring)."""
    operands = [asarray(x) for x in operands]
    subs, out_sub = _parse(subscripts, operands)
    dt = np.result_type(*[x.dtype for x in operands]) if dtype is None else np.dtype(dtype)
    arrays = []
    for k, (x, s) in enumerate(zip(operands, subs)):
        x, s = _diagonals(x, s)
        elsewhere = set(out_sub).union(*[t for i, t in enumerate(subs) if i != k])
        lone = [d for d, c in enumerate(s) if c not in elsewhere]
        if lone:
            x = x.sum(axis=tuple(lone)) if x.size else _full(tuple(n for d, n in enumerate(x.shape) if d not in lone),
                                                               0, x.dtype)
            s = "".join(c for d, c in enumerate(s) if d not in lone)
        arrays.append((x if x.dtype == dt else x.astype(dt), s))
    a, sa = arrays[0]
    for i in range(1, len(arrays)):
        b, sb = arrays[i]
        needed = set(out_sub).union(*[t for _, t in arrays[i + 1:]])
        if a.size == 0 or b.size == 0:   # empty inputs never reach a kernel: every sum is 0
            size = _sizes((a, sa), (b, sb))
            keep = [c for c in sa if c in needed or c not in sb] + [c for c in sb if c not in sa]
            a, sa = _full(tuple(size[c] for c in keep), 0, dt), "".join(keep)
            continue
        a, sa = _contract(a, sa, b, sb, needed)
    if set(sa) != set(out_sub):   # a single operand whose kept indices equal the output's
        raise ValueError(f"einsum: cannot produce output {out_sub!r} from {sa!r}")
    y = a.transpose([sa.index(c) for c in out_sub]) if out_sub else a.reshape(())
    if len(arrays) == 1:   # a view of the operand (a transpose, a diagonal): the result is a new array
        y = y.copy()
    if out is not None:
        out[...] = y
        return out
    return y
