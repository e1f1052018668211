"""Regressions that running the sequence-model scripts (test_port_sequence_scripts.py and
test_port_sequence_classifiers.py) turned up: each a torch-free check of minidl's behaviour, and
where torch is installed, the same call compared with it."""
import warnings

import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
from minidl.nn.utils import rnn as rnn_utils

_MISMATCH = "Support for mismatched {} and {} is deprecated. Use same type for both instead."


def _recorded(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn()
    return out, [str(w.message) for w in caught]


# MultiheadAttention: batch-first by default (minidl's API contract); batch_first=False is PyTorch's layout -------
def test_multihead_attention_is_batch_first_by_default_and_sequence_first_on_request():
    md.manual_seed(0)
    mha = nn.MultiheadAttention(4, 2)
    assert mha.batch_first is True
    x = md.randn(3, 5, 4)                                   # a batch of 3, 5 steps each
    out, w = mha(x, x, x)
    assert tuple(out.shape) == (3, 5, 4) and tuple(w.shape) == (3, 5, 5)
    mha.batch_first = False
    out_sf, w_sf = mha(x.transpose(0, 1), x.transpose(0, 1), x.transpose(0, 1))
    np.testing.assert_allclose(out_sf.transpose(0, 1).detach().numpy(), out.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w_sf.detach().numpy(), w.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_multihead_attention_sequence_first_matches_torchs_default():
    torch = pytest.importorskip("torch")
    ref = torch.nn.MultiheadAttention(4, 2)
    mha = nn.MultiheadAttention(4, 2, batch_first=False)
    mha.load_state_dict({k: md.tensor(v.detach().numpy()) for k, v in ref.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((5, 3, 4)).astype(np.float32)
    out_t, w_t = ref(*[torch.tensor(x)] * 3)
    out_m, w_m = mha(*[md.tensor(x)] * 3)
    np.testing.assert_allclose(out_m.detach().numpy(), out_t.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w_m.detach().numpy(), w_t.detach().numpy(), rtol=1e-5, atol=1e-6)


# a bool key padding mask beside a float attention mask: PyTorch's deprecation warning, once per entry point -----
def _mask_cases(lib):
    nn_ = lib.nn
    lib.manual_seed(0)
    x = lib.randn(2, 3, 8)
    causal = nn_.Transformer.generate_square_subsequent_mask(3)
    padding = lib.tensor([[False, False, True], [False, False, False]])
    float_padding = lib.zeros(2, 3).masked_fill(padding, float("-inf"))
    mha = nn_.MultiheadAttention(8, 2, batch_first=True)
    layer = nn_.TransformerEncoderLayer(8, 2, 16, 0.0, batch_first=True)
    encoder = nn_.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    decoder_layer = nn_.TransformerDecoderLayer(8, 2, 16, 0.0, batch_first=True)
    seq = x.transpose(0, 1)
    return {
        "mha": lambda: mha(x, x, x, key_padding_mask=padding, attn_mask=causal)[0],
        "mha_float_padding": lambda: mha(x, x, x, key_padding_mask=float_padding, attn_mask=causal.isinf())[0],
        "mha_same_kind": lambda: mha(x, x, x, key_padding_mask=padding, attn_mask=causal.isinf())[0],
        "mha_no_weights": lambda: mha(x, x, x, key_padding_mask=padding, attn_mask=causal, need_weights=False)[0],
        "functional": lambda: lib.nn.functional.multi_head_attention_forward(
            seq, seq, seq, 8, 2, mha.in_proj_weight, mha.in_proj_bias, None, None, False, 0.0, mha.out_proj.weight,
            mha.out_proj.bias, key_padding_mask=padding, attn_mask=causal)[0].transpose(0, 1),
        "encoder_layer": lambda: layer(x, src_mask=causal, src_key_padding_mask=padding),
        "encoder": lambda: encoder(x, mask=causal, src_key_padding_mask=padding),
        "decoder_layer": lambda: decoder_layer(x, x, tgt_mask=causal, tgt_key_padding_mask=padding,
                                               memory_mask=causal.isinf(), memory_key_padding_mask=float_padding),
    }


def test_mismatched_mask_types_warn_once_per_entry_point_and_change_nothing():
    cases = _mask_cases(md)
    expected = {"mha": ["key_padding_mask", "attn_mask"], "mha_float_padding": ["key_padding_mask", "attn_mask"],
                "mha_same_kind": None, "mha_no_weights": ["key_padding_mask", "attn_mask"],
                "functional": ["key_padding_mask", "attn_mask"], "encoder_layer": ["src_key_padding_mask", "src_mask"],
                "encoder": ["src_key_padding_mask", "mask"]}
    outputs = {}
    for name, names in expected.items():
        outputs[name], caught = _recorded(cases[name])
        assert caught == ([] if names is None else [_MISMATCH.format(*names)]), name
    _, caught = _recorded(cases["decoder_layer"])   # self-attention and cross-attention each mix the two kinds
    assert caught == [_MISMATCH.format("key_padding_mask", "attn_mask")] * 2
    # the masks mean the same in either kind: the outputs do not depend on the mix
    for name in ("mha", "mha_float_padding", "mha_no_weights", "functional"):
        np.testing.assert_allclose(outputs[name].detach().numpy(), outputs["mha_same_kind"].detach().numpy(),
                                   rtol=1e-5, atol=1e-6, err_msg=name)


def test_mismatched_mask_warnings_match_torch():
    torch = pytest.importorskip("torch")
    ours, theirs = _mask_cases(md), _mask_cases(torch)
    for name in theirs:
        assert _recorded(ours[name])[1] == _recorded(theirs[name])[1], name


def test_a_mask_of_integers_is_refused_naming_it():
    mha = nn.MultiheadAttention(4, 2, batch_first=False)
    x = md.randn(3, 2, 4)
    with pytest.raises(AssertionError, match="only bool and floating types of key_padding_mask are supported"):
        mha(x, x, x, key_padding_mask=md.zeros(2, 3, dtype=md.long))
    with pytest.raises(AssertionError, match="only bool and floating types of attn_mask are supported"):
        mha(x, x, x, attn_mask=md.zeros(3, 3, dtype=md.long))


# nn.Transformer.generate_square_subsequent_mask: the default dtype unless one is given -------------------------
def test_square_subsequent_mask_follows_the_default_dtype():
    before = md.get_default_dtype()
    md.set_default_dtype(md.float64)
    try:
        m = nn.Transformer.generate_square_subsequent_mask(3)
    finally:
        md.set_default_dtype(before)
    assert m.dtype == md.float64
    assert nn.Transformer.generate_square_subsequent_mask(3).dtype == md.float32
    assert nn.Transformer.generate_square_subsequent_mask(2, dtype=md.float16).dtype == md.float16
    upper = np.triu(np.ones((3, 3), bool), 1)
    assert np.all(np.isneginf(m.numpy()[upper])) and np.all(m.numpy()[~upper] == 0)


# EmbeddingBag.from_pretrained and max_norm ------------------------------------------------------------------
def test_embedding_bag_from_pretrained_shares_the_weights_and_freezes_them():
    w = md.tensor(np.arange(12.0, dtype=np.float32).reshape(4, 3))
    bag = nn.EmbeddingBag.from_pretrained(w, mode="sum", padding_idx=2)
    assert not bag.weight.requires_grad and bag.padding_idx == 2 and bag.mode == "sum"
    assert nn.EmbeddingBag.from_pretrained(w, freeze=False).weight.requires_grad
    np.testing.assert_array_equal(bag(md.tensor([1, 2, 3]), md.tensor([0])).numpy(), [[12.0, 14.0, 16.0]])
    with md.no_grad():
        bag.weight[0, 0] = -1.0
    assert w[0, 0].item() == -1.0          # PyTorch's _weight becomes the Parameter itself
    with pytest.raises(AssertionError, match="2-dimensional"):
        nn.EmbeddingBag.from_pretrained(md.zeros(3))


def test_embedding_bag_max_norm_renormalises_the_rows_it_reads():
    rng = np.random.default_rng(0)
    w0 = (rng.standard_normal((6, 3)) * 3).astype(np.float32)
    bag = nn.EmbeddingBag(6, 3, max_norm=1.0, mode="mean", _weight=md.tensor(w0.copy()))
    assert "max_norm=1.0" in repr(bag)
    out = bag(md.tensor([1, 4, 4]), md.tensor([0, 1]))
    w = bag.weight.detach().numpy()
    norms = np.linalg.norm(w, axis=1)
    assert np.all(norms[[1, 4]] <= 1.0 + 1e-6)
    np.testing.assert_array_equal(w[[0, 2, 3, 5]], w0[[0, 2, 3, 5]])          # rows not read stay as they were
    np.testing.assert_allclose(out.detach().numpy(), [w[1], w[4]], rtol=1e-6)
    f = F.embedding_bag(md.tensor([[0, 5]]), md.tensor(w0.copy()), max_norm=2.0, norm_type=1.0, mode="sum")
    scaled = w0[[0, 5]] * np.minimum(1.0, 2.0 / (np.abs(w0[[0, 5]]).sum(1, keepdims=True) + 1e-7))
    np.testing.assert_allclose(f.numpy(), [scaled.sum(0)], rtol=1e-5)


def test_embedding_bag_from_pretrained_and_max_norm_match_torch():
    torch = pytest.importorskip("torch")
    w0 = (np.random.default_rng(1).standard_normal((6, 3)) * 2).astype(np.float32)
    results = []
    for lib in (md, torch):
        bag = lib.nn.EmbeddingBag.from_pretrained(lib.tensor(w0.copy()), freeze=False, max_norm=1.5, mode="max",
                                                  padding_idx=0)
        out = bag(lib.tensor([0, 1, 2, 2, 5]), lib.tensor([0, 2, 4]))
        out.sum().backward()
        results.append((repr(bag), out.detach().numpy(), bag.weight.detach().numpy(), bag.weight.grad.numpy()))
    assert results[0][0] == results[1][0]
    for a, b in zip(results[0][1:], results[1][1:]):
        np.testing.assert_allclose(a, b, rtol=1e-6)


# embedding_bag's argument errors: PyTorch's RuntimeError (and the ValueError/IndexError/TypeError before) ------
_W = md.ones(8, 3)
BAG_ERRORS = [
    (lambda: F.embedding_bag(md.tensor([1, 2]), _W, md.tensor([1])), ValueError, "offsets\\[0\\] has to be 0"),
    (lambda: F.embedding_bag(md.tensor([1, 2, 3]), _W, md.tensor([0, 5])), ValueError, "can not be greater"),
    (lambda: F.embedding_bag(md.tensor([1, 2, 3]), _W, md.tensor([0, 2, 1])), ValueError, "non-decreasing"),
    (lambda: F.embedding_bag(md.tensor([1, 9]), _W, md.tensor([0])), IndexError, "index out of range"),
    (lambda: F.embedding_bag(md.tensor([1, -1]), _W, md.tensor([0])), IndexError, "index out of range"),
    (lambda: F.embedding_bag(md.tensor([1, 2]), _W, md.tensor([0.0])), TypeError, "integer offsets"),
    (lambda: F.embedding_bag(md.tensor([1.0, 2.0]), _W, md.tensor([0])), TypeError, "integer indices"),
    (lambda: F.embedding_bag(md.tensor([1, 2]), _W, md.tensor([], dtype=md.long), include_last_offset=True),
     ValueError, "at least 1"),
]


@pytest.mark.parametrize("call,also,match", BAG_ERRORS)
def test_embedding_bag_argument_errors_are_runtime_errors(call, also, match):
    with pytest.raises(RuntimeError, match=match) as info:
        call()
    assert isinstance(info.value, also)


def test_embedding_bag_argument_error_types_match_torch():
    torch = pytest.importorskip("torch")
    w = torch.ones(8, 3)
    calls = [lambda: torch.nn.functional.embedding_bag(torch.tensor([1, 2]), w, torch.tensor([1])),
             lambda: torch.nn.functional.embedding_bag(torch.tensor([1, 2, 3]), w, torch.tensor([0, 5])),
             lambda: torch.nn.functional.embedding_bag(torch.tensor([1, 2, 3]), w, torch.tensor([0, 2, 1])),
             lambda: torch.nn.functional.embedding_bag(torch.tensor([1, 9]), w, torch.tensor([0])),
             lambda: torch.nn.functional.embedding_bag(torch.tensor([1, -1]), w, torch.tensor([0])),
             lambda: torch.nn.functional.embedding_bag(torch.tensor([1, 2]), w, torch.tensor([0.0])),
             lambda: torch.nn.functional.embedding_bag(torch.tensor([1.0, 2.0]), w, torch.tensor([0])),
             lambda: torch.nn.functional.embedding_bag(torch.tensor([1, 2]), w, torch.tensor([], dtype=torch.long),
                                                       include_last_offset=True)]
    for theirs, (ours, _, _) in zip(calls, BAG_ERRORS):
        with pytest.raises(Exception) as t_info:
            theirs()
        with pytest.raises(type(t_info.value)):
            ours()


def test_embedding_bag_with_no_offsets_gives_no_bags():
    out = F.embedding_bag(md.tensor([1, 2]), md.ones(8, 3), md.tensor([], dtype=md.long))
    assert tuple(out.shape) == (0, 3)


# an RNN stack fed another dtype than its weights: PyTorch's ValueError ---------------------------------------
@pytest.mark.parametrize("module", [nn.GRU, nn.LSTM, nn.RNN])
@pytest.mark.parametrize("dtype", [md.float64, md.long])
def test_rnn_input_of_another_dtype_is_a_value_error_naming_both(module, dtype):
    with pytest.raises(ValueError, match=r"RNN input dtype \(.*(float64|int64)\) does not match weight dtype "
                                         r"\(.*float32\)") as info:
        module(3, 4)(md.ones(2, 1, 3, dtype=dtype))
    assert isinstance(info.value, RuntimeError)   # minidl's dtype mismatches are RuntimeErrors, as before


def test_rnn_input_dtype_error_type_matches_torch():
    torch = pytest.importorskip("torch")
    with pytest.raises(ValueError, match="does not match weight dtype"):
        torch.nn.GRU(3, 4)(torch.ones(2, 1, 3, dtype=torch.float64))


# the RNG state as PyTorch's ByteTensor restores the global generator; anything else is a TypeError ----------
def test_rng_state_restores_from_get_rng_state_or_a_byte_tensor():
    state, as_bytes = md.get_rng_state(), md.default_generator.get_state()
    assert as_bytes.dtype == md.uint8 and as_bytes.ndim == 1
    first = md.rand(3)
    md.set_rng_state(as_bytes)
    np.testing.assert_array_equal(md.rand(3).numpy(), first.numpy())
    md.set_rng_state(state)
    np.testing.assert_array_equal(md.rand(3).numpy(), first.numpy())


@pytest.mark.parametrize("bad", [md.zeros(37), b"\x00" * 37, [0] * 37])
def test_generator_state_of_another_type_is_a_type_error(bad):
    with pytest.raises(TypeError, match="RNG state must be a uint8 tensor"):
        md.Generator().set_state(bad)
    with pytest.raises(TypeError, match="RNG state must be a uint8 tensor"):
        md.set_rng_state(bad)
    with pytest.raises(RuntimeError, match="37 bytes"):
        md.Generator().set_state(md.zeros(3, dtype=md.uint8))


def test_generator_state_type_error_matches_torch():
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError):
        torch.Generator().set_state(torch.zeros(37))
    with pytest.raises(TypeError):
        torch.set_rng_state(torch.zeros(37))


# pack_padded_sequence takes float lengths, as PyTorch (as_tensor(lengths, dtype=int64) truncates) -------------
def test_pack_padded_sequence_takes_float_lengths():
    x = md.arange(6.0).reshape(3, 2, 1)
    packed = rnn_utils.pack_padded_sequence(x, md.tensor([3.0, 2.9]))
    np.testing.assert_array_equal(packed.batch_sizes.numpy(), [2, 2, 1])
    unsorted = rnn_utils.pack_padded_sequence(x, [1.5, 3.0], enforce_sorted=False)
    np.testing.assert_array_equal(unsorted.batch_sizes.numpy(), [2, 1, 1])
    with pytest.raises(RuntimeError, match="greater than 0"):
        rnn_utils.pack_padded_sequence(x, [0.5, 1.0], enforce_sorted=False)


def test_pack_padded_sequence_float_lengths_match_torch():
    torch = pytest.importorskip("torch")
    x = np.arange(6.0, dtype=np.float32).reshape(3, 2, 1)
    ours = rnn_utils.pack_padded_sequence(md.tensor(x), [1.5, 3.0], enforce_sorted=False)
    theirs = torch.nn.utils.rnn.pack_padded_sequence(torch.tensor(x), [1.5, 3.0], enforce_sorted=False)
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


# matmul, mm and bmm of two dtypes: PyTorch's RuntimeError, not a silent promotion ---------------------------
@pytest.mark.parametrize("op", [lambda a, b: a @ b, md.matmul, md.mm, lambda a, b: md.bmm(a[None], b[None])])
def test_matmul_of_two_dtypes_is_an_error(op):
    a, b = md.ones(2, 3), md.ones(3, 2, dtype=md.float64)
    with pytest.raises(RuntimeError, match="matmul: dtypes differ: input is float32 but other is float64"):
        op(a, b)
    with pytest.raises(RuntimeError, match="dtypes differ"):
        op(a, md.ones(3, 2, dtype=md.long))
    assert op(md.ones(2, 3, dtype=md.long), md.ones(3, 2, dtype=md.long)).dtype == md.int64
    with md.autocast("cpu", dtype=md.bfloat16):           # autocast brings both operands to one dtype
        assert op(a, md.ones(3, 2, dtype=md.bfloat16)).dtype == md.bfloat16


def test_matmul_of_two_dtypes_is_an_error_in_torch_too():
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError):
        torch.bmm(torch.ones(1, 2, 3), torch.ones(1, 3, 2, dtype=torch.float64))
