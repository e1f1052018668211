"""Tools for testing: PyTorch's ``assert_close``, and a declarative op-test harness built on gradcheck."""
from .comparison import assert_close
from .op_spec import OpSpec, check_forward, check_gradcheck, check_implementations, forward_cases, spec_id

__all__ = ["assert_close", "OpSpec", "check_forward", "check_gradcheck", "check_implementations", "forward_cases",
           "spec_id"]
