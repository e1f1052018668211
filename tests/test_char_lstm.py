"""The zoo's character-level LSTM language model: shapes and initial loss, learning a tiny text,
stateful stepping equal to reading the whole sequence, and reproducible sampling."""
import math

import numpy as np
import pytest

import minidl as md
from minidl import optim
from minidl.zoo import CharLSTM


def test_logits_and_loss_have_the_language_models_shapes():
    md.manual_seed(0)
    m = CharLSTM(vocab_size=11, embed_dim=8, hidden_size=16, num_layers=2)
    idx = np.random.default_rng(0).integers(0, 11, (3, 7))
    logits, loss = m(idx, idx)
    assert logits.shape == (3, 7, 11)
    assert abs(float(loss.item()) - math.log(11)) < 0.2       # near uniform at initialisation
    assert m(idx)[1] is None


def test_it_learns_a_short_repeating_text():
    md.manual_seed(0)
    text = np.array([0, 1, 2, 3, 4] * 8)
    x, y = text[None, :-1], text[None, 1:]
    m = CharLSTM(vocab_size=5, embed_dim=8, hidden_size=16, num_layers=1)
    opt = optim.Adam(m.parameters(), lr=2e-2)
    first = None
    for _ in range(60):
        _, loss = m(x, y)
        first = first if first is not None else float(loss.item())
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert float(loss.item()) < 0.1 * first


def test_stepping_with_the_carried_state_equals_reading_the_whole_sequence():
    md.manual_seed(0)
    m = CharLSTM(vocab_size=7, embed_dim=4, hidden_size=6, num_layers=2)
    m.eval()
    idx = np.random.default_rng(1).integers(0, 7, (2, 5))
    whole, _ = m.step(idx)
    part, state = m.step(idx[:, :3])
    rest, _ = m.step(idx[:, 3:], state)
    joined = np.concatenate([part.detach().numpy(), rest.detach().numpy()], axis=1)
    np.testing.assert_allclose(joined, whole.detach().numpy(), atol=1e-5)


def test_a_batchnorm_lstm_stepped_from_a_position_uses_that_positions_statistics():
    md.manual_seed(0)
    m = CharLSTM(vocab_size=7, embed_dim=4, hidden_size=6, num_layers=2, norm="batch")
    rng = np.random.default_rng(1)
    for _ in range(3):   # training: running statistics that differ from step to step
        m(rng.integers(0, 7, (4, 5)))
    m.eval()
    idx = rng.integers(0, 7, (2, 5))
    whole, _ = m.step(idx)
    part, state = m.step(idx[:, :3])
    rest, _ = m.step(idx[:, 3:], state, start=3)
    joined = np.concatenate([part.detach().numpy(), rest.detach().numpy()], axis=1)
    np.testing.assert_allclose(joined, whole.detach().numpy(), atol=1e-5)
    restarted, _ = m.step(idx[:, 3:], state)   # read as steps 0, 1: other statistics, other logits
    assert not np.allclose(restarted.detach().numpy(), whole.detach().numpy()[:, 3:], atol=1e-3)
    with pytest.raises(ValueError, match="start must be an integer >= 0, got -1"):
        m.step(idx, start=-1)


def test_an_unknown_norm_is_refused():
    with pytest.raises(ValueError, match="norm must be one of none, layer, batch, got 'rms'"):
        CharLSTM(5, 4, 4, 1, norm="rms")


def test_sampling_is_reproducible_and_extends_the_prompt():
    m = CharLSTM(vocab_size=7, embed_dim=4, hidden_size=6, num_layers=1)
    md.manual_seed(3)
    a = m.generate(np.array([[1, 2]]), max_new_tokens=6, temperature=0.8, top_k=3).numpy()
    md.manual_seed(3)
    b = m.generate(np.array([[1, 2]]), max_new_tokens=6, temperature=0.8, top_k=3).numpy()
    assert a.shape == (1, 8) and a[0, :2].tolist() == [1, 2]
    np.testing.assert_array_equal(a, b)
    assert m.training                                              # generate restores the mode


def test_an_empty_prompt_is_refused():
    with pytest.raises(ValueError, match="at least one token"):
        CharLSTM(5, 4, 4, 1).generate(np.zeros((1, 0), np.int64), 3)
