"""The ``ln-lstm`` lab experiment: its quick mode's tables, figure and numbers, and a conclusion
that follows the numbers (a claim that does not show is reported as not reproducing)."""
import json
import os

import numpy as np
import pytest

from minidl import lab
from minidl.lab import ln_lstm


def _changes(plain=0.0, ln=0.0, none=0.0, reused=0.0):
    return {"LSTM": plain, "LayerNorm-LSTM": ln, ln_lstm.BN_NO_STATS: none, ln_lstm.BN_REUSED: reused}


FINAL = {"LSTM": 2.5, "LayerNorm-LSTM": 2.3, "BatchNorm-LSTM": 2.49}


def test_conclusion_follows_the_numbers():
    c = ln_lstm._conclusion(FINAL, _changes(none=0.6, reused=0.01), 32, 100)
    assert "0.200 below the LSTM's" in c and "only the LayerNorm-LSTM trains visibly faster" in c
    assert "while LayerNorm-LSTM does not (reproduces)" in c and "(Cooijmans et al.) removes" in c
    assert "+0.600" in c
    c = ln_lstm._conclusion(FINAL, _changes(none=0.6, reused=0.4), 32, 100)
    assert "does not remove" in c
    c = ln_lstm._conclusion(FINAL, _changes(ln=0.3, none=0.6), 32, 100)
    assert "but so does LayerNorm-LSTM" in c
    c = ln_lstm._conclusion({"LSTM": 2.0, "LayerNorm-LSTM": 2.1, "BatchNorm-LSTM": 2.0}, _changes(none=0.01), 32, 9)
    assert "0.100 above" in c and "claim 1 does not reproduce" in c and "claim 2 does not reproduce" in c


def test_reusing_the_last_steps_statistics_copies_them_forward():
    from minidl import nn
    m = nn.BatchNormLSTM(2, 3, max_steps=6)
    for _, b in m.named_buffers():
        b._data[...] = np.arange(b.shape[0])[:, None] + np.zeros(b.shape)
    ln_lstm.reuse_last_statistics(m, 4)
    for name, b in m.named_buffers():
        assert b.numpy()[:, 0].tolist() == [0, 1, 2, 3, 3, 3], name


@pytest.mark.slow
def test_quick_mode(tmp_path):
    out = str(tmp_path / "ln-lstm")
    r = lab.run("ln-lstm", quick=True, out=out)
    assert os.path.getsize(r.figure) > 10_000 and r.figure.startswith(out)
    with open(os.path.join(out, "result.json")) as f:
        assert json.load(f)["name"] == "ln-lstm"
    training, longer = r.tables
    assert [row["model"] for row in training.rows] == ["LSTM", "LayerNorm-LSTM", "BatchNorm-LSTM"]
    for row in training.rows:   # every model learns
        assert row["final loss (mean of last 10)"] < row["first loss"] - 0.5
    assert [row["model"] for row in longer.rows] == ["LSTM", "LayerNorm-LSTM", ln_lstm.BN_NO_STATS,
                                                     ln_lstm.BN_REUSED]
    T = r.data["T"]
    curves = {k: np.array(v) for k, v in r.data["position_losses"].items()}
    assert all(len(c) == 4 * T and np.isfinite(c).all() for c in curves.values())
    # the two BatchNorm evaluations share weights and statistics up to step T - 1, and only those
    none, reused = curves[ln_lstm.BN_NO_STATS], curves[ln_lstm.BN_REUSED]
    np.testing.assert_array_equal(none[:T], reused[:T])
    assert np.abs(none[T:] - reused[T:]).max() > 1e-6
    for label, change in r.data["change"].items():
        assert f"{change:+.3f}" in r.conclusion, label
