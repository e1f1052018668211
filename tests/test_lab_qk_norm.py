"""The lab's ``qk-norm`` experiment: its probe of the largest attention logit, its LR-sensitivity
number, and its quick mode (table, figure, a conclusion computed from the numbers)."""
import json
import math
import os

import numpy as np
import pytest

import minidl as md
from minidl import lab
from minidl.lab import qk_norm
from minidl.ops.heads import split_heads
from minidl.zoo.gpt import GPT


def test_registered():
    assert "qk-norm" in lab.EXPERIMENTS and lab.get("qk-norm") is qk_norm


@pytest.mark.parametrize("qk", [None, "layer"])
def test_the_probe_finds_the_largest_causal_logit(qk):
    md.manual_seed(0)
    model = GPT(vocab_size=7, block_size=5, n_layer=2, n_head=2, d_model=8, qk_norm=qk)
    ids = np.arange(10).reshape(2, 5) % 7
    expected = []
    with md.no_grad():   # the same numbers, written out layer by layer
        x = model.pos_emb(model.tok_emb(md.tensor(ids)))
        for blk in model.blocks:
            a = blk.attn
            h = blk.norm1(x)
            q, k, _ = (t.numpy() for t in split_heads(a.qkv(h), 3, 2))
            if qk:
                q, k = a.q_norm(md.tensor(q)).numpy(), a.k_norm(md.tensor(k)).numpy()
            s = np.einsum("bhtd,bhsd->bhts", q, k) / math.sqrt(a.head_dim)
            expected.append(np.abs(s[..., np.tril(np.ones((5, 5), bool))]).max())
            x = blk(x)
    assert qk_norm.max_attention_logit(model, ids) == pytest.approx(max(expected), rel=1e-5)
    assert not any(blk.attn.__dict__.get("_forward_hooks") for blk in model.blocks)   # hooks removed


def test_lr_sensitivity_counts_a_diverged_run_as_the_initial_loss():
    assert qk_norm.lr_sensitivity([2.0, 2.0, 2.0], 4.0) == 0.0
    assert qk_norm.lr_sensitivity([2.0, 3.0, float("nan")], 4.0) == pytest.approx((0 + 1 + 2) / 3)
    assert qk_norm.lr_sensitivity([2.0, 9.0], 4.0) == pytest.approx(1.0)   # capped at the initial loss


@pytest.mark.slow
def test_quick_mode(tmp_path):
    out = str(tmp_path / "qk")
    r = lab.run("qk-norm", quick=True, out=out)
    assert os.path.getsize(r.figure) > 10_000 and r.figure.startswith(out)
    with open(os.path.join(out, "result.json")) as f:
        assert json.load(f)["name"] == "qk-norm"
    runs, summary = r.tables
    assert len(runs.rows) == 8 and {row["attention"] for row in runs.rows} == {"plain attention",
                                                                               "qk-norm (LayerNorm)"}
    assert all(row["largest attention logit"] > 0 for row in runs.rows)
    sens = {row["attention"]: row["LR sensitivity"] for row in summary.rows}
    assert f"{sens['qk-norm (LayerNorm)']:.3f} vs {sens['plain attention']:.3f}" in r.conclusion
    assert "reproduce" in r.conclusion
