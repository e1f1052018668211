"""Tools for testing ops: a declarative op-test harness built on gradcheck."""
from .op_spec import OpSpec, check_forward, check_gradcheck, check_implementations, forward_cases, spec_id

__all__ = ["OpSpec", "check_forward", "check_gradcheck", "check_implementations", "forward_cases", "spec_id"]
