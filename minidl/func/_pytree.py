"""Nested containers of tensors ("pytrees"), as the function transforms take and return them.

A pytree is a tuple, list, dict (or OrderedDict) or namedtuple whose elements are pytrees, or
a leaf: anything else (a Tensor, a number, None). ``flatten`` lists the leaves in order and
returns a ``Spec`` that ``Spec.unflatten`` fills with new leaves, giving back a container of
the same shape. Dict children are taken in the dict's key order, as PyTorch's pytrees do.

``broadcast_prefix`` matches an argument such as vmap's ``in_dims`` against a pytree: the
argument is a *prefix* of the tree, so where it holds a leaf (an int or None) that value
applies to every leaf of the subtree below.
"""
from collections import OrderedDict

__all__ = ["Spec", "flatten", "broadcast_prefix", "tree_map", "StructureMismatch"]


class StructureMismatch(ValueError):
    """A prefix pytree that does not fit the tree it is matched against."""


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def _children(x):
    """(kind, context, children) for a container, or None for a leaf."""
    if _is_namedtuple(x):
        return "namedtuple", type(x), list(x)
    if isinstance(x, tuple):
        return "tuple", None, list(x)
    if isinstance(x, list):
        return "list", None, list(x)
    if isinstance(x, dict):
        return ("ordereddict" if isinstance(x, OrderedDict) else "dict"), list(x.keys()), list(x.values())
    return None


class Spec:
    """The shape of a pytree: its containers without the leaves."""

    def __init__(self, kind, context=None, children=()):
        self.kind, self.context, self.children = kind, context, list(children)
        self.num_leaves = 1 if kind == "leaf" else sum(c.num_leaves for c in self.children)

    def unflatten(self, leaves):
        leaves = list(leaves)
        if len(leaves) != self.num_leaves:
            raise ValueError(f"expected {self.num_leaves} leaves, got {len(leaves)}")
        return self._build(iter(leaves))

    def _build(self, it):
        if self.kind == "leaf":
            return next(it)
        values = [c._build(it) for c in self.children]
        if self.kind == "tuple":
            return tuple(values)
        if self.kind == "list":
            return values
        if self.kind == "namedtuple":
            return self.context(*values)
        cls = OrderedDict if self.kind == "ordereddict" else dict
        return cls(zip(self.context, values))

    def __eq__(self, other):
        return (isinstance(other, Spec) and self.kind == other.kind and self.context == other.context
                and self.children == other.children)

    def __repr__(self):
        if self.kind == "leaf":
            return "*"
        inner = [repr(c) for c in self.children]
        if self.kind in ("dict", "ordereddict"):
            return "{" + ", ".join(f"{k!r}: {v}" for k, v in zip(self.context, inner)) + "}"
        if self.kind == "list":
            return "[" + ", ".join(inner) + "]"
        if self.kind == "namedtuple":
            return f"{self.context.__name__}(" + ", ".join(inner) + ")"
        return "(" + ", ".join(inner) + ("," if len(inner) == 1 else "") + ")"


_LEAF = Spec("leaf")


def flatten(tree):
    """(the leaves of ``tree`` in order, its Spec)."""
    leaves = []

    def walk(x):
        node = _children(x)
        if node is None:
            leaves.append(x)
            return _LEAF
        kind, context, children = node
        return Spec(kind, context, [walk(c) for c in children])

    return leaves, walk(tree)


def tree_map(fn, tree):
    leaves, spec = flatten(tree)
    return spec.unflatten([fn(x) for x in leaves])


def broadcast_prefix(prefix, tree, is_prefix_leaf):
    """One value of ``prefix`` per leaf of ``tree``: ``prefix`` mirrors the containers of ``tree``
    down to where it holds a value for which ``is_prefix_leaf`` is true, and that value stands for
    every leaf below. StructureMismatch where the containers differ (kind, length or keys)."""
    out = []

    def walk(p, x):
        if is_prefix_leaf(p):
            out.extend([p] * flatten(x)[1].num_leaves)
            return
        pn, xn = _children(p), _children(x)
        if pn is None or xn is None:
            raise StructureMismatch
        (pk, pc, pch), (xk, xc, xch) = pn, xn
        if xk in ("dict", "ordereddict"):
            if pk not in ("dict", "ordereddict") or set(pc) != set(xc):
                raise StructureMismatch
            by_key = dict(zip(pc, pch))
            pch = [by_key[k] for k in xc]
        elif pk != xk or pc != xc or len(pch) != len(xch):
            raise StructureMismatch
        for pc_, xc_ in zip(pch, xch):
            walk(pc_, xc_)

    walk(prefix, tree)
    return out


def structure(tree):
    """The Spec of ``tree`` (its repr shows the containers with ``*`` for each leaf)."""
    return flatten(tree)[1]
