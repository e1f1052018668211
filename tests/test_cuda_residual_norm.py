"""The fused residual add + LayerNorm / RMSNorm on cuda (minidl/kernels/cuda/residual_norm.py)
under the CUDA simulator: the kernels against the NumPy reference, and through F.add_layer_norm /
F.add_rms_norm (both outputs used) against the CPU."""
import numpy as np
import pytest

import minidl.nn.functional as F
from minidl import backends

try:
    backends.get("cuda")
except RuntimeError as exc:   # pragma: no cover
    pytest.skip(f"cuda device unavailable: {exc}", allow_module_level=True)

from minidl.backends.cuda import CudaArray  # noqa: E402
from minidl.kernels.cuda import residual_norm as k  # noqa: E402
from minidl.ops.normalization import residual_norm as R  # noqa: E402

from test_cuda_core import check, rnd  # noqa: E402


def test_layer_norm_kernels_match_reference():
    x, r, dy, ds = rnd(6, 5), rnd(6, 5, seed=1) + 10, rnd(6, 5, seed=2), rnd(6, 5, seed=3)
    w, b = rnd(5, seed=4), rnd(5, seed=5)
    d = CudaArray.from_host
    s, y, mean, rstd = k.add_layer_norm_forward(d(x), d(r), d(w), d(b), 1e-5)
    rs, ry, rmean, rrstd = R.add_layer_norm_forward_reference(x, r, w, b, 1e-5)
    np.testing.assert_allclose(s.copy_to_host(), rs, rtol=1e-12)
    np.testing.assert_allclose(y.copy_to_host(), ry, rtol=1e-10, atol=1e-10)
    for with_ds in (d(ds), None):
        dr = CudaArray.empty((6, 5), np.float64)     # r's own copy of the gradient
        dx, dw, db = k.add_layer_norm_backward(d(dy), with_ds, s, mean, rstd, d(w), dr_out=dr)
        rdx, rdw, rdb = R.add_layer_norm_backward_reference(dy, None if with_ds is None else ds, rs, rmean, rrstd, w)
        for got, want in ((dx, rdx), (dw, rdw), (db, rdb)):
            np.testing.assert_allclose(got.copy_to_host(), want, rtol=1e-9, atol=1e-9)
        np.testing.assert_array_equal(dr.copy_to_host(), dx.copy_to_host())


def test_rms_norm_kernels_match_reference():
    x, r, dy, ds, w = rnd(6, 5), rnd(6, 5, seed=1), rnd(6, 5, seed=2), rnd(6, 5, seed=3), rnd(5, seed=4)
    d = CudaArray.from_host
    s, y, rstd = k.add_rms_norm_forward(d(x), d(r), d(w), 1e-6)
    rs, ry, rrstd = R.add_rms_norm_forward_reference(x, r, w, 1e-6)
    np.testing.assert_allclose(y.copy_to_host(), ry, rtol=1e-10, atol=1e-10)
    dr = CudaArray.empty((6, 5), np.float64)
    dx, dw = k.add_rms_norm_backward(d(dy), d(ds), s, rstd, d(w), dr_out=dr)
    rdx, rdw = R.add_rms_norm_backward_reference(dy, ds, rs, rrstd, w)
    np.testing.assert_allclose(dx.copy_to_host(), rdx, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(dr.copy_to_host(), dx.copy_to_host())
    np.testing.assert_allclose(dw.copy_to_host(), rdw, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("which", ["layer", "rms"])
def test_functional_matches_the_cpu(which):
    def both(x, r, w):
        s, y = F.add_layer_norm(x, r, 5, w, w) if which == "layer" else F.add_rms_norm(x, r, 5, w)
        return s * 0.5 + y      # both outputs reach the loss
    check(both, rnd(3, 2, 5), rnd(3, 2, 5, seed=1), rnd(5, seed=2))
