"""PyTorch's ``torch.utils.hooks``: the handle that removes a hook, and the marker that says a
tensor hook is not meant to be saved.

``RemovableHandle`` is the one every ``register_*hook`` of minidl returns (tensor and module
hooks alike, minidl.autograd.hooks). Saving a tensor (``md.save``) stores its data, never its
gradient hooks; ``warn_if_has_hooks`` tells the user so for each hook not decorated with
``unserializable_hook``.
"""
import warnings

from ..autograd.hooks import RemovableHandle

__all__ = ["RemovableHandle", "unserializable_hook", "warn_if_has_hooks"]


def unserializable_hook(f):
    """Mark ``f`` as a hook that is not expected to be saved with its tensor: no warning from
    ``warn_if_has_hooks`` (the attribute is PyTorch's, so a hook marked for PyTorch counts)."""
    f.__torch_unserializable__ = True
    return f


def _gradient_hooks(tensor):
    """The gradient hooks registered on ``tensor``: a leaf keeps them itself, a non-leaf's live
    on the node that made it, per output (see Tensor.register_hook)."""
    node = getattr(tensor, "_node", None)
    if node is None:
        return getattr(tensor, "_hooks", None) or {}
    return node.__dict__.get("_output_hooks", {}).get(tensor._out_index) or {}


def warn_if_has_hooks(tensor):
    """Warn (UserWarning) once for each gradient hook of ``tensor`` that saving would drop,
    unless it was marked with ``unserializable_hook``."""
    for hook in list(_gradient_hooks(tensor).values()):
        if not hasattr(hook, "__torch_unserializable__"):
            warnings.warn(f"backward hook {hook!r} on tensor will not be serialized.  If this is expected, you can "
                          "decorate the function with @minidl.utils.hooks.unserializable_hook to suppress this "
                          "warning", stacklevel=2)
