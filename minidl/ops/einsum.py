"""md.einsum: Einstein summation over explicit subscripts ("ij,jk->ik").

Forward is np.einsum. dL/d(operand k) is the einsum of g with every other operand into
operand k's subscripts: each element of operand k is multiplied by the same products as in
the forward, and summed over the same other indices. An index that only operand k has (summed
away in the forward) gets g broadcast along it; a repeated index within one operand (a
diagonal, "ii->i") is refused for gradients.
"""
import numpy as np

from ..autograd.function import Function
from .low_precision import float32_compute


def _parse(equation, n):
    eq = equation.replace(" ", "")
    if "..." in eq:
        raise NotImplementedError("einsum: '...' (ellipsis) subscripts are not implemented in minidl; "
                                  "write every index out")
    if eq.count("->") > 1:
        raise RuntimeError(f"einsum(): equation {equation!r} has more than one '->'")
    if "->" in eq:
        lhs, out = eq.split("->")
    else:
        lhs = eq
        letters = lhs.replace(",", "")
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    ins = lhs.split(",")
    if len(ins) != n:
        raise RuntimeError(f"einsum(): {len(ins)} operands in the equation but {n} were given")
    return ins, out


@float32_compute   # float16/bfloat16 inputs: float32 products, one rounding (low_precision.py)
class Einsum(Function):
    """See the module docstring."""

    @staticmethod
    def forward(ctx, ins, out, *operands):
        ctx.save_for_backward(*operands)
        ctx.subs = (ins, out)
        return np.asarray(np.einsum(",".join(ins) + "->" + out, *operands))

    @staticmethod
    def backward(ctx, g):
        return _operand_grads(ctx, ctx.saved_tensors, g,
                              lambda subs, kept, *arrays: np.einsum(",".join(subs) + "->" + kept, *arrays),
                              lambda part, like: np.broadcast_to(part, like.shape).astype(like.dtype))

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        return _operand_grads(ctx, inputs[2:], g, Einsum.apply, lambda part, like: part.expand(tuple(like.shape)))


def _operand_grads(ctx, ops, g, contract, spread):
    """Each operand's gradient: g contracted with the other operands onto the operand's indices
    (``contract(subscripts, kept, g, *others)``), an index the operand alone has spread back over
    its size (``spread(part, operand)``). backward runs it on arrays, differentiable_backward on
    Tensors (with Einsum itself as the contraction)."""
    ins, out = ctx.subs
    grads = [None, None]
    for k, sub in enumerate(ins):
        if not ctx.needs_input_grad[k + 2]:
            grads.append(None)
            continue
        if len(set(sub)) != len(sub):
            raise NotImplementedError(f"einsum: no gradient for the repeated index in {sub!r}")
        others = [s for i, s in enumerate(ins) if i != k]
        seen = set(out).union(*others)
        kept = "".join(c for c in sub if c in seen)
        part = contract([out] + others, kept, g, *[o for i, o in enumerate(ops) if i != k])
        shape = [ops[k].shape[i] if c in seen else 1 for i, c in enumerate(sub)]
        grads.append(spread(part.reshape(shape), ops[k]))
    return tuple(grads)


def einsum(equation, *operands):
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    ins, out = _parse(equation, len(operands))
    for k, (sub, t) in enumerate(zip(ins, operands)):
        if len(sub) != t.ndim:
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({len(sub)}) does not match "
                               f"the number of dimensions ({t.ndim}) for operand {k}{_context(equation, operands)}")
    _check_subscripts(equation, ins, out, operands)
    return Einsum.apply(ins, out, *operands)


def _context(equation, operands):
    return f" (equation {equation!r}, operand shapes {[list(t.shape) for t in operands]})"


def _check_subscripts(equation, ins, out, operands):
    """PyTorch's checks, before np.einsum's messages, which name neither the op nor the shapes:
    letters only, an output index that some input has, once, and one size per index (a size 1
    broadcasts, as in both)."""
    for c in "".join(ins) + out:
        if not (c.isascii() and c.isalpha()) and c != ",":
            raise RuntimeError(f"einsum(): invalid subscript {c!r}, subscripts must be in [a-zA-Z]"
                               f"{_context(equation, operands)}")
    for c in out:
        if out.count(c) > 1:
            raise RuntimeError(f"einsum(): output subscript {c} appears more than once in the output"
                               f"{_context(equation, operands)}")
        if not any(c in sub for sub in ins):
            raise RuntimeError(f"einsum(): output subscript {c} does not appear in the equation for any input "
                               f"operand{_context(equation, operands)}")
    sizes = {}
    for k, (sub, t) in enumerate(zip(ins, operands)):
        for i, (c, n) in enumerate(zip(sub, t.shape)):
            first = t.shape[sub.index(c)]
            if i != sub.index(c) and n != first:   # a diagonal ("ii") needs equal sizes
                raise RuntimeError(f"einsum(): subscript {c} is repeated for operand {k} but the sizes don't "
                                   f"match, {n} != {first}{_context(equation, operands)}")
            seen = sizes.get(c, 1)
            if n != seen and n != 1 and seen != 1:
                raise RuntimeError(f"einsum(): subscript {c} has size {n} for operand {k} which does not broadcast "
                                   f"with previously seen size {seen}{_context(equation, operands)}")
            sizes[c] = n if seen == 1 else seen
