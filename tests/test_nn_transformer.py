"""nn.TransformerEncoderLayer / TransformerEncoder / TransformerDecoderLayer / TransformerDecoder /
Transformer against PyTorch: parameter names, state_dicts both ways, and for every argument
combination (batch_first, norm_first, bias, activation) with and without masks (attention masks
bool and float, key padding masks, is_causal) the same outputs and gradients. Runs PyTorch in
training mode with dropout 0, its exact path (its inference fast path writes zeros at padding)."""
import warnings

import numpy as np
import pytest

import minidl as md
import minidl.nn as nn

D, NHEAD, FF, S, L, B = 8, 2, 16, 5, 4, 3


def _torch():
    return pytest.importorskip("torch")


def _pair(name, *args, **kw):
    torch = _torch()
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # PyTorch's nested-tensor advice
        tm = _build(torch.nn, name, *args, dtype=torch.float64, **kw)
    m = _build(nn, name, *args, dtype="float64", **kw)
    m.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    tm.train()
    m.train()
    return tm, m


def _build(lib, name, *args, dtype, **kw):
    if name in ("TransformerEncoder", "TransformerDecoder"):
        layer = getattr(lib, name + "Layer")(D, NHEAD, FF, dropout=0.0, dtype=dtype, **kw)
        return getattr(lib, name)(layer, 2, norm=lib.LayerNorm(D).to(dtype))
    if name == "Transformer":
        return lib.Transformer(D, NHEAD, 2, 2, FF, dropout=0.0, dtype=dtype, **kw)
    return getattr(lib, name)(D, NHEAD, FF, dropout=0.0, dtype=dtype, **kw)


def _masks(kind, batch_first):
    """(keyword arguments for PyTorch, the same for minidl) for a mask setting."""
    torch = _torch()
    g = np.random.default_rng(5)
    causal = np.triu(np.ones((L, L), bool), 1)
    pad = np.zeros((B, S), bool)
    pad[0, -2:] = True
    pad[2, -1] = True
    if kind == "none":
        return {}, {}
    if kind == "bool-causal":
        return {"tgt_mask": torch.tensor(causal)}, {"tgt_mask": md.tensor(causal)}
    if kind == "float-causal":
        f = nn.Transformer.generate_square_subsequent_mask(L).numpy().astype(np.float64)
        return ({"tgt_mask": torch.tensor(f), "tgt_is_causal": True},
                {"tgt_mask": md.tensor(f), "tgt_is_causal": True})
    if kind == "float-random":
        f = g.standard_normal((L, L))
        return {"tgt_mask": torch.tensor(f)}, {"tgt_mask": md.tensor(f)}
    if kind == "padding":
        return ({"src_key_padding_mask": torch.tensor(pad), "memory_key_padding_mask": torch.tensor(pad)},
                {"src_key_padding_mask": md.tensor(pad), "memory_key_padding_mask": md.tensor(pad)})
    raise ValueError(kind)


def _call_kwargs(name, kw):
    """Mask keywords renamed for the module being called (the layers name them differently)."""
    renames = {
        "TransformerEncoderLayer": {"tgt_mask": "src_mask", "tgt_is_causal": "is_causal",
                                    "src_key_padding_mask": "src_key_padding_mask"},
        "TransformerEncoder": {"tgt_mask": "mask", "tgt_is_causal": "is_causal",
                               "src_key_padding_mask": "src_key_padding_mask"},
        "TransformerDecoderLayer": {"tgt_mask": "tgt_mask", "tgt_is_causal": "tgt_is_causal",
                                    "memory_key_padding_mask": "memory_key_padding_mask"},
        "TransformerDecoder": {"tgt_mask": "tgt_mask", "tgt_is_causal": "tgt_is_causal",
                               "memory_key_padding_mask": "memory_key_padding_mask"},
        "Transformer": {"tgt_mask": "tgt_mask", "tgt_is_causal": "tgt_is_causal",
                        "src_key_padding_mask": "src_key_padding_mask",
                        "memory_key_padding_mask": "memory_key_padding_mask"},
    }[name]
    return {renames[k]: v for k, v in kw.items() if k in renames}


def _inputs(name, batch_first):
    g = np.random.default_rng(0)
    src = g.standard_normal((B, S, D) if batch_first else (S, B, D))
    tgt = g.standard_normal((B, L, D) if batch_first else (L, B, D))
    if name.startswith("TransformerEncoder"):
        return [src]
    if name.startswith("TransformerDecoder"):
        return [tgt, src]
    return [src, tgt]


def _same_run(name, tm, m, batch_first, mask_kind):
    torch = _torch()
    arrays = _inputs(name, batch_first)
    if name.startswith("TransformerEncoder") and mask_kind in ("bool-causal", "float-causal", "float-random"):
        arrays = [np.random.default_rng(0).standard_normal((B, L, D) if batch_first else (L, B, D))]
    tkw, mkw = _masks(mask_kind, batch_first)
    tx = [torch.tensor(a, requires_grad=True) for a in arrays]
    mx = [md.tensor(a, requires_grad=True) for a in arrays]
    ty = tm(*tx, **_call_kwargs(name, tkw))
    my = m(*mx, **_call_kwargs(name, mkw))
    np.testing.assert_allclose(my.detach().numpy(), ty.detach().numpy(), atol=1e-10, rtol=1e-10)
    w = np.random.default_rng(1).standard_normal(tuple(ty.shape))
    (ty * torch.tensor(w)).sum().backward()
    (my * md.tensor(w)).sum().backward()
    for k, (a, b) in enumerate(zip(mx, tx)):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), atol=1e-10, rtol=1e-8, err_msg=f"input {k}")
    ours = dict(m.named_parameters())
    for pname, p in tm.named_parameters():
        np.testing.assert_allclose(ours[pname].grad.numpy(), p.grad.numpy(), atol=1e-10, rtol=1e-8, err_msg=pname)


NAMES = ["TransformerEncoderLayer", "TransformerEncoder", "TransformerDecoderLayer", "TransformerDecoder",
         "Transformer"]
ARGS = [dict(batch_first=bf, norm_first=nf, bias=bias, activation=act)
        for bf in (False, True) for nf in (False, True) for bias in (True, False) for act in ("relu", "gelu")]


@pytest.mark.parametrize("args", ARGS, ids=lambda a: "-".join(f"{k}={v}" for k, v in a.items()))
@pytest.mark.parametrize("name", NAMES)
def test_every_argument_combination_matches_pytorch(name, args):
    tm, m = _pair(name, **args)
    _same_run(name, tm, m, args["batch_first"], "none")


@pytest.mark.parametrize("mask_kind", ["bool-causal", "float-causal", "float-random", "padding"])
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("name", NAMES)
def test_masks_match_pytorch(name, norm_first, mask_kind):
    tm, m = _pair(name, batch_first=True, norm_first=norm_first)
    _same_run(name, tm, m, True, mask_kind)


@pytest.mark.parametrize("name", NAMES)
def test_parameter_names_are_pytorchs_and_state_dicts_travel_both_ways(name):
    torch = _torch()
    tm, m = _pair(name, norm_first=True)
    assert [(n, tuple(p.shape)) for n, p in m.named_parameters()] == \
           [(n, tuple(p.shape)) for n, p in tm.named_parameters()]
    fresh = _build(nn, name, dtype="float64", norm_first=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        back = _build(torch.nn, name, dtype=torch.float64, norm_first=True)
    back.load_state_dict({k: torch.tensor(v.numpy()) for k, v in m.state_dict().items()})   # minidl -> PyTorch
    fresh.load_state_dict({k: v.detach().numpy() for k, v in back.state_dict().items()})    # and back
    back.train()
    fresh.train()
    _same_run(name, back, fresh, False, "none")


def test_transformer_initialises_every_matrix_xavier_uniform():
    md.manual_seed(0)
    m = nn.Transformer(16, 2, 1, 1, 32)
    w = m.encoder.layers[0].linear1.weight.detach().numpy()
    bound = np.sqrt(6 / (16 + 32))
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound


def test_square_subsequent_mask_is_pytorchs():
    torch = _torch()
    np.testing.assert_array_equal(nn.Transformer.generate_square_subsequent_mask(4).numpy(),
                                  torch.nn.Transformer.generate_square_subsequent_mask(4).numpy())
    m = nn.Transformer.generate_square_subsequent_mask(3).numpy()
    assert m.dtype == np.float32 and m[0, 1] == -np.inf and m[1, 0] == 0 and m[2, 2] == 0


def test_is_causal_alone_masks_the_future():
    md.manual_seed(0)
    layer = nn.TransformerEncoderLayer(D, NHEAD, FF, dropout=0.0, batch_first=True)
    x = md.randn(1, L, D)
    y = layer(x, is_causal=True).detach().numpy()
    x2 = x.numpy().copy()
    x2[0, -1] += 10.0                                   # changing the last position changes only itself
    y2 = layer(md.tensor(x2), is_causal=True).detach().numpy()
    np.testing.assert_allclose(y[0, :-1], y2[0, :-1], atol=1e-6)
    assert np.abs(y[0, -1] - y2[0, -1]).max() > 1e-3


def test_bad_input_gets_pytorchs_exceptions_and_messages():
    with pytest.raises(AssertionError, match=r"embed_dim must be divisible by num_heads \(d_model=10, nhead=3\)"):
        nn.TransformerEncoderLayer(10, 3)
    with pytest.raises(AssertionError, match="embed_dim must be divisible by num_heads"):
        nn.Transformer(10, 3)
    layer = nn.TransformerEncoderLayer(8, 2)
    with pytest.raises(AssertionError, match="^was expecting embedding dimension of 8, but got 7$"):
        layer(md.randn(3, 2, 7))
    with pytest.raises(AssertionError, match="query should be unbatched 2D or batched 3D tensor but received 4-D"):
        layer(md.randn(1, 3, 2, 8))
    with pytest.raises(RuntimeError, match="activation should be relu/gelu, not tanh"):
        nn.TransformerEncoderLayer(8, 2, activation="tanh")
    t = nn.Transformer(8, 2, 1, 1, 16)
    with pytest.raises(RuntimeError, match="the batch number of src and tgt must be equal"):
        t(md.randn(3, 2, 8), md.randn(3, 4, 8))


def test_feature_size_message_equals_pytorchs_own():
    torch = _torch()
    with pytest.raises(AssertionError) as theirs:
        torch.nn.TransformerEncoderLayer(8, 2)(torch.randn(3, 2, 7))
    with pytest.raises(AssertionError) as ours:
        nn.TransformerEncoderLayer(8, 2)(md.randn(3, 2, 7))
    assert str(ours.value) == str(theirs.value)
