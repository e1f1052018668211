"""bfloat16 on the cuda device (the CUDA simulator in CI, tiny shapes): kept as its 16 bits on the
device, and every result equal to the CPU's bfloat16 result, bit for bit where both round one
float32 result once, else within one bfloat16 ulp: creation, transfers and conversions,
elementwise ops, reductions, indexing, linear / matmul, LayerNorm, softmax, cross-entropy and an
autocast(bfloat16) training of a small MLP."""
import ml_dtypes
import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
from minidl import backends

try:
    backends.get("cuda")
except RuntimeError as exc:   # pragma: no cover
    pytest.skip(f"cuda device unavailable: {exc}", allow_module_level=True)

BF16 = ml_dtypes.bfloat16


def _bits(t):
    a = t.cpu().detach().numpy() if isinstance(t, md.Tensor) else np.asarray(t)
    assert a.dtype == BF16
    return a.view(np.uint16)


def _ulps(a, b):
    """Distance in bfloat16 ulps between two bfloat16 arrays (+0 and -0 are 0 apart)."""
    def ordered(x):
        bits = _bits(x).astype(np.int64)
        return np.where(bits & 0x8000, -(bits & 0x7fff), bits)
    return np.abs(ordered(a) - ordered(b))


def _pair(shape, seed, scale=1.0, requires_grad=False):
    """The same bfloat16 values as a CPU tensor and a cuda tensor."""
    x = (np.random.default_rng(seed).standard_normal(shape) * scale).astype(BF16)
    return (md.tensor(x, requires_grad=requires_grad), md.tensor(x, device="cuda", requires_grad=requires_grad))


def _special_floats(seed):
    """Random float32 values plus the cases rounding gets wrong first: ties, values next to them,
    signed zeros, subnormals, the overflow edge, inf and NaN."""
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2 ** 32, 200, dtype=np.uint64).astype(np.uint32)
    ties = (rng.integers(0, 2 ** 16, 20, dtype=np.uint64).astype(np.uint32) << 16) | 0x8000
    edge = np.array([0x00000000, 0x80000000, 0x00000001, 0x80007fff, 0x7f7f7fff, 0x7f7f8000, 0x7f7fffff,
                     0x7f800000, 0xff800000, 0x7fc00000, 0xffa00001, 0x3f808000, 0x3f818000], np.uint32)
    return np.concatenate([bits, ties, ties + 1, ties - 1, edge]).view(np.float32)


def test_created_and_round_tripped_bit_exactly():
    x = md.ones(3, dtype=md.bfloat16, device="cuda")
    assert x.dtype is md.bfloat16 and x.device == "cuda" and x.element_size() == 2
    assert x.cpu().dtype is md.bfloat16 and x.tolist() == [1.0, 1.0, 1.0]
    for made, value in ((md.zeros((2, 3), dtype=md.bfloat16, device="cuda"), 0.0),
                        (md.full((2,), 0.1, dtype=md.bfloat16, device="cuda"), 0.1)):
        np.testing.assert_array_equal(_bits(made), np.full(made.shape, value).astype(BF16).view(np.uint16))
    np.testing.assert_array_equal(_bits(md.arange(0, 3, 0.375, dtype=md.bfloat16, device="cuda")),
                                  _bits(md.arange(0, 3, 0.375, dtype=md.bfloat16)))
    every = np.arange(2 ** 16, dtype=np.uint16).view(BF16)       # every bit pattern, NaNs included
    dev = md.tensor(every).to("cuda")
    assert dev.dtype is md.bfloat16
    np.testing.assert_array_equal(_bits(dev), every.view(np.uint16))
    np.testing.assert_array_equal(_bits(dev[::-3].contiguous()), every[::-3].view(np.uint16))
    small = md.tensor([0.5, 1.2, -3.0]).bfloat16()
    assert repr(small.to("cuda")) == repr(small).replace("dtype=", "device='cuda:0', dtype=")


def test_saved_and_loaded_exactly(tmp_path):
    x = md.tensor(np.arange(0, 2 ** 16, 97, dtype=np.uint16).view(BF16)).to("cuda")
    md.save({"x": x}, tmp_path / "x.pt")
    back = md.load(tmp_path / "x.pt")["x"]   # the checkpoint's array, moved back to the device
    np.testing.assert_array_equal(_bits(md.tensor(back, device="cuda")), _bits(x))


@pytest.mark.filterwarnings("ignore:invalid value encountered in cast")   # ml_dtypes' own NaN casts
@pytest.mark.filterwarnings("ignore:.*overflow encountered in cast")     # the simulator's float64 -> float32 step
def test_conversions_round_as_ml_dtypes():
    f32 = _special_floats(0)
    got = md.tensor(f32, device="cuda").to(md.bfloat16)
    np.testing.assert_array_equal(_bits(got), f32.astype(BF16).view(np.uint16))
    # float64 rounds once: 1 + 2**-8 + 2**-30 is above the tie, float32 first would round it down
    f64 = np.concatenate([f32.astype(np.float64), [1 + 2 ** -8 + 2 ** -30, -(1 + 2 ** -8 + 2 ** -40), 1e300, 1e-300],
                          np.random.default_rng(1).standard_normal(50) * 1e3])
    np.testing.assert_array_equal(_bits(md.tensor(f64, device="cuda").to(md.bfloat16)),
                                  f64.astype(BF16).view(np.uint16))
    b = f32.astype(BF16)
    dev = md.tensor(b, device="cuda")
    for dtype, np_dtype in ((md.float32, np.float32), (md.float64, np.float64), (md.float16, np.float16)):
        with np.errstate(over="ignore"):
            want = b.astype(np_dtype)
        np.testing.assert_array_equal(dev.to(dtype).cpu().numpy().view(f"u{want.itemsize}"),
                                      want.view(f"u{want.itemsize}"))
    ints = md.tensor([-3, 0, 7, 300], device="cuda").to(md.bfloat16)
    assert ints.tolist() == [-3.0, 0.0, 7.0, 300.0] and ints.dtype is md.bfloat16


def test_elementwise_equals_the_cpu():
    (a, da), (b, db) = _pair((3, 4), 2), _pair((4,), 3, scale=2.0)
    exact = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
             "div": lambda x, y: x / y, "max": md.maximum, "scalar": lambda x, y: x * 0.1 - 3,
             "rsub": lambda x, y: 2.5 - x, "neg_abs": lambda x, y: (-x).abs(), "relu": lambda x, y: F.relu(x)}
    for name, f in exact.items():   # one float32 result rounded once on both devices: the same bits
        np.testing.assert_array_equal(_bits(f(da, db)), _bits(f(a, b)), err_msg=name)
    close = {"exp": lambda x: x.exp(), "tanh": lambda x: x.tanh(), "sqrt": lambda x: x.abs().sqrt(),
             "log": lambda x: (x.abs() + 1).log(), "gelu": F.gelu, "sigmoid": lambda x: x.sigmoid()}
    for name, f in close.items():
        out = f(da)
        assert out.dtype is md.bfloat16, name
        assert _ulps(out, f(a)).max() <= 1, name
    assert (da < db).tolist() == (a < b).tolist() and (da == da).all().item()
    mixed = da + db.float()     # bfloat16 with float32 is float32, as PyTorch
    assert mixed.dtype is md.float32
    np.testing.assert_array_equal(mixed.cpu().numpy(), (a + b.float()).numpy())
    acc = md.zeros(3, 4, device="cuda", dtype=md.bfloat16)
    acc += da
    acc.mul_(3)
    np.testing.assert_array_equal(_bits(acc), _bits(a * 3))


def test_reductions_and_indexing_equal_the_cpu():
    a, da = _pair((4, 6), 4)
    for name, f in {"sum": lambda x: x.sum(1), "mean": lambda x: x.mean(0), "max": lambda x: x.max(),
                    "amin": lambda x: x.amin(1), "all": lambda x: x.sum()}.items():
        out, ref = f(da), f(a)
        assert out.dtype is ref.dtype is md.bfloat16, name
        assert _ulps(out, ref).max() <= 1, name
    assert da.argmax(1).tolist() == a.argmax(1).tolist()
    idx = md.tensor([3, 0, 3, 1])
    np.testing.assert_array_equal(_bits(da[idx.to("cuda")]), _bits(a[idx]))
    np.testing.assert_array_equal(_bits(da[1:, ::2].t()), _bits(a[1:, ::2].t()))
    np.testing.assert_array_equal(_bits(md.where(da > 0, da, 0.5)), _bits(md.where(a > 0, a, 0.5)))
    np.testing.assert_array_equal(_bits(md.cat([da, da[:1]])), _bits(md.cat([a, a[:1]])))
    # gradient of an index with repeats: a scatter-add on the device
    (w, dw) = _pair((5, 3), 5, requires_grad=True)
    g = md.tensor(np.random.default_rng(6).standard_normal((4, 3)).astype(BF16))
    w[idx].backward(g)
    dw[idx.to("cuda")].backward(g.to("cuda"))
    assert dw.grad.dtype is md.bfloat16 and _ulps(dw.grad, w.grad).max() <= 1


def test_linear_and_matmul_equal_the_cpu():
    (x, dx), (w, dw), (b, db) = (_pair(s, 7 + i, requires_grad=True) for i, s in enumerate(((3, 5), (4, 5), (4,))))
    y, dy = F.linear(x, w, b), F.linear(dx, dw, db)
    assert dy.dtype is md.bfloat16 and dy.device == "cuda"
    assert _ulps(dy, y).max() <= 1          # float32 products and sums, one rounding; only the order differs
    g = md.tensor(np.random.default_rng(10).standard_normal((3, 4)).astype(BF16))
    y.backward(g)
    dy.backward(g.to("cuda"))
    for cpu, dev in ((x, dx), (w, dw), (b, db)):
        assert dev.grad.dtype is md.bfloat16 and _ulps(dev.grad, cpu.grad).max() <= 1
    assert _ulps(dx @ dw.t(), x @ w.t()).max() <= 1


def test_layer_norm_forward_backward_equals_the_cpu():
    x, dx = _pair((3, 16), 11, scale=2.0, requires_grad=True)
    cpu_ln, dev_ln = nn.LayerNorm(16).bfloat16(), nn.LayerNorm(16).bfloat16().to("cuda")
    with md.no_grad():
        wb = md.tensor(np.random.default_rng(12).standard_normal((2, 16)).astype(BF16))
        for m, dev in ((cpu_ln, "cpu"), (dev_ln, "cuda")):
            m.weight.copy_(wb[0].to(dev))
            m.bias.copy_(wb[1].to(dev))
    y, dy = cpu_ln(x), dev_ln(dx)
    assert dy.dtype is md.bfloat16 and _ulps(dy, y).max() <= 1   # float32 statistics, one rounding
    g = md.tensor(np.random.default_rng(13).standard_normal((3, 16)).astype(BF16))
    y.backward(g)
    dy.backward(g.to("cuda"))
    for cpu, dev in ((x, dx), (cpu_ln.weight, dev_ln.weight), (cpu_ln.bias, dev_ln.bias)):
        assert dev.grad.dtype is md.bfloat16 and _ulps(dev.grad, cpu.grad).max() <= 1


def test_softmax_and_cross_entropy_equal_the_cpu():
    x, dx = _pair((4, 5), 14, scale=3.0, requires_grad=True)
    t = md.tensor([0, 4, 2, 2])
    for f in (lambda v: F.softmax(v, -1), lambda v: F.log_softmax(v, -1)):
        out, ref = f(dx), f(x)
        assert out.dtype is md.bfloat16 and _ulps(out, ref).max() <= 1
    loss, ref = F.cross_entropy(dx, t.to("cuda")), F.cross_entropy(x, t)
    assert loss.dtype is ref.dtype and _ulps(loss, ref).max() <= 1
    loss.backward()
    ref.backward()
    assert dx.grad.dtype is md.bfloat16 and _ulps(dx.grad, x.grad).max() <= 1


def test_autocast_bfloat16_training_on_cuda_follows_the_cpu():
    def run(device):
        md.manual_seed(0)
        model = nn.Sequential(nn.Linear(6, 8), nn.GELU(), nn.LayerNorm(8), nn.Linear(8, 3)).to(device)
        opt = md.optim.SGD(model.parameters(), lr=0.1)
        rng = np.random.default_rng(15)
        x = md.tensor(rng.standard_normal((4, 6)).astype(np.float32), device=device)
        t = md.tensor([0, 1, 2, 1], device=device)
        losses = []
        for _ in range(2):
            opt.zero_grad()
            with md.autocast(device, dtype=md.bfloat16):
                h = model[0](x)
                loss = F.cross_entropy(model[1:](h), t)
            assert h.dtype is md.bfloat16 and loss.dtype is md.float32
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert all(p.grad.dtype is md.float32 for p in model.parameters())
        return losses, [p.detach().cpu().numpy() for p in model.parameters()]

    cpu_losses, cpu_params = run("cpu")
    dev_losses, dev_params = run("cuda")
    # the same bfloat16 roundings up to float32 summation order: a rounding may land one ulp apart
    np.testing.assert_allclose(dev_losses, cpu_losses, rtol=2 ** -7)
    for c, d in zip(cpu_params, dev_params):
        np.testing.assert_allclose(d, c, rtol=2 ** -7, atol=2 ** -9)
