"""Reverse-mode automatic differentiation: Function nodes, the backward engine,
grad-mode switches and finite-difference gradient checking."""
from .api import backward, grad
from .function import Function
from .grad_mode import (enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled, no_grad,
                        set_grad_enabled)
from .gradcheck import GradcheckError, gradcheck
from .hooks import RemovableHandle

__all__ = ["Function", "GradcheckError", "RemovableHandle", "backward", "enable_grad", "grad", "gradcheck",
           "inference_mode", "is_grad_enabled", "is_inference_mode_enabled", "no_grad", "set_grad_enabled"]
