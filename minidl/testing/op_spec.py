"""A declarative op-test harness: describe an op once, get three kinds of test.

    spec = OpSpec(
        name="layer_norm",
        op=lambda x, w, b: F.layer_norm(x, (5,), w, b),            # the minidl op, on Tensors
        reference=lambda x, w, b: ...,                              # the same in plain NumPy
        inputs=lambda rng: (rng.standard_normal((3, 5)), rng.standard_normal(5), rng.standard_normal(5)),
        implementations={"numba": layer_norm_kernel_forward},        # optional: fast kernels
    )

- ``check_forward(spec, dtype, device)``: the op's output matches the NumPy reference;
- ``check_gradcheck(spec)``: the op's backward matches finite differences in float64
  (random cotangents, see minidl.autograd.gradcheck);
- ``check_implementations(spec, dtype)``: every alternative implementation (a Numba or
  CUDA kernel taking and returning arrays) matches the reference.

In a test module::

    @pytest.mark.parametrize("spec", SPECS, ids=spec_id)
    def test_gradcheck(spec): check_gradcheck(spec)

    @pytest.mark.parametrize("spec,dtype,device", forward_cases(SPECS))
    def test_forward(spec, dtype, device): check_forward(spec, dtype, device)
"""
from dataclasses import dataclass, field
from typing import Callable, Dict, Optional, Sequence

import numpy as np

from ..tensor import dtype as _dtypes

TOLERANCES = {np.dtype("float16"): (1e-2, 1e-2), np.dtype("float32"): (1e-4, 1e-4), np.dtype("float64"): (1e-10, 1e-8)}
if _dtypes.bfloat16 is not None:   # 8 significant bits: a few roundings in a row cost a few percent
    TOLERANCES[_dtypes.bfloat16.dtype] = (5e-2, 5e-2)


@dataclass
class OpSpec:
    name: str
    op: Callable                       # (*Tensors) -> Tensor or tuple of Tensors
    reference: Callable                # (*ndarrays) -> ndarray or tuple of ndarrays
    inputs: Callable                   # (np.random.Generator) -> tuple of float64 ndarrays (or other values)
    dtypes: Sequence = ("float32", "float64")
    devices: Sequence = ("cpu",)
    grad_inputs: Optional[Sequence[int]] = None   # which inputs gradcheck perturbs (default: every float array)
    implementations: Dict[str, Callable] = field(default_factory=dict)
    tolerances: Dict = field(default_factory=dict)  # dtype name -> (atol, rtol), overriding TOLERANCES
    gradcheck_kwargs: Dict = field(default_factory=dict)
    seed: int = 0

    def make_inputs(self):
        return tuple(self.inputs(np.random.default_rng(self.seed)))

    def tol(self, dtype):
        dtype = np.dtype(dtype)
        return self.tolerances.get(dtype.name, TOLERANCES[dtype])


def spec_id(spec):
    return spec.name


def forward_cases(specs):
    """(spec, dtype, device) triples for pytest.mark.parametrize; devices that are not
    available here are skipped with a reason, not silently dropped."""
    import pytest
    cases = []
    for s in specs:
        for dt in s.dtypes:
            for dev in s.devices:
                marks = []
                reason = _unavailable(dev)
                if reason:
                    marks.append(pytest.mark.skip(reason=reason))
                cases.append(pytest.param(s, dt, dev, id=f"{s.name}-{dt}-{dev}", marks=marks))
    return cases


def _unavailable(device):
    if device == "cpu":
        return None
    try:
        from .. import backends
        backends.get(device)
    except RuntimeError as exc:
        return str(exc)
    return None


def _is_float_array(a):
    return isinstance(a, np.ndarray) and a.dtype.kind in "fV"   # V: bfloat16


def _to_tensors(arrays, dtype, device, requires_grad=()):
    from ..tensor.factories import tensor
    out = []
    for i, a in enumerate(arrays):
        if _is_float_array(a):
            out.append(tensor(a.astype(dtype), requires_grad=i in requires_grad, device=device))
        else:
            out.append(a)
    return out


def _tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _assert_close(actual, expected, dtype, spec, what):
    atol, rtol = spec.tol(dtype)
    for k, (a, e) in enumerate(zip(_tuple(actual), _tuple(expected))):
        a = np.asarray(a, dtype=np.float64)
        e = np.asarray(e, dtype=np.float64)
        if a.shape != e.shape:
            raise AssertionError(f"{spec.name} {what} output {k}: shape {a.shape}, reference shape {e.shape}")
        np.testing.assert_allclose(a, e, atol=atol, rtol=rtol,
                                   err_msg=f"{spec.name} {what} output {k} ({np.dtype(dtype).name})")


def check_forward(spec, dtype, device="cpu"):
    """The op's output on Tensors equals the reference on the same (rounded) arrays."""
    arrays = spec.make_inputs()
    cast = [a.astype(dtype) if _is_float_array(a) else a for a in arrays]
    out = _tuple(spec.op(*_to_tensors(arrays, dtype, device)))
    for o in out:
        if o.dtype != np.dtype(dtype):
            raise AssertionError(f"{spec.name}: output dtype {o.dtype} for {np.dtype(dtype).name} inputs")
    ref = spec.reference(*[a.astype(np.float64) if _is_float_array(a) else a for a in cast])
    _assert_close([o.numpy(force=True) for o in out], ref, dtype, spec, f"forward on {device}")


def check_gradcheck(spec):
    """The op's backward agrees with central differences in float64."""
    from ..autograd.gradcheck import gradcheck
    arrays = spec.make_inputs()
    idx = spec.grad_inputs if spec.grad_inputs is not None else [i for i, a in enumerate(arrays) if _is_float_array(a)]
    tensors = _to_tensors(arrays, np.float64, "cpu", requires_grad=set(idx))
    return gradcheck(spec.op, tensors, **spec.gradcheck_kwargs)


def check_implementations(spec, dtype):
    """Every alternative implementation (kernel) agrees with the reference."""
    if not spec.implementations:
        raise ValueError(f"{spec.name}: no implementations to check")
    arrays = [a.astype(dtype) if _is_float_array(a) else a for a in spec.make_inputs()]
    expected = spec.reference(*[a.astype(np.float64) if _is_float_array(a) else a for a in arrays])
    for name, impl in spec.implementations.items():
        _assert_close(impl(*[a.copy() if isinstance(a, np.ndarray) else a for a in arrays]), expected, dtype, spec,
                      f"implementation {name!r}")
