"""Reverse-mode automatic differentiation: Function nodes, the backward engine,
grad-mode switches and finite-difference gradient checking."""
from .api import backward, grad
from . import function  # torch.autograd.function's names; minidl's own ops subclass op_function.Function
from .function import Function
from .grad_mode import (enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled, no_grad,
                        set_grad_enabled)
from .gradcheck import GradcheckError, gradcheck
from .gradcheck import gradgradcheck
from . import functional
from .anomaly_mode import detect_anomaly, is_anomaly_check_nan_enabled, is_anomaly_enabled, set_detect_anomaly
from .variable import Variable
from .hooks import RemovableHandle

__all__ = ["Function", "GradcheckError", "RemovableHandle", "backward", "enable_grad", "grad", "gradcheck",
           "inference_mode", "is_grad_enabled", "is_inference_mode_enabled", "no_grad", "set_grad_enabled"]
__all__ += ["Variable", "detect_anomaly", "function", "functional", "gradgradcheck", "is_anomaly_check_nan_enabled",
            "is_anomaly_enabled", "set_detect_anomaly"]
from . import graph
from .graph import Node

__all__ += ["Node", "graph"]
from . import forward_ad, profiler
from .engine_flags import is_multithreading_enabled, is_tensor_like, is_view_replay_enabled, set_multithreading_enabled

__all__ += ["forward_ad", "is_multithreading_enabled", "is_tensor_like", "is_view_replay_enabled", "profiler",
            "set_multithreading_enabled"]
