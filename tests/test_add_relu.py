"""F.add_relu: relu(a + b) as one op, the residual add of a ResNet block and the ReLU after it.

Forward against NumPy and gradchecks with both implementations; the kernel against the reference
in float32/float64, serial and parallel sizes; bit for bit the add then the ReLU (values, mask and
both gradients, NaN and -0.0 included, float16 too); the fallback to the two ops where shapes,
dtypes or devices differ; and the zoo's ResNet blocks taking it where their norm does not fold
the add and the ReLU in itself."""
import numpy as np
import pytest

import minidl as md
import minidl.nn.functional as F
from minidl.kernels.cpu import relu as k_relu
from minidl.ops import unary
from minidl.testing import OpSpec, check_forward, check_gradcheck, check_implementations, forward_cases, spec_id
from minidl.zoo import resnet8

SHAPES = [(3, 4), (2, 3, 5, 5), (1 << 17,)]     # the last runs the parallel loop
SPECS = [OpSpec(name=f"add_relu{s}", op=lambda a, b: F.add_relu(a, b), reference=lambda a, b: np.maximum(a + b, 0),
                inputs=lambda rng, s=s: (rng.standard_normal(s), rng.standard_normal(s)))
         for s in SHAPES[:2]]



@pytest.mark.parametrize("spec", SPECS, ids=spec_id)
def test_gradcheck(spec, impl):
    assert check_gradcheck(spec)


@pytest.mark.parametrize("spec,dtype,device", forward_cases(SPECS))
def test_forward(spec, dtype, device, impl):
    check_forward(spec, dtype, device)


KERNEL_SPECS = [OpSpec(name=f"kernel{s}", op=None,
                       inputs=lambda rng, s=s: (rng.standard_normal(s), rng.standard_normal(s)),
                       reference=unary.add_relu_forward_reference,
                       implementations={"numba": k_relu.add_relu_forward}) for s in SHAPES]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("spec", KERNEL_SPECS, ids=spec_id)
def test_the_kernel_matches_the_reference(spec, dtype):
    check_implementations(spec, dtype)


def _both(a0, b0, g0):
    out = []
    for fused in (True, False):
        a, b = md.tensor(a0, requires_grad=True), md.tensor(b0, requires_grad=True)
        y = F.add_relu(a, b) if fused else F.relu(a + b)
        y.backward(md.tensor(g0))
        out.append([y.detach().numpy(), a.grad.numpy(), b.grad.numpy()])
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("shape", [(7, 9), (1 << 17,)])
def test_equals_the_add_then_the_relu_bit_for_bit(shape, dtype):
    rng = np.random.default_rng(2)
    a0, b0, g0 = (rng.standard_normal(shape).astype(dtype) for _ in range(3))
    flat = a0.reshape(-1)
    flat[:4], b0.reshape(-1)[:4] = [np.nan, 1.0, -0.0, 2.0], [1.0, -1.0, -0.0, -2.0]   # NaN; 0; -0.0; 0
    fused, plain = _both(a0, b0, g0)
    for x, y in zip(fused, plain):
        np.testing.assert_array_equal(x, y)
        assert (np.signbit(x) == np.signbit(y)).all()
    y, da = fused[0].reshape(-1), fused[1].reshape(-1)
    assert np.isnan(y[0]) and da[0] == g0.reshape(-1)[0]         # NaN passes, with its gradient
    assert (y[1:4] == 0).all() and (da[1:4] == 0).all()          # a zero sum stops it


def test_only_the_inputs_that_need_it_get_a_gradient():
    a = md.tensor(np.array([1.0, -2.0, 3.0]), requires_grad=True)
    b = md.tensor(np.array([0.5, 0.5, -4.0]))
    F.add_relu(a, b).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [1.0, 0.0, 0.0])
    assert b.grad is None


@pytest.mark.parametrize("other", [lambda a: md.tensor(np.ones(3)), lambda a: 2.0,
                                   lambda a: md.tensor(np.ones((2, 3)), dtype=md.float32)])
def test_anything_but_one_shape_and_dtype_runs_as_the_two_ops(other):
    a = md.tensor(np.array([[1.0, -2.0, 3.0], [-1.0, 0.5, -0.5]]), requires_grad=True)
    o = other(a)
    y = F.add_relu(a, o)
    assert type(y.grad_fn) is unary.Relu
    np.testing.assert_array_equal(y.detach().numpy(), F.relu(a + o).detach().numpy())


@pytest.mark.parametrize("options,calls_per_forward", [(dict(norm="layer"), 3), (dict(norm="none", init="skipinit"), 3),
                                                       (dict(norm="batch"), 0)])   # BatchNorm: its own trio
def test_the_zoo_resnet_blocks_end_in_it(monkeypatch, options, calls_per_forward):
    calls = []
    original = unary.AddRelu.apply.__func__
    monkeypatch.setattr(unary.AddRelu, "apply", classmethod(lambda c, *a: calls.append(1) or original(c, *a)))
    model = resnet8(in_channels=3, num_classes=10, **options)
    x = md.tensor(np.random.default_rng(5).standard_normal((2, 3, 8, 8)).astype(np.float32))
    model(x).sum().backward()
    assert len(calls) == calls_per_forward          # one per block where the norm does not take it
    assert all(p.grad is not None for p in model.parameters())
