"""Elementwise activations, PReLU and GLU: NumPy references and gradcheck through OpSpec,
PyTorch as the oracle for values and gradients (at kinks and thresholds too), the modules
(parameters, repr) and bad input."""
import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
from minidl.testing import OpSpec, check_forward, check_gradcheck, forward_cases, spec_id

ALPHA, SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def _sig(x):
    return 1 / (1 + np.exp(-x))


def _sp(x):
    return np.logaddexp(0, x)


# (name, call, numpy reference)
ELEMENTWISE = [
    ("silu", F.silu, lambda x: x * _sig(x)),
    ("elu", lambda x: F.elu(x, alpha=0.7), lambda x: np.where(x > 0, x, 0.7 * (np.exp(x) - 1))),
    ("selu", F.selu, lambda x: SCALE * np.where(x > 0, x, ALPHA * (np.exp(x) - 1))),
    ("leaky_relu", lambda x: F.leaky_relu(x, 0.2), lambda x: np.where(x > 0, x, 0.2 * x)),
    ("relu6", F.relu6, lambda x: np.clip(x, 0, 6)),
    ("hardtanh", lambda x: F.hardtanh(x, -0.5, 2.0), lambda x: np.clip(x, -0.5, 2.0)),
    ("softplus", F.softplus, _sp),
    ("softplus_beta_threshold", lambda x: F.softplus(x, beta=2.0, threshold=3.0),
     lambda x: np.where(2 * x > 3, x, _sp(2 * x) / 2)),
    ("softsign", F.softsign, lambda x: x / (1 + np.abs(x))),
    ("mish", F.mish, lambda x: x * np.tanh(_sp(x))),
    ("logsigmoid", F.logsigmoid, lambda x: np.log(_sig(x))),
    ("tanhshrink", F.tanhshrink, lambda x: x - np.tanh(x)),
]

SPECS = [OpSpec(name, call, ref, lambda rng: (rng.standard_normal((3, 5)) * 4,)) for name, call, ref in ELEMENTWISE]
SPECS += [
    OpSpec("prelu_per_channel", F.prelu, lambda x, w: np.where(x > 0, x, w[None, :, None] * x),
           lambda rng: (rng.standard_normal((2, 3, 4)), rng.uniform(0, 0.5, 3))),
    OpSpec("prelu_shared", F.prelu, lambda x, w: np.where(x > 0, x, w * x),
           lambda rng: (rng.standard_normal((2, 3, 4)), rng.uniform(0, 0.5, 1))),
    OpSpec("glu_last", F.glu, lambda x: x[..., :2] * _sig(x[..., 2:]), lambda rng: (rng.standard_normal((3, 4)),)),
    OpSpec("glu_dim0", lambda x: F.glu(x, 0), lambda x: x[:2] * _sig(x[2:]),
           lambda rng: (rng.standard_normal((4, 3)),)),
]


@pytest.mark.parametrize("spec,dtype,device", forward_cases(SPECS))
def test_forward_matches_numpy_reference(spec, dtype, device):
    check_forward(spec, dtype, device)


@pytest.mark.parametrize("spec", SPECS, ids=spec_id)
def test_gradcheck(spec):
    assert check_gradcheck(spec)


# PyTorch as the oracle ---------------------------------------------------------------------

TORCH_CALLS = [
    ("silu", {}), ("elu", {}), ("elu", {"alpha": 0.3}), ("selu", {}), ("leaky_relu", {}),
    ("leaky_relu", {"negative_slope": 0.3}), ("relu6", {}), ("hardtanh", {}), ("hardtanh", {"min_val": 0.0,
                                                                                          "max_val": 2.0}),
    ("softplus", {}), ("softplus", {"beta": 2.0, "threshold": 1.0}), ("softsign", {}), ("mish", {}),
    ("logsigmoid", {}), ("tanhshrink", {}),
]

# includes the kinks (0, 1, -1, 6, 2) and values past the thresholds, and large values that overflow exp
EDGES = np.array([-800.0, -30.0, -6.0, -2.0, -1.0, -0.5, 0.0, 0.25, 0.5, 1.0, 2.0, 6.0, 7.0, 25.0, 800.0])


@pytest.mark.parametrize("name,kw", TORCH_CALLS, ids=[f"{n}{kw}" for n, kw in TORCH_CALLS])
def test_matches_torch_values_and_gradients(name, kw):
    torch = pytest.importorskip("torch")
    x = md.tensor(EDGES, requires_grad=True)
    tx = torch.tensor(EDGES, requires_grad=True)
    y, ty = getattr(F, name)(x, **kw), getattr(torch.nn.functional, name)(tx, **kw)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-12, atol=1e-300)
    v = np.linspace(-1, 2, EDGES.size)
    y.backward(md.tensor(v))
    ty.backward(torch.tensor(v))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("xshape,wshape", [((2, 3, 4), (3,)), ((2, 3), (1,)), ((5,), (1,)), ((), (1,))])
def test_prelu_matches_torch(xshape, wshape):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    xa, wa = rng.standard_normal(xshape), rng.uniform(0, 1, wshape)
    x, w = md.tensor(xa, requires_grad=True), md.tensor(wa, requires_grad=True)
    tx, tw = torch.tensor(xa, requires_grad=True), torch.tensor(wa, requires_grad=True)
    y, ty = F.prelu(x, w), torch.nn.functional.prelu(tx, tw)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy())
    y.sum().backward()
    ty.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy())


def test_glu_matches_torch():
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(0).standard_normal((2, 4, 3))
    x, tx = md.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y, ty = F.glu(x, dim=1), torch.nn.functional.glu(tx, dim=1)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy())
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())


# modules -------------------------------------------------------------------------------------

MODULES = [("SiLU", ()), ("ELU", ()), ("ELU", (0.5, True)), ("SELU", ()), ("LeakyReLU", ()), ("LeakyReLU", (0.2,)),
           ("PReLU", ()), ("PReLU", (3, 0.1)), ("ReLU6", ()), ("ReLU6", (True,)), ("Hardtanh", ()),
           ("Hardtanh", (-2.0, 2.0)), ("Softplus", ()), ("Softplus", (2.0, 5.0)), ("Mish", ()), ("Softsign", ()),
           ("GLU", ()), ("LogSigmoid", ()), ("Tanhshrink", ()), ("Softmax", ()), ("Softmax", (1,)),
           ("LogSoftmax", (1,)), ("Identity", ())]


@pytest.mark.filterwarnings("ignore:Implicit dimension choice")
@pytest.mark.parametrize("name,args", MODULES, ids=[f"{n}{a}" for n, a in MODULES])
def test_modules_match_torch_output_and_repr(name, args):
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(0).standard_normal((2, 3, 4))
    ours, theirs = getattr(nn, name)(*args), getattr(torch.nn, name)(*args).double()
    assert repr(ours) == repr(theirs)
    np.testing.assert_allclose(ours.double()(md.tensor(a)).detach().numpy(), theirs(torch.tensor(a)).detach().numpy(),
                               rtol=1e-12)
    assert [(n, tuple(p.shape)) for n, p in ours.named_parameters()] == \
           [(n, tuple(p.shape)) for n, p in theirs.named_parameters()]


def test_prelu_module_learns_its_slope():
    m = nn.PReLU(2, init=0.5)
    x = md.tensor([[-1.0, -2.0], [3.0, -4.0]])
    m(x).sum().backward()
    np.testing.assert_allclose(m.weight.grad.numpy(), [-1.0, -6.0])
    assert m.weight.dtype == np.float32


# bad input -----------------------------------------------------------------------------------

@pytest.mark.parametrize("call,exc,match", [
    (lambda: F.glu(md.randn(3, 3)), RuntimeError, "Halving dimension must be even, but dimension 1 is size 3"),
    (lambda: F.glu(md.randn(3, 4), dim=2), IndexError, r"expected to be in range of \[-2, 1\], but got 2"),
    (lambda: F.prelu(md.randn(3, 4), md.randn(3)), RuntimeError,
     "Found parameter numbers = 3 and channel size = 4"),
    (lambda: F.hardtanh(md.randn(3), 2.0, 1.0), ValueError, "min_val=2.0, max_val=1.0"),
    (lambda: nn.Hardtanh(2.0, 1.0), ValueError, "min_val cannot be greater than max_val"),
    (lambda: F.elu(md.tensor([1, 2])), NotImplementedError, "dtype .*int64; expected a floating point input"),
    # as PyTorch ("GeluKernelImpl" not implemented for 'Long'): not truncated ints, nor a float64 result
    (lambda: F.gelu(md.tensor([1, 2])), NotImplementedError, "gelu: .*dtype minidl.int64; expected a floating"),
    (lambda: F.gelu(md.tensor([1, 2]), approximate="tanh"), NotImplementedError, "gelu: .*dtype minidl.int64"),
    (lambda: nn.GELU()(md.tensor([1, 2])), NotImplementedError, "gelu: .*dtype minidl.int64"),
    (lambda: F.softmax(md.tensor([1, 2]), 0), NotImplementedError, "softmax: .*dtype minidl.int64"),
    (lambda: F.log_softmax(md.tensor([1, 2]), 0), NotImplementedError, "log_softmax: .*dtype minidl.int64"),
    (lambda: md.tensor([True]).softmax(0), NotImplementedError, "softmax: .*dtype minidl.bool"),
    (lambda: F.prelu(md.randn(3, 2), md.randn(2).double()), RuntimeError, "dtypes differ"),
])
def test_bad_input_raises_torch_exception_type_naming_expected_and_got(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_empty_input_gives_empty_output_and_gradient():
    x = md.zeros(0, 4, requires_grad=True)
    y = F.mish(x)
    assert y.shape == (0, 4)
    y.sum().backward()
    assert x.grad.shape == (0, 4)
