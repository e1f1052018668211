"""Walking a recorded graph from its outputs back to its leaves.

A node's ``edges`` pair each input with the node that produced it: ``None`` for an input that
does not require grad, ``(None, ...)`` for a leaf that does (the end of a path), and
``(node, index)`` otherwise. Data-parallel training asks which parameters a forward used;
activation checkpointing asks which tensors a function read without taking them as arguments.
"""


def leaves_reached(outputs):
    """The leaf tensors requiring grad that the graphs of ``outputs`` lead to, in first-seen
    order, each once (outputs without a node contribute nothing)."""
    leaves, seen_leaf, seen_node = [], set(), set()
    stack = [t._node for t in outputs if t._node is not None]
    while stack:
        node = stack.pop()
        if id(node) in seen_node:
            continue
        seen_node.add(id(node))
        for t, e in zip(node.inputs, node.edges):
            if e is None:
                continue
            if e[0] is None:
                if id(t) not in seen_leaf:
                    seen_leaf.add(id(t))
                    leaves.append(t)
            elif id(e[0]) not in seen_node:
                stack.append(e[0])
    return leaves
