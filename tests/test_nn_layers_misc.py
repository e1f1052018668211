"""Bilinear, EmbeddingBag, LocalResponseNorm, BatchNorm3d and the lazy layers: NumPy
references and gradcheck through OpSpec, PyTorch as the oracle, bad input."""
import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
import minidl.optim as optim
from minidl.testing import OpSpec, check_forward, check_gradcheck, forward_cases, spec_id


def lrn_ref(x, n, alpha, beta, k):
    C = x.shape[1]
    out = np.empty_like(x)
    for c in range(C):
        lo, hi = max(c - n // 2, 0), min(c + (n - 1) // 2, C - 1)
        out[:, c] = x[:, c] / (k + alpha / n * (x[:, lo:hi + 1] ** 2).sum(axis=1)) ** beta
    return out


def bag_ref(w, idx, mode):
    rows = w[idx]                              # (B, L, D)
    return {"sum": rows.sum(1), "mean": rows.mean(1), "max": rows.max(1)}[mode]


SPECS = [
    OpSpec("bilinear", F.bilinear, lambda a, b, w, c: np.einsum("ni,kij,nj->nk", a, w, b) + c,
           lambda r: (r.standard_normal((3, 2)), r.standard_normal((3, 4)), r.standard_normal((5, 2, 4)),
                      r.standard_normal(5))),
    OpSpec("local_response_norm", lambda x: F.local_response_norm(x, 3, alpha=0.5, beta=0.7, k=2.0),
           lambda x: lrn_ref(x, 3, 0.5, 0.7, 2.0), lambda r: (r.standard_normal((2, 5, 3)),)),
    OpSpec("local_response_norm_even", lambda x: F.local_response_norm(x, 4, alpha=0.5),
           lambda x: lrn_ref(x, 4, 0.5, 0.75, 1.0), lambda r: (r.standard_normal((2, 5, 2, 2)),)),
] + [OpSpec(f"embedding_bag_{mode}", lambda w, idx, mode=mode: F.embedding_bag(md.tensor(idx), w, mode=mode),
            lambda w, idx, mode=mode: bag_ref(w, idx, mode),
            lambda r: (r.standard_normal((6, 3)), np.array([[0, 2, 1], [5, 5, 3]]))) for mode in ("sum", "mean", "max")]


@pytest.mark.parametrize("spec,dtype,device", forward_cases(SPECS))
def test_forward_matches_numpy_reference(spec, dtype, device):
    check_forward(spec, dtype, device)


@pytest.mark.parametrize("spec", SPECS, ids=spec_id)
def test_gradcheck(spec):
    assert check_gradcheck(spec)


rng = np.random.default_rng(0)


def _check_grads(ours, theirs, y, ty):
    v = rng.standard_normal(y.shape)
    y.backward(md.tensor(v))
    ty.backward(__import__("torch").tensor(v))
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-10, atol=1e-12)
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-12)


def _leaves(arrays):
    torch = pytest.importorskip("torch")
    return ([md.tensor(a, requires_grad=True) for a in arrays], [torch.tensor(a, requires_grad=True) for a in arrays])


def test_bilinear_matches_torch_with_batch_dims():
    torch = pytest.importorskip("torch")
    ours, theirs = _leaves([rng.standard_normal(s) for s in ((2, 3, 4), (2, 3, 5), (6, 4, 5), (6,))])
    _check_grads(ours, theirs, F.bilinear(*ours), torch.nn.functional.bilinear(*theirs))


@pytest.mark.parametrize("size", [1, 2, 3, 4, 7])
def test_local_response_norm_matches_torch(size):
    torch = pytest.importorskip("torch")
    ours, theirs = _leaves([rng.standard_normal((2, 5, 3, 2))])
    _check_grads(ours, theirs, F.local_response_norm(ours[0], size, alpha=0.3, beta=0.6, k=1.5),
                 torch.nn.functional.local_response_norm(theirs[0], size, alpha=0.3, beta=0.6, k=1.5))


BAGS = [(np.array([[0, 2, 1], [5, 5, 3]]), None, {}), (np.array([0, 2, 1, 5, 5, 3, 4]), np.array([0, 2, 2, 5]), {}),
        (np.array([0, 2, 1, 5, 5, 3, 4]), np.array([0, 2, 2, 5, 7]), {"include_last_offset": True}),
        (np.array([[0, 2, 1], [5, 5, 3]]), None, {"padding_idx": 5})]


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("case", range(len(BAGS)))
def test_embedding_bag_matches_torch(mode, case):
    torch = pytest.importorskip("torch")
    idx, off, kw = BAGS[case]
    (w,), (tw,) = _leaves([rng.standard_normal((6, 3))])
    y = F.embedding_bag(md.tensor(idx), w, None if off is None else md.tensor(off), mode=mode, **kw)
    ty = torch.nn.functional.embedding_bag(torch.tensor(idx), tw, None if off is None else torch.tensor(off),
                                           mode=mode, **kw)
    _check_grads([w], [tw], y, ty)


def test_embedding_bag_per_sample_weights_match_torch():
    torch = pytest.importorskip("torch")
    (w, p), (tw, tp) = _leaves([rng.standard_normal((6, 3)), rng.standard_normal(7)])
    idx, off = np.array([0, 2, 1, 5, 5, 3, 4]), np.array([0, 2, 2, 5])
    y = F.embedding_bag(md.tensor(idx), w, md.tensor(off), mode="sum", per_sample_weights=p, padding_idx=2)
    ty = torch.nn.functional.embedding_bag(torch.tensor(idx), tw, torch.tensor(off), mode="sum",
                                           per_sample_weights=tp, padding_idx=2)
    _check_grads([w, p], [tw, tp], y, ty)


def test_embedding_bag_module_matches_torch():
    torch = pytest.importorskip("torch")
    ours, theirs = nn.EmbeddingBag(6, 3, mode="max", padding_idx=1), torch.nn.EmbeddingBag(6, 3, mode="max",
                                                                                         padding_idx=1)
    assert repr(ours) == repr(theirs)
    assert (ours.weight.detach().numpy()[1] == 0).all()
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    idx = np.array([[0, 1, 4], [1, 1, 1]])
    np.testing.assert_allclose(ours(md.tensor(idx)).detach().numpy(), theirs(torch.tensor(idx)).detach().numpy())


def test_bilinear_and_lrn_modules_match_torch():
    torch = pytest.importorskip("torch")
    ours, theirs = nn.Bilinear(2, 3, 4), torch.nn.Bilinear(2, 3, 4)
    assert repr(ours) == repr(theirs)
    assert np.abs(ours.weight.detach().numpy()).max() <= 1 / np.sqrt(2)
    ours.double().load_state_dict({k: v.double().numpy() for k, v in theirs.state_dict().items()})
    a, b = rng.standard_normal((5, 2)), rng.standard_normal((5, 3))
    np.testing.assert_allclose(ours(md.tensor(a), md.tensor(b)).detach().numpy(),
                               theirs.double()(torch.tensor(a), torch.tensor(b)).detach().numpy())
    assert repr(nn.LocalResponseNorm(3)) == repr(torch.nn.LocalResponseNorm(3))


def test_batch_norm_3d_matches_torch_in_train_and_eval():
    torch = pytest.importorskip("torch")
    ours, theirs = nn.BatchNorm3d(3).double(), torch.nn.BatchNorm3d(3).double()
    (x,), (tx,) = _leaves([rng.standard_normal((2, 3, 2, 3, 2))])
    _check_grads([x], [tx], ours(x), theirs(tx))
    np.testing.assert_allclose(ours.running_var.numpy(), theirs.running_var.numpy())
    ours.eval(), theirs.eval()
    np.testing.assert_allclose(ours(x).detach().numpy(), theirs(tx).detach().numpy())
    assert repr(ours) == "BatchNorm3d(3, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)"
    with pytest.raises(ValueError, match="expected 5D input, got 4D input"):
        ours(md.zeros(2, 3, 2, 2))


def test_lazy_layers_become_the_real_layers_at_the_first_input():
    m = nn.Sequential(nn.LazyConv2d(4, 3), nn.LazyBatchNorm2d(), nn.ReLU(), nn.Flatten(), nn.LazyLinear(2))
    assert repr(m[0]) == "LazyConv2d(0, 4, kernel_size=(3, 3), stride=(1, 1))"
    assert repr(m[4]) == "LazyLinear(in_features=0, out_features=2, bias=True)"
    params = list(m.parameters())
    assert all(p.numel() == 0 for p in params)
    opt = optim.SGD(params, lr=0.1)                 # built before the first forward, as in PyTorch
    y = m(md.randn(2, 3, 5, 5))
    assert y.shape == (2, 2)
    assert type(m[0]) is nn.Conv2d and m[0].in_channels == 3 and m[0].weight.shape == (4, 3, 3, 3)
    assert type(m[1]) is nn.BatchNorm2d and m[1].running_mean.shape == (4,)
    assert type(m[4]) is nn.Linear and m[4].in_features == 36
    assert [p is q for p, q in zip(params, m.parameters())] == [True] * 6   # the same Parameter objects
    before = m[4].weight.detach().numpy().copy()
    y.sum().backward()
    opt.step()
    assert not np.allclose(before, m[4].weight.detach().numpy())
    assert list(m.state_dict())[:2] == ["0.weight", "0.bias"]


def test_lazy_layers_match_torch_shapes_and_init_bounds():
    torch = pytest.importorskip("torch")
    ours, theirs = nn.LazyLinear(3, bias=False), torch.nn.LazyLinear(3, bias=False)
    x = rng.standard_normal((2, 8))
    ours(md.tensor(x).float()), theirs(torch.tensor(x, dtype=torch.float32))
    assert repr(ours) == repr(theirs)
    assert ours.weight.dtype == np.float32 and np.abs(ours.weight.detach().numpy()).max() <= 1 / np.sqrt(8)
    bn, tbn = nn.LazyBatchNorm1d(affine=False), torch.nn.LazyBatchNorm1d(affine=False)
    bn(md.tensor(x).float()), tbn(torch.tensor(x, dtype=torch.float32))
    assert [n for n, _ in bn.named_buffers()] == [n for n, _ in tbn.named_buffers()]
    assert list(bn.parameters()) == []
    c = nn.LazyConv1d(2, 3)
    assert c(md.zeros(4, 5)).shape == (2, 3)                # unbatched (C, L): C = input.shape[0]


@pytest.mark.parametrize("call,exc,match", [
    (lambda: F.bilinear(md.zeros(3, 2), md.zeros(3, 4), md.zeros(5, 3, 4)), RuntimeError,
     r"expected input1 \(\*, 3\) and input2 \(\*, 4\).*got input1 \[3, 2\]"),
    (lambda: F.bilinear(md.zeros(3, 2), md.zeros(4, 4), md.zeros(5, 2, 4)), RuntimeError, "batch dimensions"),
    (lambda: F.local_response_norm(md.zeros(2, 3), 2), ValueError, r"3D or higher dimensionality input \(got 2"),
    (lambda: F.embedding_bag(md.tensor([[0, 1]]), md.zeros(3, 2), md.tensor([0])), ValueError,
     "if input is 2D, then offsets has to be None"),
    (lambda: F.embedding_bag(md.tensor([0, 1]), md.zeros(3, 2)), ValueError, "offsets has to be a 1D Tensor"),
    (lambda: F.embedding_bag(md.tensor([0, 1]), md.zeros(3, 2), md.tensor([1])), ValueError,
     "offsets.0. has to be 0.*got 1"),
    (lambda: F.embedding_bag(md.tensor([0, 1]), md.zeros(3, 2), md.tensor([0, 3])), ValueError,
     r"can not be greater than input's length \(2\), but got offsets\[-1\] of 3"),
    (lambda: F.embedding_bag(md.tensor([[0, 3]]), md.zeros(3, 2)), IndexError, "num_embeddings is 3"),
    (lambda: F.embedding_bag(md.tensor([[0, 1]]), md.zeros(3, 2), per_sample_weights=md.ones(1, 2)),
     NotImplementedError, "only supported for mode='sum' .got mode='mean'"),
    (lambda: F.embedding_bag(md.tensor([[0, 1]]), md.zeros(3, 2), mode="sum", per_sample_weights=md.ones(2)),
     ValueError, r"per_sample_weights \(\[2\]\).*same shape as the input \(\[1, 2\]\)"),
    (lambda: nn.LazyBatchNorm2d()(md.zeros(2, 3)), ValueError, "at least 4 dims"),
])
def test_bad_input_raises_torch_exception_type_naming_expected_and_got(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_empty_bags_give_zeros():
    w = md.tensor(rng.standard_normal((4, 2)), requires_grad=True)
    y = F.embedding_bag(md.tensor([1, 2]), w, md.tensor([0, 0, 2]), mode="max")   # bags [], [1, 2], []
    np.testing.assert_array_equal(y.detach().numpy()[[0, 2]], 0.0)
    y.sum().backward()
    assert w.grad.numpy()[[0, 3]].sum() == 0.0


def test_a_torch_style_training_loop_runs_on_the_new_layers():
    """A small 1-D conv autoencoder written as for PyTorch (only the imports differ) learns."""
    torch = md
    md.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv1d(1, 4, 3, padding=1), torch.nn.SiLU(), torch.nn.MaxPool1d(2),
        torch.nn.ConvTranspose1d(4, 4, 2, stride=2), torch.nn.LeakyReLU(0.1), torch.nn.Dropout1d(0.1),
        torch.nn.Conv1d(4, 1, 3, padding=1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    loss_fn = torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor([2.0]))
    x = (torch.rand(8, 1, 16) > 0.5).float()
    losses = []
    for _ in range(60):
        opt.zero_grad()
        loss = loss_fn(model(x).reshape(8, 16), x.reshape(8, 16))
        loss.backward()
        torch.nn.utils.clip_grad_value_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0]
    flat = torch.nn.utils.parameters_to_vector(model.parameters())
    assert flat.shape == (sum(p.numel() for p in model.parameters()),)
