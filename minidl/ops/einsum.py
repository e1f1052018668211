"""md.einsum: Einstein summation over explicit subscripts ("ij,jk->ik", "...ij,...jk->...ik").

An ellipsis stands for the dimensions an operand has beyond its letters. They line up from the
right across operands and broadcast (size 1 against n), as PyTorch's; ``einsum`` writes each
ellipsis out as letters the equation does not use, so the op below only ever sees letters. The
output without "->" holds the ellipsis dimensions first, then the letters that appear once, in
alphabetical order; with "->" but no ellipsis in it, the ellipsis dimensions are summed.

Forward is the operands' namespace's einsum (np.einsum; on cuda a composition of the device's
permutes, sums and batched matmul). dL/d(operand k) is the einsum of g with every other operand into
operand k's subscripts: each element of operand k is multiplied by the same products as in
the forward, and summed over the same other indices. An index that only operand k has (summed
away in the forward) gets g broadcast along it; a repeated index within one operand (a
diagonal, "ii->i") is refused for gradients.
"""
import numpy as np

from ..autograd.op_function import Function
from ..backends import namespace_of
from .low_precision import float32_compute


def _parse(equation, operands):
    eq = equation.replace(" ", "")
    if eq.count("->") > 1:
        raise RuntimeError(f"einsum(): equation {equation!r} has more than one '->'")
    lhs, arrow, out = eq.partition("->")
    ins = lhs.split(",")
    if len(ins) != len(operands):
        raise RuntimeError(f"einsum(): {len(ins)} operands in the equation but {len(operands)} were given")
    for k, sub in enumerate(ins + [out]):
        rest = sub.replace("...", "", 1)
        if "." in rest:
            where = "the output" if k == len(ins) else f"operand {k}"
            raise RuntimeError(f"einsum(): found '.' for {where} " + ("for which an ellipsis was already found"
                               if "..." in sub else "that is not part of any ellipsis"))
    ins, out = _write_out_ellipses(eq, ins, out, operands)
    if not arrow:
        letters = "".join(ins)
        out += "".join(sorted(c for c in set(letters) if letters.count(c) == 1 and c not in out))
    return ins, out


def _write_out_ellipses(eq, ins, out, operands):
    """Each '...' as letters unused in ``eq``: the dimensions an operand has beyond its letters, the
    last ones of one block shared by all operands (aligned from the right). Without "->", ``out``
    comes back as the block (the implicit output's first dimensions)."""
    ranks = []
    for k, (sub, t) in enumerate(zip(ins, operands)):
        letters = len(sub.replace("...", ""))
        if letters > t.ndim or ("..." not in sub and letters != t.ndim):
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({letters}) "
                               f"{'is more than' if '...' in sub else 'does not match'} the number of dimensions "
                               f"({t.ndim}) for operand {k}{_context(eq, operands)}")
        ranks.append(t.ndim - letters if "..." in sub else 0)
    rank = max(ranks, default=0)
    free = [c for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in eq]
    if rank > len(free):
        raise RuntimeError(f"einsum(): the ellipsis needs {rank} subscripts but only {len(free)} letters are unused"
                           f"{_context(eq, operands)}")
    block = "".join(free[:rank])
    ins = [sub.replace("...", block[rank - r:]) for sub, r in zip(ins, ranks)]
    out = out.replace("...", block) if "->" in eq else block
    return ins, out


@float32_compute   # float16/bfloat16 inputs: float32 products, one rounding (low_precision.py)
class Einsum(Function):
    """See the module docstring."""

    @staticmethod
    def forward(ctx, ins, out, *operands):
        ctx.save_for_backward(*operands)
        ctx.subs = (ins, out)
        xp = namespace_of(operands[0]) if operands else np   # a device's einsum (cuda: backends/cuda/einsum.py)
        return xp.asarray(xp.einsum(",".join(ins) + "->" + out, *operands))

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
        wide = tuple(j for j, c in enumerate(kept) if part.shape[j] != ops[k].shape[sub.index(c)])
        if wide:   # a size-1 dimension of this operand that broadcast against the others
            part = part.sum(wide, keepdims=True)
        grads.append(spread(part.reshape(shape), ops[k]))
    return tuple(grads)


def einsum(equation, *operands):
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    ins, out = _parse(equation, operands)
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
