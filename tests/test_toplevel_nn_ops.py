"""PyTorch's top-level forms of nn.functional (torch.conv2d, torch.batch_norm, torch.max_pool2d,
the losses and the RNN cells): the same values and gradients as the F. functions and as torch's,
and torch's positional order."""
import inspect
import math

import numpy as np
import pytest

import minidl as md
import minidl.nn.functional as F
from minidl.autograd import gradcheck

rng = np.random.default_rng(0)


def _t(a, grad=False, dtype=md.float64):
    return md.tensor(np.asarray(a), dtype=dtype, requires_grad=grad)


def _close(a, b, **kw):
    np.testing.assert_allclose(np.asarray(a.detach().numpy() if isinstance(a, md.Tensor) else a),
                               np.asarray(b.detach().numpy() if hasattr(b, "detach") else b), **kw)


# --- the nn ops, against their nn.functional counterparts and against torch ----------------------------------
X3, X4 = rng.standard_normal((2, 3, 9)), rng.standard_normal((2, 3, 6, 6))
W1, W2 = rng.standard_normal((4, 3, 3)), rng.standard_normal((4, 3, 3, 3))
X5, W3 = rng.standard_normal((1, 2, 4, 4, 4)), rng.standard_normal((3, 2, 2, 2, 2))
B4, C3 = rng.standard_normal(4), rng.standard_normal(3)
A, P, N = (rng.standard_normal((5, 4)) for _ in range(3))
Y = np.sign(rng.standard_normal(5))
LOGP = np.log(rng.dirichlet(np.ones(4), size=(6, 2)))
THETA = rng.standard_normal((2, 2, 3)) * 0.5
GRID = rng.uniform(-1.1, 1.1, (2, 4, 4, 2))

# name -> (md/torch call given the module m, the F call, the float64 arrays that get gradients)
NN_CASES = {
    "conv1d": (lambda m, x, w, b: m.conv1d(x, w, b, 2, 1), lambda x, w, b: F.conv1d(x, w, b, 2, 1), (X3, W1, B4)),
    "conv2d": (lambda m, x, w, b: m.conv2d(x, w, b, 1, 1, 1, 1), lambda x, w, b: F.conv2d(x, w, b, 1, 1),
               (X4, W2, B4)),
    "conv3d": (lambda m, x, w: m.conv3d(x, w, None, 1, 1), lambda x, w: F.conv3d(x, w, None, 1, 1), (X5, W3)),
    "conv_transpose1d": (lambda m, x, w: m.conv_transpose1d(x, w.transpose(0, 1), None, 2, 1, 1),
                         lambda x, w: F.conv_transpose1d(x, w.transpose(0, 1), None, 2, 1, 1), (X3[:, :3], W1[:3])),
    "conv_transpose2d": (lambda m, x, w: m.conv_transpose2d(x, w, None, 2),
                         lambda x, w: F.conv_transpose2d(x, w, None, 2), (X4[:, :3, :3, :3], W2[:3])),
    "conv_transpose3d": (lambda m, x, w: m.conv_transpose3d(x, w, None, 1, 0, 0, 1, 1),
                         lambda x, w: F.conv_transpose3d(x, w, None, 1), (X5, W3.transpose(1, 0, 2, 3, 4).copy())),
    "conv_tbc": (lambda m, x, w, b: m.conv_tbc(x, w, b, 1), lambda x, w, b: F.conv_tbc(x, w, b, 1),
                 (X3.transpose(2, 0, 1).copy(), W1.transpose(2, 1, 0).copy(), B4)),
    "convolution": (lambda m, x, w, b: m.convolution(x, w, b, [1, 1], [1, 1], [1, 1], False, [0, 0], 1),
                    lambda x, w, b: F.conv2d(x, w, b, 1, 1), (X4, W2, B4)),
    "convolution_transposed": (lambda m, x, w: m.convolution(x, w, None, [2], [0], [1], True, [1], 1),
                               lambda x, w: F.conv_transpose1d(x, w, None, 2, 0, 1), (X3, W1[:3])),
    "batch_norm": (lambda m, x, w, b: m.batch_norm(x, w, b, None, None, True, 0.1, 1e-5, False),
                   lambda x, w, b: F.batch_norm(x, None, None, w, b, True, 0.1, 1e-5), (X3, C3, C3 * 2)),
    "instance_norm": (lambda m, x, w, b: m.instance_norm(x, w, b, None, None, True, 0.1, 1e-5, False),
                      lambda x, w, b: F.instance_norm(x, None, None, w, b, True, 0.1, 1e-5), (X4, C3, C3)),
    "layer_norm": (lambda m, x, w: m.layer_norm(x, [9], w, None, 1e-5), lambda x, w: F.layer_norm(x, [9], w),
                   (X3, X3[0, 0])),
    "group_norm": (lambda m, x, w, b: m.group_norm(x, 1, w, b), lambda x, w, b: F.group_norm(x, 1, w, b),
                   (X4, C3, C3)),
    "rms_norm": (lambda m, x, w: m.rms_norm(x, [6], w, 1e-6), lambda x, w: F.rms_norm(x, [6], w, 1e-6),
                 (X4, X4[0, 0, 0])),
    "celu": (lambda m, x: m.celu(x, 0.7), lambda x: F.celu(x, 0.7), (X3,)),
    "selu": (lambda m, x: m.selu(x), lambda x: F.selu(x), (X3,)),
    "embedding": (lambda m, w: m.embedding(w, m.tensor([[0, 2], [3, 2]]), 2),
                  lambda w: F.embedding(md.tensor([[0, 2], [3, 2]]), w, 2), (A,)),
    "bilinear": (lambda m, a, b, w: m.bilinear(a, b, w), lambda a, b, w: F.bilinear(a, b, w),
                 (A, P[:, :3], rng.standard_normal((2, 4, 3)))),
    "cosine_similarity": (lambda m, a, b: m.cosine_similarity(a, b, 1), lambda a, b: F.cosine_similarity(a, b),
                          (A, P)),
    "pairwise_distance": (lambda m, a, b: m.pairwise_distance(a, b, 3.0, 1e-6, True),
                          lambda a, b: F.pairwise_distance(a, b, 3.0, 1e-6, True), (A, P)),
    "pixel_shuffle": (lambda m, x: m.pixel_shuffle(x, 2), lambda x: F.pixel_shuffle(x, 2),
                      (rng.standard_normal((1, 8, 2, 2)),)),
    "pixel_unshuffle": (lambda m, x: m.pixel_unshuffle(x, 2), lambda x: F.pixel_unshuffle(x, 2), (X4,)),
    "native_channel_shuffle": (lambda m, x: m.native_channel_shuffle(x, 2), lambda x: F.channel_shuffle(x, 2),
                               (rng.standard_normal((1, 4, 2, 2)),)),
    "constant_pad_nd": (lambda m, x: m.constant_pad_nd(x, [1, -2, 2, 0], 0.5),
                        lambda x: F.pad(x, [1, -2, 2, 0], value=0.5), (X4,)),
    "max_pool1d": (lambda m, x: m.max_pool1d(x, 3), lambda x: F.max_pool1d(x, 3), (X3,)),
    "max_pool2d": (lambda m, x: m.max_pool2d(x, 3, 2, 1, 1, True), lambda x: F.max_pool2d(x, 3, 2, 1, 1, True),
                   (X4,)),
    "max_pool3d": (lambda m, x: m.max_pool3d(x, 2), lambda x: F.max_pool3d(x, 2), (X5,)),
    "max_pool1d_with_indices": (lambda m, x: m.max_pool1d_with_indices(x, 3, 2)[0],
                                lambda x: F.max_pool1d(x, 3, 2), (X3,)),
    "avg_pool1d": (lambda m, x: m.avg_pool1d(x, 3, [], 1, True, False),
                   lambda x: F.avg_pool1d(x, 3, None, 1, True, False), (X3,)),
    "adaptive_avg_pool1d": (lambda m, x: m.adaptive_avg_pool1d(x, 4), lambda x: F.adaptive_avg_pool1d(x, 4), (X3,)),
    "adaptive_max_pool1d": (lambda m, x: m.adaptive_max_pool1d(x, 4)[0], lambda x: F.adaptive_max_pool1d(x, 4),
                            (X3,)),
    "ctc_loss": (lambda m, lp: m.ctc_loss(lp, m.tensor([[1, 2], [3, 3]]), [6, 5], [2, 2], 0, 2),
                 lambda lp: F.ctc_loss(lp, md.tensor([[1, 2], [3, 3]]), [6, 5], [2, 2], reduction="sum"), (LOGP,)),
    "kl_div": (lambda m, a, b: m.kl_div(a, b, 1, log_target=True),
               lambda a, b: F.kl_div(a, b, reduction="none", log_target=True).mean(), (A, P)),
    "margin_ranking_loss": (lambda m, a, b: m.margin_ranking_loss(a, b, m.tensor(Y), 0.3, 2),
                            lambda a, b: F.margin_ranking_loss(a, b, md.tensor(Y), 0.3, reduction="sum"),
                            (A[:, 0], P[:, 0])),
    "hinge_embedding_loss": (lambda m, a: m.hinge_embedding_loss(a, m.tensor(Y)[:, None].expand(5, 4), 0.5, 0),
                             lambda a: F.hinge_embedding_loss(a, md.tensor(Y)[:, None].expand(5, 4), 0.5,
                                                              reduction="none"), (A,)),
    "triplet_margin_loss": (lambda m, a, p, n: m.triplet_margin_loss(a, p, n, 1.0, 2.0, 1e-6, True, 1),
                            lambda a, p, n: F.triplet_margin_loss(a, p, n, swap=True), (A, P, N)),
    "poisson_nll_loss": (lambda m, a, b: m.poisson_nll_loss(a, b.abs(), True, True, 1e-8, 1),
                         lambda a, b: F.poisson_nll_loss(a, b.abs(), True, True), (A, P)),
    "binary_cross_entropy_with_logits": (   # (weight and pos_weight get no gradient, in torch neither)
        lambda m, a: m.binary_cross_entropy_with_logits(a, m.tensor((Y[:, None] > 0) * np.ones((5, 4))),
                                                        m.tensor(P[0]).abs(), m.tensor(N[0]).abs(), 2),
        lambda a: F.binary_cross_entropy_with_logits(a, md.tensor((Y[:, None] > 0) * np.ones((5, 4))),
                                                     md.tensor(P[0]).abs(), reduction="sum",
                                                     pos_weight=md.tensor(N[0]).abs()), (A,)),
    "cosine_embedding_loss": (lambda m, a, b: m.cosine_embedding_loss(a, b, m.tensor(Y), 0.2, 1),
                              lambda a, b: F.cosine_embedding_loss(a, b, md.tensor(Y), 0.2), (A, P)),
    "grid_sampler": (lambda m, x, g: m.grid_sampler(x, g, 0, 1, False),
                     lambda x, g: F.grid_sample(x, g, "bilinear", "border", False), (X4[:, :2], GRID)),
    "affine_grid_generator": (lambda m, th: m.affine_grid_generator(th, [2, 3, 4, 5], False),
                              lambda th: F.affine_grid(th, [2, 3, 4, 5], False), (THETA,)),
    "rnn_tanh_cell": (lambda m, x, h, wi, wh, b: m.rnn_tanh_cell(x, h, wi, wh, b, b),
                      lambda x, h, wi, wh, b: md.tanh(x @ wi.t() + b + h @ wh.t() + b),
                      (A, P[:, :3], rng.standard_normal((3, 4)), rng.standard_normal((3, 3)), C3)),
    "rnn_relu_cell": (lambda m, x, h, wi, wh: m.rnn_relu_cell(x, h, wi, wh),
                      lambda x, h, wi, wh: md.relu(x @ wi.t() + h @ wh.t()),
                      (A, P[:, :3], rng.standard_normal((3, 4)), rng.standard_normal((3, 3)))),
}

_W_IH, _W_HH = rng.standard_normal((9, 4)), rng.standard_normal((9, 3))


def _gru_reference(x, h, wi, wh):
    gi, gh = x @ wi.t(), h @ wh.t()
    r, z = md.sigmoid(gi[:, :3] + gh[:, :3]), md.sigmoid(gi[:, 3:6] + gh[:, 3:6])
    n = md.tanh(gi[:, 6:] + r * gh[:, 6:])
    return (1 - z) * n + z * h


def _lstm_reference(x, h, c, wi, wh):
    g = x @ wi.t() + h @ wh.t()
    i, f, gg, o = md.sigmoid(g[:, :3]), md.sigmoid(g[:, 3:6]), md.tanh(g[:, 6:9]), md.sigmoid(g[:, 9:])
    c2 = f * c + i * gg
    return o * md.tanh(c2)


NN_CASES["gru_cell"] = (lambda m, x, h, wi, wh: m.gru_cell(x, h, wi, wh), _gru_reference, (A, P[:, :3], _W_IH, _W_HH))
NN_CASES["lstm_cell"] = (lambda m, x, h, c, wi, wh: m.lstm_cell(x, (h, c), wi, wh)[0], _lstm_reference,
                         (A, P[:, :3], N[:, :3], rng.standard_normal((12, 4)), rng.standard_normal((12, 3))))


@pytest.mark.parametrize("name", sorted(NN_CASES))
def test_nn_op_matches_functional_and_gradchecks(name):
    call, reference, arrays = NN_CASES[name]
    args = [_t(a, grad=True) for a in arrays]
    _close(call(md, *args), reference(*args), rtol=1e-10, atol=1e-10)
    # not gradchecked: ctc_loss's gradient assumes normalised log-probabilities (PyTorch's too), embedding's
    # padding row gets none by design; both are compared with torch's gradients below
    if name not in ("ctc_loss", "embedding"):
        assert gradcheck(lambda *a: call(md, *a), tuple(args), eps=1e-6, atol=1e-5)


@pytest.mark.parametrize("name", sorted(NN_CASES))
def test_nn_op_matches_torch(name):
    torch = pytest.importorskip("torch")
    call, _, arrays = NN_CASES[name]
    ours = [_t(a, grad=True) for a in arrays]
    theirs = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    out, ref = call(md, *ours), call(torch, *theirs)
    _close(out, ref, rtol=1e-8, atol=1e-9)
    if name == "native_channel_shuffle":   # torch has no derivative for it
        return
    g = rng.standard_normal(tuple(ref.shape))
    out.backward(md.tensor(g))
    ref.backward(torch.tensor(g))
    for a, b in zip(ours, theirs):
        _close(a.grad, b.grad, rtol=1e-7, atol=1e-8)


def test_embedding_bag_outputs_match_torch():
    torch = pytest.importorskip("torch")
    w = rng.standard_normal((6, 3))
    idx, off = [1, 2, 4, 5, 4, 3], [0, 2, 2, 5]
    for mode in (1, 2):
        for pad in (None, 4):
            ours = md.embedding_bag(_t(w), md.tensor(idx), md.tensor(off), False, mode, False, None, False, pad)
            ref = torch.embedding_bag(torch.tensor(w), torch.tensor(idx), torch.tensor(off), False, mode, False,
                                      None, False, pad)
            for a, b in zip(ours, ref):
                _close(a, b, rtol=1e-12)
    ours = md.embedding_bag(_t(w), md.tensor(idx), md.tensor(off), False, 0)   # sum: the double path's bookkeeping
    ref = torch.embedding_bag(torch.tensor(w), torch.tensor(idx), torch.tensor(off), False, 0)
    for a, b in zip(ours, ref):
        _close(a, b, rtol=1e-12)
    _close(ours[0], F.embedding_bag(md.tensor(idx), _t(w), md.tensor(off), mode="sum"))
    with pytest.raises(ValueError, match="mode"):
        md.embedding_bag(_t(w), md.tensor(idx), md.tensor(off), False, 3)


def test_dropout_forms():
    x = md.ones(200, 10, dtype=md.float64)
    y = md.dropout(x, 0.5, True)
    assert set(np.unique(y.numpy())) <= {0.0, 2.0} and 0.3 < (y.numpy() == 0).mean() < 0.7
    assert md.dropout(x, 0.5, False) is x or np.array_equal(md.dropout(x, 0.5, False).numpy(), x.numpy())
    f = md.feature_dropout(md.ones(50, 4, 3, 3), 0.5, True).numpy()
    per_map = f.reshape(50, 4, 9)
    assert (per_map.min(-1) == per_map.max(-1)).all() and set(np.unique(f)) == {0.0, 2.0}   # whole maps drop
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        md.feature_dropout(md.ones(3), 0.5, True)
    for name in ("dropout_", "feature_dropout_", "alpha_dropout_", "feature_alpha_dropout_"):
        t = md.ones(8, 4, 3)
        assert getattr(md, name)(t, 0.5, True) is t and (t.numpy() != 1).any(), name
    t = md.tensor([-1.0, 2.0])
    assert md.celu_(t, 2.0) is t
    _close(t, [2 * (math.exp(-0.5) - 1), 2.0], rtol=1e-6)
    t = md.tensor([-1.0, 2.0])
    assert md.selu_(t) is t
    _close(t, F.selu(md.tensor([-1.0, 2.0])))


def test_losses_take_an_integer_reduction():
    a, b = _t(A), _t(P)
    for r, name in enumerate(("none", "mean", "sum")):
        _close(md.margin_ranking_loss(a, b, _t(np.ones((5, 4))), 0.1, r),
               F.margin_ranking_loss(a, b, _t(np.ones((5, 4))), 0.1, reduction=name))
    with pytest.raises(TypeError, match="reduction"):
        md.kl_div(a, b, "mean")
    with pytest.raises(ValueError, match="reduction"):
        md.hinge_embedding_loss(a, b, 1.0, 3)
    with pytest.raises(ValueError, match="interpolation_mode"):
        md.grid_sampler(_t(X4), _t(GRID), 5, 0, False)


def test_cells_check_their_shapes():
    x, h, wi, wh = _t(A), _t(P[:, :3]), _t(_W_IH[:3]), _t(_W_HH[:3])
    _close(md.rnn_relu_cell(x[1], h[1], wi, wh), md.rnn_relu_cell(x, h, wi, wh)[1])   # unbatched, as nn.RNNCell
    _close(md.lstm_cell(x[1], (h[1], h[2]), _t(np.ones((12, 4))), _t(np.ones((12, 3))))[1],
           md.lstm_cell(x[1:2], (h[1:2], h[2:3]), _t(np.ones((12, 4))), _t(np.ones((12, 3))))[1][0])
    with pytest.raises(RuntimeError, match="input_size"):
        md.rnn_tanh_cell(_t(A), _t(P[:, :3]), _t(np.ones((3, 5))), _t(np.ones((3, 3))))
    with pytest.raises(RuntimeError, match="hidden0"):
        md.gru_cell(_t(A), _t(P[:4, :3]), _t(_W_IH), _t(_W_HH))
    with pytest.raises(RuntimeError, match="hx must be"):
        md.lstm_cell(_t(A), (_t(P[:, :3]),), _t(_W_IH), _t(_W_HH))
    with pytest.raises(RuntimeError, match="weight"):
        md.convolution(_t(X3), _t(np.ones(3)), None, [1], [0], [1], False, [0], 1)


def _torch_positional_names(torch, name):
    schemas = torch._C._jit_get_schemas_for_operator(f"aten::{name}")
    schema = max(schemas, key=lambda s: len(s.arguments))   # the fullest overload (embedding_bag's padding_idx)
    return [("input" if a.name == "self" else a.name) for a in schema.arguments if not a.kwarg_only]


SIGNATURE_NAMES = [n for n in NN_CASES if n not in ("convolution_transposed",)] + [
    "embedding_bag", "dropout", "feature_dropout", "scalar_tensor", "rsub", "is_signed", "fill", "frobenius_norm",
    "split_with_sizes", "empty_permuted", "segment_reduce", "view_copy", "slice_copy", "expand_copy", "get_device",
    "hann_window", "bartlett_window", "blackman_window"]


@pytest.mark.parametrize("name", SIGNATURE_NAMES)
def test_positional_order_matches_torch(name):
    torch = pytest.importorskip("torch")
    want = _torch_positional_names(torch, name)
    params = inspect.signature(getattr(md, name)).parameters.values()
    have = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if name.endswith("_copy") and name not in ("slice_copy", "expand_copy"):
        assert have == ["input"]   # the generated forms pass the rest to the view method
        return
    if name == "rsub":   # the Tensor overload: alpha is keyword-only
        want = want[:2]
    assert have == want


def test_python_level_signatures_match_torch():
    torch = pytest.importorskip("torch")
    for name in ("unravel_index", "svd_lowrank", "pca_lowrank", "typename", "is_storage", "set_warn_always",
                 "is_warn_always_enabled", "from_dlpack", "set_default_tensor_type"):
        ours = inspect.signature(getattr(md, name)).parameters
        theirs = inspect.signature(getattr(torch, name)).parameters
        assert [(p.name, p.kind) for p in ours.values()] == [(p.name, p.kind) for p in theirs.values()], name
        for p in theirs.values():
            if p.default is not inspect.Parameter.empty and p.name != "device":
                assert ours[p.name].default == p.default, (name, p.name)


