"""How many bytes of activations a training step keeps alive for its backward pass.

Measured, not estimated: ``graph_bytes(loss)`` walks the autograd graph behind ``loss`` (before
``backward`` frees it) and adds up, once per storage, the arrays its nodes hold:

- ``saved``: what the ops kept for their backward (``save_for_backward`` and ``ctx`` attributes:
  PyTorch's "saved tensors"), the figure mixed precision is meant to halve (what stays float32
  under autocast is what a GPU keeps in float32: ``ops/low_precision.py`` says which);
- ``held``: ``saved`` plus the ops' input tensors, which minidl's nodes also reference until
  backward (``ctx.inputs``); this is what the graph really keeps in memory.

Parameters (leaves that require grad) are not activations and are left out of both; the
low-precision copies of weights that autocast makes are counted, since they live as long as the
graph. Arrays are counted by the storage they view, so a view and its base count once. The walk
costs a visit per node and nothing when it is not called: nothing is counted during the step.
"""
from dataclasses import dataclass

import numpy as np

from ..autograd import versions


@dataclass
class GraphBytes:
    saved: int       # bytes the ops saved for backward
    held: int        # saved + the ops' input activations
    nodes: int       # nodes in the graph
    by_dtype: dict   # saved bytes per dtype name


def _nbytes(array):
    storage = versions.storage_of(array)
    n = getattr(storage, "nbytes", None)
    return int(n) if isinstance(n, int) else int(array.nbytes)


def _saved_by(node, Tensor):
    """The arrays a node's forward kept: in saved_tensors or as attributes (tuples and lists
    looked into; a Tensor kept whole counts as its array), as versions.check finds them."""
    for k, v in node.__dict__.items():
        if k in ("inputs", "edges", "_saved_versions"):
            continue
        for a in (v if type(v) is tuple or type(v) is list else (v,)):
            if isinstance(a, Tensor):
                yield a._data
            elif hasattr(a, "shape") and hasattr(a, "dtype") and hasattr(a, "nbytes") and not isinstance(a, np.generic):
                yield a


def graph_bytes(output):
    """The activation bytes the graph behind ``output`` (a Tensor, before its backward) holds."""
    from ..autograd import op_function
    Tensor = op_function.Tensor
    start = output._node
    if start is None:
        return GraphBytes(0, 0, 0, {})
    params, seen_nodes, stack = set(), set(), [start]
    saved, held, nodes = {}, {}, []
    while stack:
        node = stack.pop()
        if id(node) in seen_nodes:
            continue
        seen_nodes.add(id(node))
        nodes.append(node)
        for t, e in zip(node.inputs, node.edges):
            if not isinstance(t, Tensor):
                continue
            if t._node is None and t._requires_grad:
                params.add(id(versions.storage_of(t._data)))
            else:
                held.setdefault(id(versions.storage_of(t._data)), t._data)
            if e is not None and e[0] is not None:
                stack.append(e[0])
    for node in nodes:
        for a in _saved_by(node, Tensor):
            saved.setdefault(id(versions.storage_of(a)), a)
    saved = {k: a for k, a in saved.items() if k not in params}
    held = {k: a for k, a in held.items() if k not in params}
    held.update(saved)
    by_dtype = {}
    for a in saved.values():
        name = str(a.dtype)
        by_dtype[name] = by_dtype.get(name, 0) + _nbytes(a)
    return GraphBytes(sum(_nbytes(a) for a in saved.values()), sum(_nbytes(a) for a in held.values()),
                      len(nodes), by_dtype)


def show_bytes(n):
    """1536 -> "1.5 KB" (powers of 1024)."""
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
