"""Reverse-mode automatic differentiation: Function nodes, the backward engine,
grad-mode switches and finite-difference gradient checking."""
from .engine import backward as _engine_backward
from .function import Function
from .grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .gradcheck import GradcheckError, gradcheck


def backward(tensors, grad_tensors=None, retain_graph=False):
    """Backpropagate from several outputs at once (as ``torch.autograd.backward``)."""
    import numpy as np
    from ..tensor.tensor import Tensor
    tensors = list(tensors) if isinstance(tensors, (list, tuple)) else [tensors]
    if grad_tensors is None:
        grad_tensors = [None] * len(tensors)
    grads = []
    for t, g in zip(tensors, grad_tensors):
        if g is None:
            if t.numel() != 1:
                raise RuntimeError(f"grad can be implicitly created only for scalar outputs, got shape {t.shape}")
            g = np.ones(t.shape, t.dtype)
        grads.append(g._data if isinstance(g, Tensor) else np.asarray(g, dtype=t.dtype))
    _engine_backward(tensors, grads, retain_graph=retain_graph)


__all__ = ["Function", "GradcheckError", "backward", "enable_grad", "gradcheck", "is_grad_enabled", "no_grad",
           "set_grad_enabled"]
