"""Zero-size inputs: empty in, empty out (zero gradients, untouched buffers) wherever PyTorch
returns an answer, PyTorch's error type where it raises, and never a kernel loop over rows that
do not exist. The kernel tests write into views of larger arrays, so that a stray write to "row
-1" lands in memory the test can see (with NUMBA_DISABLE_JIT=1 it is an IndexError instead)."""
import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
from minidl.kernels.cpu import batch_norm as bn_kernel
from minidl.kernels.cpu import group_norm as gn_kernel
from minidl.kernels.cpu import im2col as im2col_kernel
from minidl.kernels.cpu import pooling as pool_kernel
from minidl.kernels.cpu import softmax as softmax_kernel
from minidl.kernels.cpu._threads import num_chunks
from minidl.kernels.cpu.layer_norm import layer_norm_backward, layer_norm_forward
from minidl.kernels.cpu.rms_norm import rms_norm_backward, rms_norm_forward
from minidl.kernels.cpu.scale_norm import scale_norm_backward, scale_norm_forward
from minidl.ops import attention as A



def leaf(*shape, dtype=md.float32):
    return md.randn(*shape, dtype=dtype, requires_grad=True)


def backward_sum(module, x):
    """module(x).sum().backward(); returns the output."""
    y = module(x)
    y.sum().backward()
    return y


def zeros_of(t):
    return np.zeros(t.shape, np.float32)


# the row kernels themselves ----------------------------------------------------------------------

def canvas_views():
    """(x, out, canvas): (0, 4) arrays starting at row 1 of (3, 4) arrays; canvas is out's parent.
    (Built on the buffer with an offset: NumPy points an empty slice such as a[1:1] at a's start.)"""
    src = np.ones((3, 4), np.float32)
    canvas = np.full((3, 4), 7.0, np.float32)
    row1 = dict(shape=(0, 4), dtype=np.float32, offset=canvas.strides[0])
    return np.ndarray(buffer=src, **row1), np.ndarray(buffer=canvas, **row1), canvas


def test_no_rows_means_no_chunks():
    assert num_chunks(0) == 0 and num_chunks(0, 0) == 0
    assert num_chunks(1, 4) == 1


@pytest.mark.parametrize("forward", [
    lambda x, out: layer_norm_forward(x, None, None, 1e-5, out=out),
    lambda x, out: rms_norm_forward(x, None, 1e-5, out=out),
    lambda x, out: scale_norm_forward(x, 1.0, 1e-5, out=out),
], ids=["layer_norm", "rms_norm", "scale_norm"])
def test_row_norm_forward_of_no_rows_writes_nothing(forward):
    x, out, canvas = canvas_views()
    y, *stats = forward(x, out)
    assert y.shape == (0, 4)
    assert all(s.shape == (0,) for s in stats)
    assert (canvas == 7.0).all(), "the kernel wrote outside its empty output"


def test_layer_norm_kernel_chunk_without_rows_writes_nothing():
    # the kernel itself, past the wrapper's guard: its pipelined loop writes row i - 1 while
    # reading row i, and a chunk without rows has no row i - 1
    from minidl.kernels.cpu.layer_norm import _forward
    x, y, canvas = canvas_views()
    _forward(x, np.ones(4, np.float32), np.zeros(4, np.float32), 1e-5, y, np.empty(0), np.empty(0), 1, False)
    assert (canvas == 7.0).all(), "the kernel wrote outside its empty output"


def test_row_norm_backward_of_no_rows_gives_zero_parameter_grads():
    x, dx_out, canvas = canvas_views()
    mean, rstd = np.empty(0), np.empty(0)
    dx, dw, db = layer_norm_backward(x, x, mean, rstd, None, dx_out=dx_out)
    assert dx.shape == (0, 4) and (canvas == 7.0).all()
    np.testing.assert_array_equal(dw, np.zeros(4))
    np.testing.assert_array_equal(db, np.zeros(4))
    dx, dw = rms_norm_backward(x, x, rstd, None, dx_out=dx_out)
    np.testing.assert_array_equal(dw, np.zeros(4))
    dx, dg = scale_norm_backward(x, x, rstd, 1.0, 1e-5, dx_out=dx_out)
    assert dg == 0.0 and (canvas == 7.0).all()


def test_row_norm_kernels_of_rows_without_features():
    x = np.ones((3, 0), np.float32)
    y, mean, rstd = layer_norm_forward(x, None, None, 1e-5)
    assert y.shape == (3, 0) and np.isnan(mean).all() and np.isnan(rstd).all()
    dx, dw, db = layer_norm_backward(x, x, mean, rstd, None)
    assert dx.shape == (3, 0) and dw.shape == (0,) and db.shape == (0,)


@pytest.mark.parametrize("shape", [(0, 4, 3), (2, 4, 0), (0, 4)])
def test_channel_norm_kernels_of_empty_inputs(shape):
    x = np.ones(shape, np.float32)
    y, mean, rstd = bn_kernel.batch_norm_forward(x)
    assert y.shape == shape and mean.shape == rstd.shape == (4,)
    dx, dw, db = bn_kernel.batch_norm_backward(x, x, mean, rstd)
    assert dx.shape == shape
    np.testing.assert_array_equal(dw, np.zeros(4))
    np.testing.assert_array_equal(db, np.zeros(4))
    assert bn_kernel.batch_norm_apply(x, np.zeros(4), np.ones(4)).shape == shape
    if len(shape) == 3:
        y, mean, rstd = gn_kernel.group_norm_forward(x, 2)
        assert y.shape == shape and mean.shape == (shape[0], 2)
        dx, dw, db = gn_kernel.group_norm_backward(x, x, mean, rstd, None, 2)
        assert dx.shape == shape
        np.testing.assert_array_equal(dw, np.zeros(4))


@pytest.mark.parametrize("shape", [(4, 0), (0, 4), (2, 0, 3)])
def test_softmax_kernels_of_empty_rows(shape):
    s = np.ones(shape, np.float32)
    assert softmax_kernel.softmax_rows_(s, causal=True, scale=0.5).shape == shape
    assert softmax_kernel.softmax_backward_(s.copy(), s, 0.5).shape == shape
    with pytest.raises(ValueError, match="scale must be > 0"):
        softmax_kernel.softmax_rows_(s, scale=0.0)


def test_layer_kernels_of_empty_batches():
    cols = im2col_kernel.im2col(np.ones((0, 3, 4, 4), np.float32), 3, 3, 1, 1, 1, 1, 1, 1, 4, 4)
    assert cols.shape == (0, 4, 4, 27)
    padded = im2col_kernel.im2col(np.ones((2, 0, 1, 1), np.float32), 1, 1, 1, 1, 1, 1, 1, 1, 3, 3)
    assert padded.shape == (2, 3, 3, 0)
    dx = im2col_kernel.col2im(np.ones((0, 4, 4, 27), np.float32), 0, 3, 4, 4, 3, 3, 1, 1, 1, 1, 1, 1)
    assert dx.shape == (0, 3, 4, 4)
    out, idx = pool_kernel.max_pool2d_forward(np.ones((0, 3, 4, 4), np.float32), 2, 2, 2, 2, 0, 0, 1, 1, 2, 2)
    assert out.shape == idx.shape == (0, 3, 2, 2)
    assert pool_kernel.max_pool2d_backward(out, idx, 4, 4).shape == (0, 3, 4, 4)
    assert pool_kernel.avg_pool2d_forward(np.ones((0, 3, 4, 4), np.float32), 2, 2, 2, 2, 0, 0, 2, 2, True, 0).shape \
        == (0, 3, 2, 2)


# norms through the modules, on both implementations --------------------------------------------

@pytest.mark.parametrize("make, shape", [
    (lambda: nn.LayerNorm(4), (0, 4)),
    (lambda: nn.LayerNorm(3), (2, 0, 3)),
    (lambda: nn.LayerNorm(0), (4, 0)),
    (lambda: nn.RMSNorm(4), (0, 4)),
    (lambda: nn.RMSNorm(0), (4, 0)),
    (lambda: nn.ScaleNorm(4), (0, 4)),
    (lambda: nn.GroupNorm(2, 4), (0, 4, 3, 3)),
    (lambda: nn.GroupNorm(2, 4), (2, 4, 0)),
    (lambda: nn.InstanceNorm2d(4, affine=True), (0, 4, 3, 3)),
    (lambda: nn.InstanceNorm1d(4, affine=True), (2, 4, 0)),
], ids=["ln-no-rows", "ln-no-rows-3d", "ln-no-features", "rms-no-rows", "rms-no-features", "scale-no-rows",
        "gn-no-samples", "gn-no-positions", "in-no-samples", "in-no-positions"])
def test_norms_of_empty_inputs_give_empty_outputs_and_zero_parameter_grads(impl, make, shape):
    m = make()
    x = leaf(*shape)
    y = backward_sum(m, x)
    assert y.shape == shape and x.grad.shape == shape
    for p in m.parameters():
        np.testing.assert_array_equal(p.grad.numpy(), zeros_of(p))


@pytest.mark.parametrize("make, shape", [
    (lambda: nn.BatchNorm1d(4), (0, 4)),
    (lambda: nn.BatchNorm1d(4), (0, 4, 5)),
    (lambda: nn.BatchNorm1d(4), (2, 4, 0)),
    (lambda: nn.BatchNorm2d(4), (0, 4, 3, 3)),
    (lambda: nn.BatchNorm2d(8), (0, 8, 16, 16)),
    (lambda: nn.BatchNorm2d(4), (2, 4, 0, 3)),
    (lambda: nn.InstanceNorm2d(4, affine=True, track_running_stats=True), (0, 4, 3, 3)),
    (lambda: nn.InstanceNorm1d(4, track_running_stats=True), (2, 4, 0)),
])
def test_training_on_an_empty_batch_leaves_the_running_statistics_alone(impl, make, shape):
    m = make()
    m.running_mean.data[...] = [0.5] * m.num_features
    m.running_var.data[...] = [2.0] * m.num_features
    x = leaf(*shape)
    y = backward_sum(m, x)
    assert y.shape == shape and x.grad.shape == shape
    np.testing.assert_array_equal(m.running_mean.numpy(), np.full(m.num_features, 0.5, np.float32))
    np.testing.assert_array_equal(m.running_var.numpy(), np.full(m.num_features, 2.0, np.float32))
    counted = isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d))     # as PyTorch: InstanceNorm never counts
    assert int(m.num_batches_tracked.item()) == int(counted)
    for p in m.parameters():
        np.testing.assert_array_equal(p.grad.numpy(), zeros_of(p))
    m.eval()
    assert m(md.randn(*shape)).shape == shape


@pytest.mark.parametrize("shape", [(0, 4, 5), (2, 4, 0)])
def test_masked_batch_norm_on_an_empty_batch(impl, shape):
    m = nn.BatchNorm1d(4)
    x = leaf(*shape)
    y = m(x, mask=np.zeros((shape[0], shape[2]), bool))
    y.sum().backward()
    assert y.shape == shape and x.grad.shape == shape
    np.testing.assert_array_equal(m.running_mean.numpy(), np.zeros(4, np.float32))
    np.testing.assert_array_equal(m.running_var.numpy(), np.ones(4, np.float32))
    np.testing.assert_array_equal(m.weight.grad.numpy(), np.zeros(4, np.float32))
    with pytest.raises(ValueError, match="more than 1 value per channel"):    # one real token is still too few
        m(md.randn(2, 4, 3), mask=np.array([[True, False, False], [False, False, False]]))


def test_functional_batch_norm_on_an_empty_batch(impl):
    assert F.batch_norm(md.randn(0, 4), None, None, training=True).shape == (0, 4)
    rm, rv = md.zeros(4), md.ones(4)
    F.batch_norm(md.randn(0, 4, 2), rm, rv, training=True)
    np.testing.assert_array_equal(rv.numpy(), np.ones(4, np.float32))


# softmax and attention ---------------------------------------------------------------------------

@pytest.mark.parametrize("shape, dim", [((0, 4), -1), ((4, 0), -1), ((4, 0), 0), ((2, 0, 3), 1)])
@pytest.mark.parametrize("fn", [F.softmax, F.log_softmax], ids=["softmax", "log_softmax"])
def test_softmax_over_empty_tensors(fn, shape, dim):
    x = leaf(*shape)
    y = fn(x, dim)
    y.sum().backward()
    assert y.shape == shape and x.grad.shape == shape


@pytest.fixture(params=["reference", "numba", "fused-softmax"])
def attention_impl(request):
    with A.implementation(request.param):
        yield request.param


@pytest.mark.parametrize("L, S, causal", [(0, 3, False), (3, 0, False), (3, 0, True), (0, 0, True)])
def test_attention_without_queries_or_keys(attention_impl, L, S, causal):
    q, k, v = leaf(2, 2, L, 4), leaf(2, 2, S, 4), leaf(2, 2, S, 5)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    out.sum().backward()
    assert out.shape == (2, 2, L, 5)
    np.testing.assert_array_equal(out.detach().numpy(), np.zeros((2, 2, L, 5), np.float32))   # no key: output 0
    for t in (q, k, v):
        np.testing.assert_array_equal(t.grad.numpy(), zeros_of(t))


def test_attention_with_an_empty_batch_and_a_float_mask(attention_impl):
    q, k, v = leaf(0, 2, 3, 4), leaf(0, 2, 3, 4), leaf(0, 2, 3, 4)
    mask = leaf(3, 3)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    out.sum().backward()
    assert out.shape == (0, 2, 3, 4)
    np.testing.assert_array_equal(mask.grad.numpy(), np.zeros((3, 3), np.float32))


def test_attention_with_no_features_attends_uniformly(attention_impl):
    # every score is an empty sum, 0 (not 0 * 1/sqrt(0) = NaN): the output is the mean of v
    q, k, v = leaf(2, 3, 0), leaf(2, 3, 0), leaf(2, 3, 4)
    out = F.scaled_dot_product_attention(q, k, v)
    mean_v = v.detach().numpy().mean(axis=1, keepdims=True)
    np.testing.assert_allclose(out.detach().numpy(), np.broadcast_to(mean_v, (2, 3, 4)),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape", [(0, 3, 4), (2, 0, 4)])
def test_multihead_attention_of_empty_inputs(shape):
    mha = nn.MultiheadAttention(4, 2, batch_first=True)
    x = leaf(*shape)
    out = mha(x, x, x)[0]
    out.sum().backward()
    assert out.shape == shape and x.grad.shape == shape


# conv, pooling, linear, embedding, gelu ----------------------------------------------------------

def test_conv2d_of_an_empty_batch(impl):
    conv = nn.Conv2d(3, 4, 3, padding=1)
    x = leaf(0, 3, 5, 5)
    y = backward_sum(conv, x)
    assert y.shape == (0, 4, 5, 5) and x.grad.shape == (0, 3, 5, 5)
    np.testing.assert_array_equal(conv.weight.grad.numpy(), zeros_of(conv.weight))
    np.testing.assert_array_equal(conv.bias.grad.numpy(), zeros_of(conv.bias))


def test_conv2d_without_input_channels_is_its_bias(impl):
    with pytest.warns(UserWarning, match="zero-element"):
        conv = nn.Conv2d(0, 4, 3)
    conv.bias.data[...] = [1, 2, 3, 4]
    x = leaf(2, 0, 5, 5)
    y = backward_sum(conv, x)
    np.testing.assert_array_equal(y.detach().numpy(), np.broadcast_to(np.array([1, 2, 3, 4], np.float32)[:, None, None],
                                                             (2, 4, 3, 3)))
    np.testing.assert_array_equal(conv.bias.grad.numpy(), np.full(4, 2 * 3 * 3, np.float32))
    assert conv.weight.grad.shape == (4, 0, 3, 3) and x.grad.shape == (2, 0, 5, 5)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(kernel_size=0), RuntimeError, "kernel_size must be positive"),
    (dict(kernel_size=-1), RuntimeError, "kernel_size must be positive"),
    (dict(kernel_size=(3, 0)), RuntimeError, "kernel_size must be positive"),
    (dict(kernel_size=3, groups=0), ValueError, "groups must be a positive integer"),
    (dict(kernel_size=3, groups=2), ValueError, "divisible by groups"),
    (dict(in_channels=-1, kernel_size=3), RuntimeError, "in_channels=-1"),
])
def test_conv2d_constructor_rejects_degenerate_sizes(kwargs, error, match):
    args = dict(in_channels=3, out_channels=4) | kwargs
    with pytest.raises(error, match=match):
        nn.Conv2d(**args)


def test_conv2d_rejects_empty_kernels_and_no_output_channels():
    x = md.randn(1, 3, 5, 5)
    with pytest.raises(RuntimeError, match=r"weight of shape \[4, 3, 0, 3\]"):
        F.conv2d(x, md.randn(4, 3, 0, 3))
    with pytest.raises(RuntimeError, match="at least one output channel"):
        F.conv2d(x, md.randn(0, 3, 3, 3))
    with pytest.raises(ValueError, match="stride and dilation must be >= 1"):
        F.conv2d(x, md.randn(4, 3, 3, 3), stride=0)
    with pytest.raises(ValueError, match="padding must be >= 0"):
        F.conv2d(x, md.randn(4, 3, 3, 3), padding=-1)


@pytest.mark.parametrize("make", [lambda: nn.MaxPool2d(2), lambda: nn.AvgPool2d(2), lambda: nn.AdaptiveAvgPool2d(1)],
                         ids=["max", "avg", "adaptive"])
def test_pooling_of_an_empty_batch(impl, make):
    x = leaf(0, 3, 4, 4)
    y = backward_sum(make(), x)
    assert y.shape[:2] == (0, 3) and x.grad.shape == (0, 3, 4, 4)


@pytest.mark.parametrize("shape", [(2, 0, 4, 4), (2, 3, 0, 4), (0, 4, 4)])
@pytest.mark.parametrize("pool", [F.max_pool2d, F.avg_pool2d], ids=["max", "avg"])
def test_pooling_needs_channels_and_positions(pool, shape):
    with pytest.raises(RuntimeError, match="only the batch dim may be 0"):
        pool(md.randn(*shape), 2)


def test_adaptive_pooling_of_no_positions():
    assert np.isnan(F.adaptive_avg_pool2d(md.randn(2, 3, 0, 4), 1).numpy()).all()   # the mean of nothing
    with pytest.raises(RuntimeError, match="non-zero height and width"):
        F.adaptive_avg_pool2d(md.randn(2, 3, 0, 4), 2)
    assert F.adaptive_avg_pool2d(md.randn(2, 0, 4, 4), 2).shape == (2, 0, 2, 2)


def test_linear_without_input_features_is_its_bias():
    with pytest.warns(UserWarning, match="zero-element"):
        lin = nn.Linear(0, 3)
    np.testing.assert_array_equal(lin.bias.detach().numpy(), np.zeros(3, np.float32))   # U(-0, 0), as PyTorch
    x = leaf(2, 0)
    y = backward_sum(lin, x)
    np.testing.assert_array_equal(y.detach().numpy(), np.zeros((2, 3), np.float32))
    assert lin.weight.grad.shape == (3, 0) and x.grad.shape == (2, 0)
    np.testing.assert_array_equal(lin.bias.grad.numpy(), np.full(3, 2.0, np.float32))


def test_linear_without_outputs_and_of_an_empty_batch():
    with pytest.warns(UserWarning, match="zero-element"):
        lin = nn.Linear(3, 0)
    x = leaf(2, 3)
    assert backward_sum(lin, x).shape == (2, 0)
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((2, 3), np.float32))
    lin = nn.Linear(3, 2)
    x = leaf(4, 0, 3)
    assert backward_sum(lin, x).shape == (4, 0, 2)
    np.testing.assert_array_equal(lin.weight.grad.numpy(), np.zeros((2, 3), np.float32))
    with pytest.raises(RuntimeError, match="in_features=-1"):
        nn.Linear(-1, 3)


def test_embedding_of_no_indices_and_of_no_features(impl):
    emb = nn.Embedding(5, 3)
    for shape in [(0,), (2, 0)]:
        emb.zero_grad()
        y = backward_sum(emb, md.zeros(*shape, dtype=md.int64))
        assert y.shape == shape + (3,)
        np.testing.assert_array_equal(emb.weight.grad.numpy(), np.zeros((5, 3), np.float32))
    thin = nn.Embedding(5, 0)
    assert backward_sum(thin, md.tensor([1, 4])).shape == (2, 0) and thin.weight.grad.shape == (5, 0)
    assert nn.Embedding(0, 3)(md.zeros(0, dtype=md.int64)).shape == (0, 3)
    with pytest.raises(RuntimeError, match="num_embeddings=-1"):
        nn.Embedding(-1, 3)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", [md.float32, md.float64])
def test_gelu_of_empty_tensors(impl, approximate, dtype):
    x = leaf(0, 3, dtype=dtype)
    y = F.gelu(x, approximate=approximate)
    y.sum().backward()
    assert y.shape == (0, 3) and x.grad.shape == (0, 3)


# losses, reductions, factories, optimizers ----------------------------------------------------

def test_cross_entropy_of_an_empty_batch():
    target = md.zeros(0, dtype=md.int64)
    x = leaf(0, 5)
    loss = F.cross_entropy(x, target)      # mean over no samples: NaN, as PyTorch
    loss.backward()
    assert np.isnan(loss.item()) and x.grad.shape == (0, 5)
    assert F.cross_entropy(md.randn(0, 5), target, reduction="sum").item() == 0.0
    assert F.cross_entropy(md.randn(0, 5), target, reduction="none").shape == (0,)


def test_max_of_an_empty_tensor_needs_a_dim_of_non_zero_length():
    x = leaf(0, 3)
    y = x.max(dim=1).values
    y.sum().backward()
    assert y.shape == (0,) and x.grad.shape == (0, 3)
    with pytest.raises(IndexError, match="reduction dim 0 to have non-zero size"):
        x.max(dim=0)
    with pytest.raises(RuntimeError, match="non-empty tensor"):
        x.max()


@pytest.mark.parametrize("make, match", [
    (lambda: md.arange(0, 5, 0), "step must be nonzero"),
    (lambda: md.arange(0.0, 1.0, 0.0), "step must be nonzero"),
    (lambda: md.arange(0, 5, -1), "inconsistent with step sign"),
    (lambda: md.linspace(0, 1, -1), "steps must be non-negative"),
    (lambda: md.randn(-1, 3), r"negative dimension -1: \[-1, 3\]"),
    (lambda: md.zeros(2, -2), "negative dimension"),
    (lambda: md.eye(-1), "negative dimension"),
])
def test_factories_reject_impossible_sizes(make, match):
    with pytest.raises(RuntimeError, match=match):
        make()


def test_factories_make_empty_tensors():
    assert md.arange(5, 5).shape == (0,) and md.arange(5, 0, -1).numpy().tolist() == [5, 4, 3, 2, 1]
    assert md.linspace(0, 1, 0).shape == (0,) and md.zeros(0, 3).shape == (0, 3)


@pytest.mark.parametrize("make", [
    lambda ps: md.optim.Adam(ps, lr=0.1),
    lambda ps: md.optim.AdamW(ps, lr=0.1, amsgrad=True),
    lambda ps: md.optim.SGD(ps, lr=0.1, momentum=0.9),
    lambda ps: md.optim.SGD(ps, lr=0.1),
], ids=["adam", "adamw-amsgrad", "sgd-momentum", "sgd"])
def test_optimizers_step_over_a_parameter_without_elements(make):
    empty, full = nn.Parameter(md.randn(0, 3)), nn.Parameter(md.ones(2))
    opt = make([empty, full])
    for _ in range(2):
        empty.grad, full.grad = md.zeros(0, 3), md.ones(2)
        opt.step()
    assert empty.shape == (0, 3)
    assert (full.detach().numpy() < 1).all()          # the other parameter is still updated
    assert nn.utils.clip_grad_norm_([empty], 1.0).item() == 0.0


# a GPT on an empty batch ---------------------------------------------------------------------------

def small_gpt():
    from minidl.zoo.gpt import GPT
    md.manual_seed(0)
    return GPT(vocab_size=11, block_size=8, n_layer=1, n_head=2, d_model=8)


def test_gpt_forward_and_backward_on_an_empty_batch():
    gpt = small_gpt()
    idx = md.zeros(0, 5, dtype=md.int64)
    logits, loss = gpt(idx, idx)
    assert logits.shape == (0, 5, 11) and np.isnan(loss.item())
    loss.backward()
    for p in gpt.parameters():
        assert p.grad is None or np.isfinite(p.grad.numpy()).all()


@pytest.mark.parametrize("shape", [(1, 0), (0,)])
def test_gpt_generate_needs_a_prompt(shape):
    with pytest.raises(ValueError, match="at least one token"):
        small_gpt().generate(md.zeros(*shape, dtype=md.int64), 3)


def test_gpt_generate_for_an_empty_batch():
    assert small_gpt().generate(md.zeros(0, 3, dtype=md.int64), 2).shape == (0, 5)


# the cuda device (simulator in CI) -----------------------------------------------------------------

@pytest.fixture
def cuda():
    from minidl import backends
    try:
        backends.get("cuda")
    except RuntimeError as exc:   # pragma: no cover
        pytest.skip(f"cuda device unavailable: {exc}")
    return "cuda"


@pytest.mark.parametrize("make, shape", [
    (lambda: nn.LayerNorm(4), (0, 4)),
    (lambda: nn.ScaleNorm(0), (4, 0)),
    (lambda: nn.GroupNorm(2, 4), (0, 4, 3)),
    (lambda: nn.InstanceNorm1d(4, affine=True, track_running_stats=True), (0, 4, 3)),
    (lambda: nn.BatchNorm1d(4), (0, 4, 5)),
    (lambda: nn.MaxPool2d(2), (0, 3, 4, 4)),
])
def test_empty_inputs_on_the_device(cuda, make, shape):
    m = make().to(cuda)
    x = md.randn(*shape, device=cuda, requires_grad=True)
    y = backward_sum(m, x)
    assert y.shape[:2] == shape[:2] and x.grad.shape == shape
    for p in m.parameters():
        np.testing.assert_array_equal(p.grad.cpu().numpy(), zeros_of(p))
    if getattr(m, "running_var", None) is not None:
        np.testing.assert_array_equal(m.running_var.cpu().numpy(), np.ones(4, np.float32))


def test_masked_batch_norm_and_attention_on_the_device(cuda):
    m = nn.BatchNorm1d(4).to(cuda)
    y = m(md.randn(0, 4, 5, device=cuda), mask=md.zeros(0, 5, dtype=md.bool, device=cuda))
    assert y.shape == (0, 4, 5)
    np.testing.assert_array_equal(m.running_mean.cpu().numpy(), np.zeros(4, np.float32))
    q, k = md.randn(2, 3, 4, device=cuda), md.randn(2, 0, 4, device=cuda)
    out = F.scaled_dot_product_attention(q, k, k)
    np.testing.assert_array_equal(out.cpu().numpy(), np.zeros((2, 3, 4), np.float32))
    assert F.softmax(md.randn(4, 0, device=cuda), -1).shape == (4, 0)


# against PyTorch -----------------------------------------------------------------------------------

def test_empty_inputs_match_pytorch():
    torch = pytest.importorskip("torch")
    tn, tf = torch.nn, torch.nn.functional

    def both(md_fn, torch_fn, *shapes):
        arrays = [np.random.default_rng(0).standard_normal(s).astype(np.float32) for s in shapes]
        ours = md_fn(*[md.tensor(a) for a in arrays])
        theirs = torch_fn(*[torch.tensor(a) for a in arrays])
        assert tuple(ours.shape) == tuple(theirs.shape)
        np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-5, atol=1e-6)

    both(lambda x: F.layer_norm(x, (4,)), lambda x: tf.layer_norm(x, (4,)), (0, 4))
    both(lambda x: F.softmax(x, -1), lambda x: tf.softmax(x, -1), (4, 0))
    both(F.scaled_dot_product_attention, tf.scaled_dot_product_attention, (2, 3, 4), (2, 0, 4), (2, 0, 4))
    both(F.scaled_dot_product_attention, tf.scaled_dot_product_attention, (2, 3, 0), (2, 3, 0), (2, 3, 4))
    both(lambda x: F.group_norm(x, 2), lambda x: tf.group_norm(x, 2), (0, 4, 3))
    both(lambda x: F.max_pool2d(x, 2), lambda x: tf.max_pool2d(x, 2), (0, 3, 4, 4))
    both(lambda x: F.cross_entropy(x, md.zeros(0, dtype=md.int64)),
         lambda x: tf.cross_entropy(x, torch.zeros(0, dtype=torch.long)), (0, 5))

    ours, theirs = nn.BatchNorm2d(4), tn.BatchNorm2d(4)
    ours(md.randn(0, 4, 3, 3)), theirs(torch.randn(0, 4, 3, 3))
    np.testing.assert_array_equal(ours.running_var.numpy(), theirs.running_var.numpy())
    assert int(ours.num_batches_tracked.item()) == int(theirs.num_batches_tracked.item())
    for make in (lambda m: m.Conv2d(3, 4, -1), lambda m: m.Linear(-1, 2)):
        with pytest.raises(RuntimeError):
            make(tn)
        with pytest.raises(RuntimeError):
            make(nn)
    for make in (lambda t: t.arange(0, 5, 0), lambda t: t.arange(0, 5, -1), lambda t: t.linspace(0, 1, -1)):
        with pytest.raises(RuntimeError):
            make(torch)
        with pytest.raises(RuntimeError):
            make(md)


@pytest.mark.parametrize("op, call, error", [
    ("argmax", lambda x: md.argmax(x), IndexError),
    ("argmin", lambda x: md.argmin(x), IndexError),
    ("max", lambda x: x.max(), RuntimeError),
    ("min", lambda x: x.min(), RuntimeError),
])
def test_argmax_max_of_empty_name_the_op(op, call, error):
    """PyTorch's error types, not NumPy's "attempt to get argmax of an empty sequence"."""
    with pytest.raises(error, match=f"{op}: expected a non-empty tensor.*shape \\[0\\]"):
        call(md.randn(0))
    with pytest.raises(IndexError, match=f"{op}: expected reduction dim 1 to have non-zero size"):
        (md.argmax if op == "argmax" else md.argmin if op == "argmin" else md.amax if op == "max" else md.amin)(
            md.randn(2, 0), 1)
    assert md.argmax(md.randn(2, 0), 0).shape == (0,)


def test_adaptive_avg_pool_of_size_zero_is_empty_as_pytorch():
    torch = pytest.importorskip("torch")
    x = md.randn(1, 2, 4, 4, requires_grad=True)
    for size in (0, (0, 2), (None, 0)):
        out = F.adaptive_avg_pool2d(x, size)
        assert tuple(out.shape) == tuple(torch.nn.functional.adaptive_avg_pool2d(torch.randn(1, 2, 4, 4), size).shape)
        assert tuple(out.shape) == tuple(F.adaptive_max_pool2d(x, size).shape)
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((1, 2, 4, 4), np.float32))
    assert F.adaptive_avg_pool1d(md.randn(1, 2, 4), 0).shape == (1, 2, 0)
    with pytest.raises(RuntimeError, match="adaptive_avg_pool2d: elements of output_size must be greater than or "
                                           "equal to 0"):
        F.adaptive_avg_pool2d(x, -1)
