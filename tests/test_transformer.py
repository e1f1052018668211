"""Transformer zoo: block variants x norms (gradcheck), GPT (causality, learning, generation),
the padded-sequence encoder classifier, ViT, DeepNorm constants, char-level text data."""
import json
import math

import numpy as np
import pytest

import minidl as md
import minidl.nn.functional as F
from minidl.autograd import gradcheck
from minidl.data.text import CharCorpus, CharTokenizer, load_text
from minidl.zoo.encoder import TransformerEncoderClassifier
from minidl.zoo.gpt import GPT
from minidl.zoo.transformer import NORM_KINDS, NORM_POSITIONS, TransformerBlock, deepnorm_constants, make_blocks
from minidl.zoo.vit import ViT


def _x(shape, seed=0):
    return md.tensor(np.random.default_rng(seed).standard_normal(shape), requires_grad=True)


# ------------------------------------------------------------------------------- blocks
@pytest.mark.parametrize("norm", NORM_KINDS)
@pytest.mark.parametrize("position", NORM_POSITIONS)
def test_block_gradcheck_wrt_input(position, norm):
    md.manual_seed(0)
    deep = deepnorm_constants(n_encoder_layers=3)["encoder"] if position == "deepnorm" else None
    block = TransformerBlock(4, 2, d_ff=6, norm_position=position, norm=norm, deepnorm=deep).double()
    kpm = np.array([[False, False, False], [False, False, True]])
    x = _x((2, 3, 4))
    assert gradcheck(lambda t: block(t, key_padding_mask=kpm), (x,), atol=1e-6)


@pytest.mark.parametrize("position", NORM_POSITIONS)
def test_block_gradcheck_wrt_parameters_causal_rotary(position):
    md.manual_seed(1)
    deep = deepnorm_constants(n_decoder_layers=2)["decoder"] if position == "deepnorm" else None
    rope = md.nn.RotaryEmbedding(2, max_len=8)
    block = TransformerBlock(4, 2, d_ff=5, norm_position=position, norm="layer", causal=True, rotary=rope,
                             deepnorm=deep).double()
    params = [block.attn.qkv.weight, block.attn.proj.bias, block.mlp.fc1.weight, block.norm1.norm.weight]

    # gradcheck perturbs the leaves it is given: the block runs with them in place of its parameters
    leaves = [md.tensor(p.detach().numpy().copy(), requires_grad=True) for p in params]
    assert gradcheck(lambda x, *ls: _block_with(block, params, ls, x), (_x((2, 3, 4), 1), *leaves), atol=1e-6)


def _block_with(block, params, leaves, x):
    """block(x) with the given parameters replaced by ``leaves`` (so gradcheck sees them)."""
    owners = []
    for p, leaf in zip(params, leaves):
        for m in block.modules():
            for n, q in m._parameters.items():
                if q is p:
                    owners.append((m, n, p))
                    object.__setattr__(m, n, leaf)
    try:
        return block(x)
    finally:
        for m, n, p in owners:
            object.__setattr__(m, n, p)


def test_deepnorm_constants_match_the_paper():
    N, M = 6, 4
    a, b = deepnorm_constants(n_encoder_layers=N)["encoder"]
    assert math.isclose(a, (2 * N) ** 0.25) and math.isclose(b, (8 * N) ** -0.25)
    a, b = deepnorm_constants(n_decoder_layers=M)["decoder"]
    assert math.isclose(a, (2 * M) ** 0.25) and math.isclose(b, (8 * M) ** -0.25)
    c = deepnorm_constants(N, M)
    assert math.isclose(c["encoder"][0], 0.81 * (N ** 4 * M) ** (1 / 16))
    assert math.isclose(c["encoder"][1], 0.87 * (N ** 4 * M) ** (-1 / 16))
    assert math.isclose(c["decoder"][0], (3 * M) ** 0.25) and math.isclose(c["decoder"][1], (12 * M) ** -0.25)
    with pytest.raises(ValueError):
        deepnorm_constants(0, 0)


def test_deepnorm_blocks_use_alpha_and_beta_init():
    md.manual_seed(2)
    n, d = 12, 64
    blocks = make_blocks(n, d, 4, norm_position="deepnorm", causal=False)
    alpha, beta = (2 * n) ** 0.25, (8 * n) ** -0.25
    blk = blocks[0]
    assert math.isclose(blk.alpha, alpha)
    xavier = math.sqrt(2.0 / (d + d))
    w = blk.attn.qkv.weight.detach().numpy()
    for part, gain in ((w[:d], 1.0), (w[d:2 * d], 1.0), (w[2 * d:], beta), (blk.attn.proj.weight.detach().numpy(), beta)):
        assert abs(part.std() / (gain * xavier) - 1) < 0.1
    fc1 = blk.mlp.fc1.weight.detach().numpy()  # (4d, d)
    assert abs(fc1.std() / (beta * math.sqrt(2.0 / (5 * d))) - 1) < 0.1
    # the residual branch is scaled by alpha: with the sublayers zeroed, y = LN(LN(alpha x))
    x = md.randn(2, 3, d)
    for p in (blk.attn.proj.weight, blk.attn.proj.bias, blk.mlp.fc2.weight, blk.mlp.fc2.bias):
        p.data[...] = 0
    y = blk(x).detach().numpy()
    ln = lambda a: (a - a.mean(-1, keepdims=True)) / np.sqrt(a.var(-1, keepdims=True) + 1e-5)  # noqa: E731
    np.testing.assert_allclose(y, ln(ln(alpha * x.numpy())), atol=1e-4)
    dec = make_blocks(5, d, 4, norm_position="deepnorm", causal=True)
    assert math.isclose(dec[0].alpha, (2 * 5) ** 0.25)
    encdec = deepnorm_constants(6, 5)["encoder"]
    assert math.isclose(make_blocks(2, 8, 2, norm_position="deepnorm", deepnorm=encdec)[1].alpha, encdec[0])


def test_block_rejects_bad_choices():
    with pytest.raises(ValueError, match="norm_position"):
        TransformerBlock(4, 2, norm_position="sandwich")
    with pytest.raises(ValueError, match="unknown norm"):
        TransformerBlock(4, 2, norm="group")
    with pytest.raises(ValueError, match="deepnorm"):
        TransformerBlock(4, 2, norm_position="deepnorm")


# ------------------------------------------------------------------------------- GPT
def _tiny_gpt(**kw):
    md.manual_seed(3)
    cfg = dict(vocab_size=11, block_size=8, n_layer=2, n_head=2, d_model=8)
    cfg.update(kw)
    return GPT(**cfg)


@pytest.mark.parametrize("pos", ["learned", "sinusoidal", "rotary"])
@pytest.mark.parametrize("position", ["pre", "post"])
def test_gpt_is_causal(pos, position):
    model = _tiny_gpt(pos=pos, norm_position=position).double().eval()
    rng = np.random.default_rng(4)
    idx = rng.integers(0, 11, (2, 8))
    t = 4
    other = idx.copy()
    other[:, t + 1:] = rng.integers(0, 11, (2, 8 - t - 1))
    a, _ = model(idx)
    b, _ = model(other)
    np.testing.assert_allclose(a.detach().numpy()[:, :t + 1], b.detach().numpy()[:, :t + 1], atol=1e-12)
    assert not np.allclose(a.detach().numpy()[:, t + 1:], b.detach().numpy()[:, t + 1:])


def test_gpt_loss_is_cross_entropy_and_gradchecks():
    model = _tiny_gpt(n_layer=1, d_model=4, block_size=4).double()
    idx = np.array([[1, 2, 3, 4], [5, 6, 7, 8]])
    tgt = np.array([[2, 3, 4, 5], [6, 7, 8, 9]])
    logits, loss = model(idx, tgt)
    lg = logits.detach().numpy().reshape(-1, 11)
    lse = np.log(np.exp(lg - lg.max(1, keepdims=True)).sum(1)) + lg.max(1)
    assert math.isclose(loss.item(), float(np.mean(lse - lg[np.arange(8), tgt.reshape(-1)])), rel_tol=1e-10)
    emb = model.tok_emb.weight
    leaf = md.tensor(emb.detach().numpy().copy(), requires_grad=True)
    assert gradcheck(lambda w: _gpt_loss(model, emb, w, idx, tgt), (leaf,), atol=1e-6)


def _gpt_loss(model, param, leaf, idx, tgt):
    object.__setattr__(model.tok_emb, "weight", leaf)
    try:
        return model(idx, tgt)[1]
    finally:
        object.__setattr__(model.tok_emb, "weight", param)


def _adamw(params, lr):
    from minidl.optim import AdamW
    return AdamW(params, lr=lr, weight_decay=0.0)


def test_gpt_lowers_its_loss():
    text = "the quick brown fox jumps over the lazy dog. " * 40
    corpus = CharCorpus(text, val_fraction=0.1)
    model = _tiny_gpt(vocab_size=corpus.vocab_size, block_size=16, d_model=16, n_head=2, n_layer=1)
    opt = _adamw(model.parameters(), 1e-2)
    md.manual_seed(5)
    losses = []
    for _ in range(40):
        x, y = corpus.batch("train", 8, 16)
        _, loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert np.mean(losses[:3]) > math.log(corpus.vocab_size) - 0.5
    assert np.mean(losses[-5:]) < 0.6 * np.mean(losses[:3]), losses
    with md.no_grad():
        x, y = corpus.batch("val", 8, 16)
        assert model(x, y)[1].item() < 0.7 * losses[0]


def test_generation_is_reproducible_with_a_seed():
    model = _tiny_gpt()
    prompt = np.array([[1, 2, 3]])
    md.manual_seed(6)
    a = model.generate(prompt, 20, temperature=0.9, top_k=5).numpy()
    md.manual_seed(6)
    b = model.generate(prompt, 20, temperature=0.9, top_k=5).numpy()
    md.manual_seed(7)
    c = model.generate(prompt, 20, temperature=0.9, top_k=5).numpy()
    assert a.shape == (1, 23) and np.array_equal(a[:, :3], prompt)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert model.training  # generate restores the mode
    greedy = model.generate(prompt, 12, temperature=0).numpy()   # longer than block_size: crops the context
    top1 = model.generate(prompt, 12, top_k=1).numpy()
    np.testing.assert_array_equal(greedy, top1)
    assert (a >= 0).all() and (a < 11).all()


def test_generation_top_k_restricts_the_choice():
    from minidl.zoo.gpt import _sample
    rng = np.random.default_rng(0)
    logits = np.log(np.array([[0.1, 0.2, 0.3, 0.4]] * 2000))
    draws = _sample(logits, 1.0, 2, rng)
    assert set(np.unique(draws)) == {2, 3}
    assert abs((draws == 3).mean() - 4 / 7) < 0.05


def test_gpt_checkpoint_round_trip(tmp_path):
    model = _tiny_gpt(pos="rotary")
    idx = np.array([[1, 2, 3, 4]])
    path = str(tmp_path / "gpt.npz")
    md.save(model.state_dict(), path)
    other = _tiny_gpt(pos="rotary")
    for p in other.parameters():
        p.data[...] = 0
    other.load_state_dict(md.load(path))
    np.testing.assert_array_equal(model(idx)[0].detach().numpy(), other(idx)[0].detach().numpy())


# ------------------------------------------------------------------------------- encoder classifier
@pytest.mark.parametrize("pos", ["sinusoidal", "learned", "rotary"])
def test_encoder_classifier_is_padding_invariant(pos):
    md.manual_seed(8)
    model = TransformerEncoderClassifier(vocab_size=12, num_classes=3, max_len=16, d_model=8, n_head=2,
                                         n_layer=2, norm="layer", pos=pos, pad_idx=0).double().eval()
    seqs = [[3, 4, 5], [7, 8, 9, 10, 11]]
    outs = {}
    for pad in (0, 2, 6):
        T = max(len(s) for s in seqs) + pad
        idx = np.zeros((2, T), np.int64)
        for i, s in enumerate(seqs):
            idx[i, :len(s)] = s
        feats, _ = model.encode(idx)
        outs[pad] = (model(idx).detach().numpy(), [feats.detach().numpy()[i, :len(s)] for i, s in enumerate(seqs)])
    for pad in (2, 6):
        np.testing.assert_allclose(outs[pad][0], outs[0][0], atol=1e-12)
        for a, b in zip(outs[pad][1], outs[0][1]):
            np.testing.assert_allclose(a, b, atol=1e-12)


def test_encoder_classifier_learns_with_masked_batchnorm():
    md.manual_seed(9)
    rng = np.random.default_rng(9)
    # class = whether token 1 occurs in the (variable-length) sequence
    B, T = 32, 8
    lengths = rng.integers(3, T + 1, B)
    idx = np.zeros((B, T), np.int64)
    for i, n in enumerate(lengths):
        idx[i, :n] = rng.integers(2, 8, n)
    y = rng.integers(0, 2, B)
    for i in np.flatnonzero(y):
        idx[i, rng.integers(0, lengths[i])] = 1
    model = TransformerEncoderClassifier(vocab_size=8, num_classes=2, max_len=T, d_model=16, n_head=2, n_layer=1,
                                         dropout=0.0, norm="batch", norm_position="post", gelu="tanh")
    opt = _adamw(model.parameters(), 1e-2)
    losses = []
    for _ in range(30):
        loss = F.cross_entropy(model(idx), md.tensor(y))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0], losses


# ------------------------------------------------------------------------------- ViT
def test_vit_patchify_and_learning_on_digits():
    from minidl.data import digits_arrays
    images, labels = digits_arrays("train")
    images, labels = images[:64], labels[:64]
    md.manual_seed(10)
    patches = ViT(image_size=8, patch_size=2, d_model=8, n_layer=1, n_head=2).patchify(md.tensor(images[:2])).numpy()
    assert patches.shape == (2, 16, 4)
    np.testing.assert_array_equal(patches[1, 5], images[1, 0, 2:4, 2:4].reshape(-1))  # patch (row 1, col 1)
    model = ViT(image_size=8, patch_size=4, num_classes=10, d_model=16, n_layer=1, n_head=2, gelu="tanh")
    opt = _adamw(model.parameters(), 1e-2)
    x, y = md.tensor(images), md.tensor(labels)
    losses = []
    for _ in range(25):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[0] > 2.0 and losses[-1] < 0.5 * losses[0], losses   # chance is log(10) = 2.30
    with pytest.raises(ValueError, match="expected images"):
        model(md.zeros(2, 1, 6, 6))


# ------------------------------------------------------------------------------- text data
def test_char_tokenizer_round_trip_and_json(tmp_path):
    tok = CharTokenizer.from_text("hello, world\n")
    assert tok.vocab_size == len(set("hello, world\n"))
    ids = tok.encode("world, hello")
    assert ids.dtype == np.int64 and tok.decode(ids) == "world, hello"
    assert tok.decode(md.tensor(ids)) == "world, hello"
    path = tmp_path / "tok.json"
    tok.save(str(path))
    assert json.loads(path.read_text())["chars"] == tok.chars
    assert CharTokenizer.load(str(path)).encode("hello").tolist() == ids[7:].tolist()
    with pytest.raises(KeyError, match="'z'"):
        tok.encode("z")
    with pytest.raises(ValueError, match="ids must be in"):
        tok.decode([99])


def test_default_corpus_is_deterministic_and_batches_shift_by_one():
    text = load_text()
    assert len(text) > 100_000 and text == load_text()
    corpus = CharCorpus(text, val_fraction=0.1)
    assert len(corpus.val) == int(len(text) * 0.1) and len(corpus.train) + len(corpus.val) == len(text)
    md.manual_seed(0)
    x, y = corpus.batch("train", 4, 32)
    assert x.shape == (4, 32) and x.dtype == np.int64
    np.testing.assert_array_equal(x.numpy()[:, 1:], y.numpy()[:, :-1])
    md.manual_seed(0)
    x2, _ = corpus.batch("train", 4, 32)
    np.testing.assert_array_equal(x.numpy(), x2.numpy())
    with pytest.raises(ValueError, match="split"):
        corpus.batch("test", 4, 32)
