"""minidl.func: the function transforms of ``torch.func``.

- ``grad``, ``grad_and_value``, ``vjp``, ``jacrev``, ``jacfwd``: derivatives of functions of
  tensors, on minidl's reverse-mode autograd (_derivatives.py). First order only: ``hessian``
  and a transform nested in another one that differentiates through it raise
  NotImplementedError, since minidl's backward passes record no graph.
- ``jvp``, ``linearize``: Jacobian-vector products, read off rows of the Jacobian by reverse
  mode (one backward pass per output element; _jvp.py), since minidl has no forward mode.
- ``vmap``: a loop over the batch dimension with PyTorch's in_dims/out_dims/randomness, not a
  batching transform (_vmap.py).
- ``functional_call``, ``stack_module_state``: modules as functions of their tensors
  (_stateless.py). minidl.nn loads on first use, not on import.
"""
from ._derivatives import grad, grad_and_value, hessian, jacfwd, jacrev, vjp
from ._jvp import jvp, linearize
from ._stateless import functional_call, stack_module_state
from ._vmap import vmap

__all__ = ["functional_call", "grad", "grad_and_value", "hessian", "jacfwd", "jacrev", "stack_module_state", "vjp",
           "vmap"]
__all__ += ["jvp", "linearize"]
