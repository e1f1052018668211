"""Which BLAS the kernels' own GEMM calls reach (kernels/cpu/_cblas.py): NumPy's OpenBLAS, or
Intel's MKL on an Intel CPU where the optional ``mkl`` package is installed; MINIDL_GEMM
overrides the choice, and a choice that cannot be honoured says so and falls back.

The selection is re-run by calling ``_find`` under patched surroundings (the module made its
choice once, at import). Where MKL is installed, its functions compute the same products as
NumPy's and the linear layer's region gives the reference's results through them."""
import ctypes.util
import os
import subprocess
import sys

import numpy as np
import pytest

from minidl.kernels.cpu import _cblas

MKL = _cblas._mkl_library() is not None
needs_mkl = pytest.mark.skipif(not MKL, reason="the optional mkl package is not installed")
needs_openblas = pytest.mark.skipif(not _cblas._find_openblas(), reason="NumPy's BLAS is not an ILP64 OpenBLAS")


def _product(functions, dtype):
    """C = A B^T (2 x 3 @ 3 x 4, row-major) through a found ctypes GEMM."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 3)).astype(dtype), rng.standard_normal((4, 3)).astype(dtype)
    c = np.full((2, 4), np.nan, dtype)
    functions[dtype](_cblas.ROW_MAJOR, _cblas.NO_TRANS, _cblas.TRANS, 2, 4, 3, 1.0, a.ctypes.data, 3, b.ctypes.data,
                     3, 0.0, c.ctypes.data, 4)
    np.testing.assert_allclose(c, a @ b.T, rtol=1e-5 if dtype == np.float32 else 1e-12)


@needs_openblas
@pytest.mark.parametrize("setting", ["openblas", " OpenBLAS "])
def test_openblas_when_asked_for_even_with_mkl_at_hand(setting, monkeypatch):
    monkeypatch.setenv("MINIDL_GEMM", setting)
    monkeypatch.setattr(_cblas, "_find_mkl", lambda: pytest.fail("MKL was looked for"))
    provider, functions = _cblas._find()
    assert provider == "openblas"
    _product(functions, np.float32)
    _product(functions, np.float64)


@needs_openblas
@pytest.mark.parametrize("intel", [True, False])
def test_auto_takes_mkl_only_on_an_intel_cpu(intel, monkeypatch):
    monkeypatch.delenv("MINIDL_GEMM", raising=False)
    monkeypatch.setattr(_cblas, "_intel_cpu", lambda: intel)
    monkeypatch.setattr(_cblas, "_find_mkl", lambda: {np.float32: "mkl sgemm"})
    assert _cblas._find()[0] == ("mkl" if intel else "openblas")


@needs_openblas
def test_auto_without_mkl_installed_is_openblas_without_a_warning(monkeypatch, recwarn):
    monkeypatch.setenv("MINIDL_GEMM", "auto")
    monkeypatch.setattr(_cblas, "_intel_cpu", lambda: True)
    monkeypatch.setattr(_cblas, "_mkl_library", lambda: None)
    assert _cblas._find()[0] == "openblas"
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


@needs_openblas
def test_mkl_asked_for_but_missing_warns_and_keeps_openblas(monkeypatch):
    monkeypatch.setenv("MINIDL_GEMM", "mkl")
    monkeypatch.setattr(_cblas, "_mkl_library", lambda: None)
    with pytest.warns(RuntimeWarning, match=r"MINIDL_GEMM=mkl, but no MKL was found \(pip install minidl\[mkl\]\)"):
        assert _cblas._find()[0] == "openblas"


@needs_openblas
def test_an_unknown_setting_names_the_choices_and_means_auto(monkeypatch):
    monkeypatch.setenv("MINIDL_GEMM", "atlas")
    monkeypatch.setattr(_cblas, "_intel_cpu", lambda: False)
    with pytest.warns(RuntimeWarning, match=r"one of auto, openblas, mkl, got 'atlas'; using 'auto'"):
        assert _cblas._find()[0] == "openblas"


def test_a_missing_or_foreign_library_is_not_mkl(monkeypatch, tmp_path):
    monkeypatch.setattr(_cblas, "_mkl_library", lambda: str(tmp_path / "libmkl_rt.so.3"))
    assert _cblas._find_mkl() == {}                 # no such file
    monkeypatch.setattr(_cblas, "_mkl_library", lambda: ctypes.util.find_library("c") or "libc.so.6")
    assert _cblas._find_mkl() == {}                 # a library without MKL's functions


def test_an_mkl_another_library_loaded_is_left_alone(monkeypatch):
    monkeypatch.setattr(_cblas, "_mkl_library", lambda: "/nonexistent/libmkl_rt.so.3")
    monkeypatch.setattr(_cblas, "_mkl_already_loaded", lambda ours: ours == "/nonexistent")
    monkeypatch.setattr(ctypes, "CDLL", lambda *a, **k: pytest.fail("a library was loaded"))
    assert _cblas._find_mkl() == {}


@needs_mkl
def test_mkls_functions_compute_the_products(monkeypatch):
    monkeypatch.setenv("MINIDL_GEMM", "mkl")
    provider, functions = _cblas._find()
    assert provider == "mkl"
    _product(functions, np.float32)
    _product(functions, np.float64)


@needs_mkl
@pytest.mark.parametrize("setting", ["mkl", "openblas"])
def test_the_linear_region_matches_the_reference_on_either_library(setting):
    """In a process of its own, which makes its choice at import as a user's would."""
    code = (
        "import numpy as np, numba\n"
        "from minidl.kernels.cpu import _cblas, linear as K\n"
        "from minidl.ops import linear as L\n"
        f"assert _cblas.PROVIDER == {setting!r}, _cblas.PROVIDER\n"
        "K.layer_parallel = lambda n: True\n"
        "rng = np.random.default_rng(0)\n"
        "x, w, b, g = (rng.standard_normal(s).astype(np.float32) for s in ((300, 40), (70, 40), (70,), (300, 70)))\n"
        "assert numba.get_num_threads() < 2 or K._shares(300, 70, x, w) >= 2\n"
        "np.testing.assert_allclose(K.linear_forward(x, w, b), L.linear_forward_reference(x, w, b), rtol=2e-5, atol=1e-4)\n"
        "for have, want in zip(K.linear_backward(g, x, w, True), L.linear_backward_reference(g, x, w, True)):\n"
        "    np.testing.assert_allclose(have, want, rtol=2e-5, atol=1e-3)\n"
        "print('ok')\n")
    env = {"MINIDL_GEMM": setting}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, **env})
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
