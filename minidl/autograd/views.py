"""Views and in-place writes: a base tensor and the views of its memory stay in one history.

A view (``Tensor._base`` set: the output of reshape, transpose, a basic slice... made in
grad mode) records the version of the shared memory at which its history was taken
(``_view_version``). A view made under no_grad only shares the version counter, like
``detach()``: as in PyTorch it is not a differentiable view.

- An in-place op on the base itself gives the base a new history (tensor/inplace.py); a
  view made before then still points at the old one, though its values changed. So when
  a view's shared version has moved since, its history is renewed from the base before
  it is used (``refresh``: by every op, by backward, by ``grad_fn``): it becomes
  ``ViewOf(base)`` (ops/copy_slices.py), as PyTorch regenerates a view's grad_fn.
- A recorded in-place op on a view changes the base: ``write_through_view`` records
  ``CopySlices`` on the base, then the view's history becomes a view of the new base.

A tensor that called ``retain_grad()`` keeps retaining through each new history it takes
(``move_retained``): its ``.grad`` is the gradient of its values as they are now, PyTorch's
rule (a hook registered with ``register_hook`` stays on the old history instead).
"""
from . import grad_mode


def current(t):
    """``t``, its history renewed first if it is a stale view."""
    if t._base is not None and t._view_version != t._version_counter.value:
        refresh(t)
    return t


def refresh(view):
    """Give ``view`` the history of its base as the base is now (see the module docstring)."""
    base = view._base
    version = view._version_counter.value
    if base._node is None and not base._requires_grad:
        view._view_version = version       # the base is outside the graph: nothing to renew
        return
    from ..ops.copy_slices import ViewOf, view_positions
    pos = view_positions(base._data, view._data)
    state = grad_mode._state
    enabled, state.enabled = state.enabled, True   # the view keeps its history beyond a no_grad block
    try:
        fresh = ViewOf.apply(base, pos)
    finally:
        state.enabled = enabled
    old_node, old_index = view._node, view._out_index
    view._node, view._out_index, view._requires_grad = fresh._node, 0, fresh._requires_grad
    view._view_version = version
    if old_node is not None:
        move_retained(view, old_node, old_index)


def move_retained(t, old_node, old_index):
    """``t`` has just taken a new history (t._node) in place of ``(old_node, old_index)``: if it
    retains its grad, it now retains it from the new node (the engine fills ``.grad`` from the
    node that made the tensor's current values)."""
    retained = old_node.__dict__.get("_retained")
    ref = retained.get(old_index) if retained else None
    if ref is None or ref() is not t or t._node is None or t._node is old_node:
        return
    del retained[old_index]
    t._node.__dict__.setdefault("_retained", {})[t._out_index] = ref


def write_through_view(view, result):
    """Record that ``result`` (the op's output, of view's shape and dtype) is written into
    ``view``'s memory: the base becomes CopySlices(base, result) and the view a view of it.
    The caller writes the values and bumps the version afterwards."""
    from ..ops.copy_slices import CopySlices, view_positions
    base = view._base
    pos = view_positions(base._data, view._data, writing=True)
    new_base = CopySlices.apply(base, result, pos)
    old_node, old_index = base._node, base._out_index
    base._node, base._out_index, base._requires_grad = new_base._node, 0, True
    if old_node is not None:
        move_retained(base, old_node, old_index)
    return pos


def adopt_view_history(view, pos):
    """After the write: the view's history is a view of its base's new history."""
    from ..ops.copy_slices import ViewOf
    fresh = ViewOf.apply(view._base, pos)
    old_node, old_index = view._node, view._out_index
    view._node, view._out_index, view._requires_grad = fresh._node, 0, True
    if old_node is not None:
        move_retained(view, old_node, old_index)
    view._view_version = view._version_counter.value
