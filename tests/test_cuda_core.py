"""The "cuda" device under numba's CUDA simulator (tests/conftest.py sets NUMBA_ENABLE_CUDASIM=1
when no GPU setting is given): the generic kernels, CudaArray views, and every core op family
giving the same values and gradients on cuda as on the CPU. Shapes are tiny: the simulator
runs each cuda thread as a Python thread."""
import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
from minidl import backends
from minidl.autograd import gradcheck
from minidl.autograd.op_function import Function

try:
    backends.get("cuda")
except RuntimeError as exc:   # pragma: no cover - only without numba.cuda
    pytest.skip(f"cuda device unavailable: {exc}", allow_module_level=True)

from minidl.backends.cuda import CUDA_NUMPY as xp  # noqa: E402
from minidl.backends.cuda import CudaArray  # noqa: E402


def dev(a):
    return CudaArray.from_host(np.asarray(a))


def host(a):
    return a.copy_to_host()


def rnd(*shape, seed=0, positive=False):
    a = np.random.default_rng(seed).standard_normal(shape)
    return np.abs(a) + 0.5 if positive else a


def check(fn, *arrays, grad=True, atol=1e-7, seed=1):
    """fn on cuda tensors gives the CPU's values and (for a random cotangent) gradients."""
    def make(device):
        return [md.tensor(a, requires_grad=grad and a.dtype.kind == "f", device=device)
                if isinstance(a, np.ndarray) else a for a in arrays]
    xc, xg = make("cpu"), make("cuda")
    yc, yg = fn(*xc), fn(*xg)
    assert yg.device == "cuda", f"result lives on {yg.device}"
    assert yg.dtype == yc.dtype and yg.shape == yc.shape
    np.testing.assert_allclose(yg.detach().cpu().numpy(), yc.detach().cpu().numpy(), atol=atol, rtol=1e-6)
    if grad:
        v = np.random.default_rng(seed).standard_normal(yc.shape).astype(yc.dtype)
        yc.backward(md.tensor(v))
        yg.backward(md.tensor(v, device="cuda"))
        for i, (c, g) in enumerate(zip(xc, xg)):
            if isinstance(c, md.Tensor) and c.requires_grad:
                assert g.grad is not None and g.grad.device == "cuda", f"input {i} has no cuda grad"
                np.testing.assert_allclose(g.grad.cpu().numpy(), c.grad.cpu().numpy(), atol=atol, rtol=1e-6,
                                           err_msg=f"gradient of input {i}")


# generic kernels, through CudaArray -----------------------------------------------------

def test_map_kernel_reads_any_strides_and_writes_strided_outputs():
    a = rnd(3, 4)
    x = dev(a)
    np.testing.assert_allclose(host(xp.exp(x.T[1:, ::2])), np.exp(a.T[1:, ::2]))
    out = xp.zeros((4, 6))
    xp.tanh(x.T, out=out[:, ::2])   # a strided output view
    expected = np.zeros((4, 6))
    expected[:, ::2] = np.tanh(a.T)
    np.testing.assert_allclose(host(out), expected)
    np.testing.assert_allclose(host(2 - x), 2 - a)
    np.testing.assert_allclose(host(2 / (x * x + 1)), 2 / (a * a + 1))
    assert (x.astype(np.float32) + 2.0).dtype == np.float32   # a Python number is a weak scalar
    assert xp.log(dev(np.zeros(1)))._buf.copy_to_host()[0] == -np.inf   # as NumPy, even in the simulator


def test_zip_kernel_broadcasts_over_strided_operands():
    a, b = rnd(2, 3, 4), rnd(4, 3, seed=2)
    x, y = dev(a), dev(b)
    np.testing.assert_allclose(host(x * y.T), a * b.T)
    np.testing.assert_allclose(host(x[:, :1] - y.T[None, 0]), a[:, :1] - b.T[None, 0])
    np.testing.assert_array_equal(host(x > y.T), a > b.T)
    np.testing.assert_allclose(host(xp.maximum(x, y.T)), np.maximum(a, b.T))
    acc = x.copy()
    acc += y.T
    np.testing.assert_allclose(host(acc), a + b.T)
    with pytest.raises(ValueError):
        x + dev(rnd(3))


@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2), (1,)])
def test_reduce_kernel(axis):
    a = rnd(2, 3, 5)
    x = dev(a).transpose(1, 0, 2)   # non-contiguous input
    at = a.transpose(1, 0, 2)
    np.testing.assert_allclose(host(x.sum(axis=axis)), at.sum(axis=axis))
    np.testing.assert_allclose(host(x.max(axis=axis, keepdims=True)), at.max(axis=axis, keepdims=True))
    np.testing.assert_allclose(host(x.mean(axis=axis)), at.mean(axis=axis))


def test_reduce_kernel_dtypes_and_accumulator():
    b = dev(np.array([[True, False, True], [True, True, True]]))
    s = b.sum(axis=1)
    assert s.dtype == np.int64 and host(s).tolist() == [2, 3]
    f = dev(np.full(40, 0.1, dtype=np.float32))
    assert f.sum().dtype == np.float32
    assert abs(float(f.sum()) - 4.0) < 1e-5
    assert host(dev(np.array([3, -7, 5])).min()) == -7


@pytest.mark.parametrize("sa,sb", [((3, 5), (5, 4)), ((2, 3, 5), (5, 6)), ((2, 1, 3, 4), (3, 4, 2)),
                                   ((5,), (5, 3)), ((3, 5), (5,)), ((5,), (5,))])
def test_matmul_kernel_shapes_and_batch_broadcast(sa, sb):
    a, b = rnd(*sa), rnd(*sb, seed=3)
    np.testing.assert_allclose(host(xp.matmul(dev(a), dev(b))), np.matmul(a, b), atol=1e-12)


def test_matmul_kernel_reads_transposed_operands_in_place():
    a, b = rnd(6, 3), rnd(5, 6, seed=3)
    np.testing.assert_allclose(host(dev(a).T @ dev(b).T), a.T @ b.T, atol=1e-12)
    c = dev(a.astype(np.float32)) .T @ dev(b.astype(np.float32)).T
    assert c.dtype == np.float32


def test_gather_scatter_and_where_kernels():
    a = rnd(4, 3)
    x = dev(a)
    idx = np.array([2, 0, 2])
    np.testing.assert_allclose(host(x[idx]), a[idx])
    np.testing.assert_allclose(host(x[:, [1, 1]]), a[:, [1, 1]])
    np.testing.assert_allclose(host(x.T[[0, 2], 1:]), a.T[[0, 2], 1:])
    g = xp.zeros((4, 3))
    xp.add.at(g, idx, dev(np.ones((3, 3))))
    expected = np.zeros((4, 3))
    np.add.at(expected, idx, np.ones((3, 3)))
    np.testing.assert_allclose(host(g), expected)   # the repeated row got both
    np.testing.assert_allclose(host(xp.where(x > 0, x, 0)), np.where(a > 0, a, 0))
    y = x.copy()
    y[[0, 3]] = 7.0
    z = a.copy()
    z[[0, 3]] = 7.0
    np.testing.assert_allclose(host(y), z)
    np.testing.assert_allclose(host(xp.take_along_axis(x, dev(np.array([[1], [0], [2], [2]])), 1)),
                               np.take_along_axis(a, np.array([[1], [0], [2], [2]]), 1))


# CudaArray: views, interface, namespace ------------------------------------------------------

def test_views_share_the_buffer():
    x = dev(np.arange(24.0).reshape(2, 3, 4))
    for v in (x.reshape(6, 4), x.transpose(2, 0, 1), x[1, :, ::2], x[:, None], xp.expand_dims(x, 0),
              xp.swapaxes(x, 0, 2), xp.broadcast_to(x[:, :1], (2, 5, 4))):
        assert v._buf is x._buf and v.base is x
    np.testing.assert_array_equal(host(x[1, :, ::2]), np.arange(24.0).reshape(2, 3, 4)[1, :, ::2])
    np.testing.assert_array_equal(host(x.transpose(2, 0, 1).reshape(4, 6)),
                                  np.arange(24.0).reshape(2, 3, 4).transpose(2, 0, 1).reshape(4, 6))
    b = xp.broadcast_to(x[:, :1], (2, 5, 4))
    assert not b.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        b[0] = 1.0
    v = x[0]
    v[...] = 0.0   # writes through the view
    assert host(x)[0].sum() == 0 and host(x)[1].sum() > 0


def test_cuda_array_interface():
    x = dev(np.arange(6, dtype=np.float32).reshape(2, 3))
    cai = x.__cuda_array_interface__
    assert cai["shape"] == (2, 3) and cai["typestr"] == "<f4" and cai["version"] == 3 and cai["strides"] is None
    t = x.T.__cuda_array_interface__
    assert t["shape"] == (3, 2) and t["strides"] == (4, 12)
    assert x[1].__cuda_array_interface__["data"][0] == cai["data"][0] + 3 * 4
    tensor = md.tensor(np.ones(3), device="cuda")
    assert tensor._data.__cuda_array_interface__["shape"] == (3,)


def test_namespace_names_what_it_lacks():
    with pytest.raises(NotImplementedError, match=r"numpy.fft.*cuda"):
        xp.fft
    with pytest.raises(NotImplementedError, match=r"argsort.*cuda"):
        dev(np.ones(3)).argsort()
    with pytest.raises(TypeError, match="cuda and cpu"):
        dev(np.ones(3)) + np.ones(3)


# tensors on the device ------------------------------------------------------------------------

def test_tensor_device_routing():
    a = rnd(2, 3)
    t = md.tensor(a, device="cuda")
    assert t.device == "cuda" and isinstance(t._data, CudaArray)
    assert isinstance(t.cpu().numpy(), np.ndarray)
    np.testing.assert_array_equal(t.cpu().numpy(), a)
    c = md.tensor(a, requires_grad=True)
    g = c.cuda()
    assert g.device == "cuda" and g.cpu().device == "cpu"
    assert md.tensor(a).to("cuda").device == "cuda"
    (g * g).sum().backward()   # the ToDevice op brings the gradient back to the CPU leaf
    assert c.grad.device == "cpu"
    np.testing.assert_allclose(c.grad.numpy(), 2 * a)
    assert "device='cuda:0'" in repr(t)       # as PyTorch prints a tensor on the current GPU
    assert md.zeros(2, 3, device="cuda").device == "cuda"
    assert md.randn(2, device="cuda").device == "cuda"
    assert float(md.tensor([2.5], device="cuda").sum()) == 2.5


def test_mixing_devices_names_both():
    a, b = md.ones(3), md.ones(3, device="cuda")
    with pytest.raises(RuntimeError, match=r"cpu and cuda:0"):
        a + b
    with pytest.raises(RuntimeError, match=r"cuda:0 and cpu"):
        b * a


def test_no_gpu_and_no_simulator_is_a_clear_error(monkeypatch):
    from numba import cuda
    monkeypatch.delitem(backends._BACKENDS, "cuda")
    monkeypatch.setattr(cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match="no CUDA GPU is available.*NUMBA_ENABLE_CUDASIM"):
        md.tensor([1.0], device="cuda")


def test_module_to_cuda_trains_like_cpu():
    md.manual_seed(0)
    cpu = nn.Linear(4, 3)
    gpu = nn.Linear(4, 3)
    gpu.load_state_dict(cpu.state_dict())
    gpu.to("cuda")
    assert all(p.device == "cuda" for p in gpu.parameters())
    x = rnd(2, 4)
    for m, d in ((cpu, "cpu"), (gpu, "cuda")):
        m(md.tensor(x, dtype=md.float32, device=d)).relu().sum().backward()
    for pc, pg in zip(cpu.parameters(), gpu.parameters()):
        assert pg.grad.device == "cuda"
        np.testing.assert_allclose(pg.grad.cpu().numpy(), pc.grad.cpu().numpy(), atol=1e-5)


def test_engine_zero_fills_unused_outputs_on_the_device_and_accumulates():
    class Split(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, ga, gb):
            return ga * 2 + gb * 3

    x = md.tensor(rnd(3), requires_grad=True, device="cuda")
    a, _ = Split.apply(x)
    a.sum().backward()
    np.testing.assert_allclose(x.grad.cpu().numpy(), np.full(3, 2.0))
    a2, _ = Split.apply(x)
    a2.sum().backward()   # accumulates in place on the device
    np.testing.assert_allclose(x.grad.cpu().numpy(), np.full(3, 4.0))


def test_gradcheck_runs_on_cuda():
    x = md.tensor(rnd(2, 3), requires_grad=True, device="cuda")
    assert gradcheck(lambda t: (t * t.exp()).sum(dim=1), [x])


# op families: cuda matches cpu (values and gradients) ---------------------------------------------

def test_arithmetic_broadcasting_and_non_contiguous():
    a, b = rnd(2, 3, 4), rnd(4, 3, seed=2)
    check(lambda x, y: x * y.T + x / (y.T * y.T + 1) - y.T, a, b)
    check(lambda x, y: (x.transpose(0, 2) - y[:, :, None]) ** 2, a, b)
    check(lambda x: 2 - x * 3 + 1 / (x * x + 1) - (-x), a)
    check(lambda x, y: x ** y, rnd(3, 2, positive=True), rnd(2, seed=4))
    check(lambda x: 2.0 ** x, rnd(3))


def test_arithmetic_float32():
    check(lambda x, y: (x * y + 1) / 3, rnd(2, 3).astype(np.float32), rnd(3, seed=2).astype(np.float32),
          atol=1e-5)


def test_unary():
    a = rnd(2, 4)
    check(lambda x: x.exp() + x.tanh() + x.sigmoid() + x.relu() + x.abs(), a)
    check(lambda x: x.log() + x.sqrt(), rnd(2, 4, positive=True))
    check(lambda x: x.clamp(-0.5, 0.5) + F.gelu(x, approximate="tanh"), a)
    check(lambda x: x.sin() + x.cos() + x.tan() + x.expm1(), a)
    check(lambda x: x.log1p() + x.log2(), rnd(2, 4, positive=True))
    edges = np.array([-1.0, -2.0, 0.0, np.inf, -np.inf, 800.0])    # the simulator's math would raise here
    with np.errstate(all="ignore"):
        for name in ("sin", "cos", "tan", "log1p", "expm1", "log2"):
            got = getattr(md, name)(md.tensor(edges, device="cuda")).cpu().numpy()
            np.testing.assert_allclose(got, getattr(np, name)(edges), rtol=1e-12, equal_nan=True, err_msg=name)


@pytest.mark.parametrize("dim", [None, 1, -1, (0, 2)])
def test_reductions(dim):
    a = rnd(2, 3, 4)
    check(lambda x: x.sum(dim=dim), a)
    check(lambda x: x.mean(dim=dim, keepdim=True), a)
    check(lambda x: x.var(dim=dim), a)
    check(lambda x: x.amax(dim=dim), a)


def test_max_splits_ties_and_min():
    a = np.array([[1.0, 3.0, 3.0], [2.0, -1.0, 0.0]])
    check(lambda x: x.amax(dim=1), a)
    check(lambda x: x.amin(dim=0), a)


@pytest.mark.parametrize("sa,sb", [((3, 5), (5, 4)), ((2, 1, 3, 4), (3, 4, 2)), ((5,), (2, 5, 3)), ((2, 3, 5), (5,))])
def test_matmul(sa, sb):
    check(lambda x, y: x @ y, rnd(*sa), rnd(*sb, seed=3), atol=1e-10)


def test_linear_layer_function():
    check(lambda x, w, b: F.linear(x, w, b), rnd(2, 3, 4), rnd(5, 4, seed=2), rnd(5, seed=3), atol=1e-10)


@pytest.mark.parametrize("dim", [0, -1])
def test_softmax_and_log_softmax(dim):
    a = rnd(3, 4)
    check(lambda x: x.softmax(dim), a)
    check(lambda x: x.log_softmax(dim), a)


def test_getitem_basic_and_integer_arrays_with_repeats():
    a = rnd(4, 3, 2)
    check(lambda x: x[1:, ::2, None], a)
    check(lambda x: x[0, -1], a)
    check(lambda x: x[[0, 2, 0, 0]], a)
    check(lambda x: x[:, [1, 1], 0], a)
    check(lambda x: x[md.tensor([3, 3, 1], device="cuda")] if x.device == "cuda" else x[md.tensor([3, 3, 1])], a)


def test_cat_stack_where_and_shape_ops():
    a, b = rnd(2, 3), rnd(2, 3, seed=2)
    check(lambda x, y: md.cat([x, y, x], dim=1), a, b)
    check(lambda x, y: md.stack([x, y], dim=1), a, b)
    check(lambda x, y: md.where(x > y, x, y * 2), a, b)
    check(lambda x: x.masked_fill(x > 0.5, -1.0), a)
    check(lambda x: x.reshape(3, 2).t().unsqueeze(0).expand(2, 2, 3).flatten(), a)
    check(lambda x: x.permute(1, 0).reshape(6), a)
    check(lambda x: x.tril(-1) * 2 + x.triu(1), rnd(2, 3, 4))


def test_overlapping_writes_read_first():
    a = np.arange(12.0).reshape(3, 4)
    x = dev(a)
    x[1:] = x[:-1]   # NumPy semantics: the source is read before the destination is written
    b = a.copy()
    b[1:] = b[:-1].copy()
    np.testing.assert_array_equal(host(x), b)
    s = dev(np.arange(9.0).reshape(3, 3))
    s += s.T
    np.testing.assert_array_equal(host(s), np.arange(9.0).reshape(3, 3) + np.arange(9.0).reshape(3, 3).T)


def test_device_side_gathers_and_scatters_match_numpy():
    a = rnd(3, 4, 2)
    x = dev(a)
    i_host = np.array([[3, -1], [0, 3]])
    i_dev = dev(i_host)
    np.testing.assert_allclose(host(x[:, i_dev]), a[:, i_host])
    np.testing.assert_allclose(host(x.transpose(2, 0, 1)[:, :, i_dev]), a.transpose(2, 0, 1)[:, :, i_host])
    g = xp.zeros((3, 4, 2))
    xp.add.at(g, (slice(None), i_dev), dev(np.ones((3, 2, 2, 2))))
    e = np.zeros((3, 4, 2))
    np.add.at(e, (slice(None), i_host), np.ones((3, 2, 2, 2)))
    np.testing.assert_allclose(host(g), e)   # index 3 appears twice: both copies added
    y = x.copy()
    y[dev(np.array([2, 0]))] = 5.0
    z = a.copy()
    z[[2, 0]] = 5.0
    np.testing.assert_allclose(host(y), z)
    t = np.array([[1], [3], [0]])
    b = rnd(3, 4, seed=5)
    np.testing.assert_allclose(host(xp.take_along_axis(dev(b).T.T, dev(t), 1)), np.take_along_axis(b, t, 1))
    w = dev(b)
    xp.put_along_axis(w, dev(t), dev(np.array([[7.0], [8.0], [9.0]])), axis=1)
    c = b.copy()
    np.put_along_axis(c, t, np.array([[7.0], [8.0], [9.0]]), axis=1)
    np.testing.assert_allclose(host(w), c)


def test_bool_mask_assignment_of_a_scalar_stays_on_device():
    a = np.array([[1.0, -np.inf], [np.nan, 2.0]])
    x = dev(a)
    x[~xp.isfinite(x)] = 0
    np.testing.assert_array_equal(host(x), np.array([[1.0, 0.0], [0.0, 2.0]]))
    y = dev(a)
    y[dev(np.array([True, False]))] = 3.0   # a mask over the first axis only: the general path
    np.testing.assert_array_equal(host(y)[0], [3.0, 3.0])
