"""Tensor -> NumPy follows PyTorch's rule: numpy() (and NumPy's np.asarray / np.array, which go
through __array__) hands out the tensor's memory only for a CPU tensor that does not require
grad; numpy(force=True) is detach().cpu().numpy(); tolist() and item() work on any tensor."""
import numpy as np
import pytest

import minidl as md
from minidl import backends

GRAD_MSG = r"Can't call numpy\(\) on Tensor that requires grad.*detach\(\)\.numpy\(\)"


def _leaf():
    return md.tensor([1.0, -2.0, 3.0], requires_grad=True)


def _conversions():
    return {
        "numpy": lambda t: t.numpy(),
        "__array__": lambda t: t.__array__(),
        "np.asarray": lambda t: np.asarray(t),
        "np.array": lambda t: np.array(t),
        "np.asarray float64": lambda t: np.asarray(t, dtype=np.float64),
    }


@pytest.mark.parametrize("name", list(_conversions()))
@pytest.mark.parametrize("make", [_leaf, lambda: _leaf() * 2, lambda: _leaf()[1:]], ids=["leaf", "nonleaf", "view"])
def test_requires_grad_refuses_numpy(name, make):
    with pytest.raises(RuntimeError, match=GRAD_MSG):
        _conversions()[name](make())


def test_under_no_grad_a_requires_grad_tensor_converts():
    """PyTorch refuses only while grad mode is on: under no_grad nothing is recorded."""
    x = _leaf()
    for ctx in (md.no_grad, md.inference_mode):
        with ctx():
            a = x.numpy()
            np.testing.assert_array_equal(np.asarray(x), [1.0, -2.0, 3.0])
        assert np.shares_memory(a, x.detach().numpy())
    with md.no_grad():
        with md.enable_grad():
            with pytest.raises(RuntimeError, match=GRAD_MSG):
                x.numpy()


def test_detached_and_no_grad_results_convert_and_share_memory():
    x = _leaf()
    a = x.detach().numpy()
    a[0] = 7.0
    assert x.detach().numpy()[0] == 7.0          # the same memory, as PyTorch's
    with md.no_grad():
        y = x * 2
    assert not y.requires_grad
    np.testing.assert_array_equal(y.numpy(), [14.0, -4.0, 6.0])
    np.testing.assert_array_equal(np.asarray(y), [14.0, -4.0, 6.0])


def test_force_detaches_and_shares_cpu_memory():
    x = _leaf()
    a = x.numpy(force=True)
    np.testing.assert_array_equal(a, [1.0, -2.0, 3.0])
    a[1] = 5.0                                   # on the CPU force copies nothing (PyTorch's too)
    assert x.tolist() == [1.0, 5.0, 3.0]
    assert x.requires_grad                       # force reads; it changes nothing about x
    np.testing.assert_array_equal((x * 3).numpy(force=True), [3.0, 15.0, 9.0])
    assert md.tensor([1, 2]).numpy(force=False).tolist() == [1, 2]


def test_force_is_keyword_only():
    with pytest.raises(TypeError):
        md.ones(2).numpy(True)


def test_tolist_item_and_python_scalars_are_allowed_on_requires_grad():
    x = _leaf()
    assert x.tolist() == [1.0, -2.0, 3.0]
    assert (x * 2).tolist() == [2.0, -4.0, 6.0]
    assert x[2].item() == 3.0
    assert x.sum().item() == 2.0
    assert float(x[0]) == 1.0 and int(x[2]) == 3 and bool(x[1])


def test_np_array_copies_and_np_asarray_shares():
    t = md.tensor([1.0, 2.0])
    c = np.array(t)                               # NumPy asks __array__ for a copy
    c[0] = 9.0
    assert t.tolist() == [1.0, 2.0]
    s = np.asarray(t)
    s[0] = 9.0
    assert t.tolist() == [9.0, 2.0]
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    with pytest.raises(ValueError, match="copy"):
        np.array(t, dtype=np.float64, copy=False)  # a dtype change cannot avoid the copy


def test_library_functions_still_read_requires_grad_tensors():
    x = _leaf()
    assert "requires_grad=True" in repr(x) and "grad_fn" in repr(x * 2)
    assert md.allclose(x, x.detach()) and md.equal(x, x.detach())
    assert md.isclose(x, x.detach()).all().item()
    assert md.nonzero(x).shape == (3, 1)
    p = md.nn.Parameter(md.ones(3))
    p.grad = md.ones(3)
    norm = md.nn.utils.clip_grad_norm_([p], 1.0)
    assert abs(norm.item() - 3 ** 0.5) < 1e-6


def _cuda_tensor(requires_grad):
    try:
        backends.get("cuda")
    except RuntimeError as exc:   # pragma: no cover - only without numba.cuda
        pytest.skip(f"cuda device unavailable: {exc}")
    return md.tensor([1.0, 2.0], device="cuda", requires_grad=requires_grad)


def test_off_cpu_numpy_is_a_type_error_and_force_copies():
    t = _cuda_tensor(False)
    with pytest.raises(TypeError, match=r"cuda.*Tensor\.cpu\(\)"):
        t.numpy()
    with pytest.raises(TypeError, match=r"cuda.*Tensor\.cpu\(\)"):
        np.asarray(t)
    a = t.numpy(force=True)
    assert isinstance(a, np.ndarray) and a.tolist() == [1.0, 2.0]
    a[0] = 5.0                                    # a host copy: the device tensor keeps its values
    assert t.tolist() == [1.0, 2.0] and t.cpu().numpy().tolist() == [1.0, 2.0]
    g = _cuda_tensor(True)
    with pytest.raises(TypeError, match=r"cuda.*Tensor\.cpu\(\)"):   # the device is checked first, as PyTorch
        g.numpy()
    with pytest.raises(RuntimeError, match=GRAD_MSG):
        g.cpu().numpy()
    assert g.numpy(force=True).tolist() == [1.0, 2.0] and g[1].item() == 2.0


@pytest.mark.filterwarnings("ignore::DeprecationWarning")   # torch's own __array__ takes no copy=
def test_matches_torch():
    torch = pytest.importorskip("torch")
    for lib in (torch, md):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        for convert in _conversions().values():
            with pytest.raises(RuntimeError, match=GRAD_MSG):
                convert(x)
        assert x.numpy(force=True).tolist() == [1.0, 2.0]
        with lib.no_grad():
            assert x.numpy().tolist() == [1.0, 2.0]
        assert x.tolist() == [1.0, 2.0] and x[0].item() == 1.0
        with pytest.raises(TypeError):
            x.numpy(True)
