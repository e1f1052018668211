"""Variable-length batches: pad_sequence, pack_padded_sequence, pad_packed_sequence, PackedSequence
(enforce_sorted both ways) and the recurrent layers on them. A padded step produces zeros and no
gradient, and each final state is the one at the sequence's own length, as PyTorch; checked
against running every sequence alone and, when installed, against PyTorch itself."""
import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
from minidl.nn.utils.rnn import (PackedSequence, pack_padded_sequence, pack_sequence, pad_packed_sequence,
                                 pad_sequence, unpack_sequence)

I, H = 3, 4
LENGTHS_SORTED = [5, 3, 3, 1]
LENGTHS_UNSORTED = [2, 5, 1, 4]


def _padded(lengths, batch_first=False, seed=0):
    g = np.random.default_rng(seed)
    T = max(lengths)
    x = g.standard_normal((len(lengths), T, I))
    for b, n in enumerate(lengths):
        x[b, n:] = 0
    return x if batch_first else x.transpose(1, 0, 2).copy()


def test_packing_lays_out_the_steps_one_after_the_other():
    x = md.tensor(np.arange(4 * 3, dtype=np.float64).reshape(4, 3, 1))   # (T=4, B=3)
    p = pack_padded_sequence(x, [3, 2, 1])
    assert p.batch_sizes.numpy().tolist() == [3, 2, 1]
    assert p.data.numpy().ravel().tolist() == [0, 1, 2, 3, 4, 6]
    assert p.sorted_indices is None and p.unsorted_indices is None
    back, lengths = pad_packed_sequence(p)
    assert lengths.numpy().tolist() == [3, 2, 1]
    assert back.numpy()[:, :, 0].tolist() == [[0, 1, 2], [3, 4, 0], [6, 0, 0]]


def test_enforce_sorted_false_sorts_and_hands_back_the_callers_order():
    x = md.tensor(_padded(LENGTHS_UNSORTED, batch_first=True), requires_grad=True)
    p = pack_padded_sequence(x, LENGTHS_UNSORTED, batch_first=True, enforce_sorted=False)
    assert p.sorted_indices.numpy().tolist() == [1, 3, 0, 2]
    assert p.unsorted_indices.numpy().tolist() == [2, 0, 3, 1]
    back, lengths = pad_packed_sequence(p, batch_first=True, total_length=6)
    assert lengths.numpy().tolist() == LENGTHS_UNSORTED and back.shape == (4, 6, I)
    np.testing.assert_array_equal(back.detach().numpy()[:, :5], x.detach().numpy())
    back.sum().backward()
    mask = np.arange(5)[None, :] < np.array(LENGTHS_UNSORTED)[:, None]
    np.testing.assert_array_equal(x.grad.numpy(), np.repeat(mask[:, :, None], I, axis=2).astype(float))


def test_pad_sequence_stacks_with_padding_on_either_side():
    a, b = md.tensor([[1.0], [2.0], [3.0]], requires_grad=True), md.tensor([[4.0]], requires_grad=True)
    assert pad_sequence([a, b]).detach().numpy()[:, :, 0].tolist() == [[1, 4], [2, 0], [3, 0]]
    assert pad_sequence([a, b], batch_first=True, padding_value=-1.0).detach().numpy()[:, :, 0].tolist() == \
        [[1, 2, 3], [4, -1, -1]]
    left = pad_sequence([a, b], batch_first=True, padding_side="left")
    assert left.detach().numpy()[:, :, 0].tolist() == [[1, 2, 3], [0, 0, 4]]
    (left * md.tensor([[[1.0], [2.0], [3.0]], [[4.0], [5.0], [6.0]]])).sum().backward()
    assert a.grad.numpy().ravel().tolist() == [1, 2, 3] and b.grad.numpy().ravel().tolist() == [6]


def test_pack_sequence_and_unpack_sequence_are_inverses():
    g = np.random.default_rng(0)
    seqs = [md.tensor(g.standard_normal((n, 2))) for n in (2, 4, 1)]
    back = unpack_sequence(pack_sequence(seqs, enforce_sorted=False))
    for s, r in zip(seqs, back):
        np.testing.assert_array_equal(s.numpy(), r.numpy())


@pytest.mark.parametrize("cls", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("lengths", [LENGTHS_SORTED, LENGTHS_UNSORTED], ids=["sorted", "unsorted"])
def test_padded_steps_give_zeros_and_final_states_are_at_each_length(cls, lengths):
    md.manual_seed(0)
    m = getattr(nn, cls)(I, H, num_layers=2, bidirectional=True, batch_first=True, dtype="float64")
    x = _padded(lengths, batch_first=True)
    packed = pack_padded_sequence(md.tensor(x), lengths, batch_first=True, enforce_sorted=lengths == LENGTHS_SORTED)
    out, state = m(packed)
    assert isinstance(out, PackedSequence)
    y, got_lengths = pad_packed_sequence(out, batch_first=True)
    assert got_lengths.numpy().tolist() == lengths
    h_n = state[0] if cls == "LSTM" else state
    for b, n in enumerate(lengths):
        alone_y, alone_state = m(md.tensor(x[b:b + 1, :n]))
        alone_h = alone_state[0] if cls == "LSTM" else alone_state
        np.testing.assert_allclose(y.detach().numpy()[b, :n], alone_y.detach().numpy()[0], atol=1e-12)
        np.testing.assert_array_equal(y.detach().numpy()[b, n:], 0)
        np.testing.assert_allclose(h_n.detach().numpy()[:, b], alone_h.detach().numpy()[:, 0], atol=1e-12)


@pytest.mark.parametrize("cls,kw", [("LSTM", {}), ("LSTM", {"proj_size": 2}), ("GRU", {}), ("RNN", {}),
                                    ("RNN", {"nonlinearity": "relu"})])
@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_packed_batches_match_pytorch(cls, kw, enforce_sorted):
    torch = pytest.importorskip("torch")
    from torch.nn.utils import rnn as trnn
    lengths = LENGTHS_SORTED if enforce_sorted else LENGTHS_UNSORTED
    torch.manual_seed(0)
    tm = getattr(torch.nn, cls)(I, H, num_layers=2, bidirectional=True, dtype=torch.float64, **kw)
    m = getattr(nn, cls)(I, H, num_layers=2, bidirectional=True, dtype="float64", **kw)
    m.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    x = _padded(lengths)
    P = kw.get("proj_size") or H
    g = np.random.default_rng(3)
    h0 = g.standard_normal((4, len(lengths), P))
    c0 = g.standard_normal((4, len(lengths), H))
    tx, mx = torch.tensor(x, requires_grad=True), md.tensor(x, requires_grad=True)
    th0, mh0 = torch.tensor(h0, requires_grad=True), md.tensor(h0, requires_grad=True)
    tc0, mc0 = torch.tensor(c0, requires_grad=True), md.tensor(c0, requires_grad=True)
    tp = trnn.pack_padded_sequence(tx, torch.tensor(lengths), enforce_sorted=enforce_sorted)
    mp = pack_padded_sequence(mx, lengths, enforce_sorted=enforce_sorted)
    np.testing.assert_array_equal(mp.data.detach().numpy(), tp.data.detach().numpy())
    np.testing.assert_array_equal(mp.batch_sizes.numpy(), tp.batch_sizes.numpy())
    tout, ts = tm(tp, (th0, tc0) if cls == "LSTM" else th0)
    mout, ms = m(mp, (mh0, mc0) if cls == "LSTM" else mh0)
    ty, _ = trnn.pad_packed_sequence(tout)
    my, _ = pad_packed_sequence(mout)
    ts, ms = (list(ts), list(ms)) if cls == "LSTM" else ([ts], [ms])
    np.testing.assert_allclose(my.detach().numpy(), ty.detach().numpy(), atol=1e-10)
    for a, b in zip(ms, ts):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), atol=1e-10)
    ws = [g.standard_normal(tuple(t.shape)) for t in [ty] + ts]
    sum((t * torch.tensor(w)).sum() for t, w in zip([ty] + ts, ws)).backward()
    sum((t * md.tensor(w)).sum() for t, w in zip([my] + ms, ws)).backward()
    np.testing.assert_allclose(mx.grad.numpy(), tx.grad.numpy(), atol=1e-10)
    np.testing.assert_allclose(mh0.grad.numpy(), th0.grad.numpy(), atol=1e-10)
    if cls == "LSTM":
        np.testing.assert_allclose(mc0.grad.numpy(), tc0.grad.numpy(), atol=1e-10)
    ours = dict(m.named_parameters())
    for name, p in tm.named_parameters():
        np.testing.assert_allclose(ours[name].grad.numpy(), p.grad.numpy(), atol=1e-10, err_msg=name)


def test_pad_sequence_matches_pytorch():
    torch = pytest.importorskip("torch")
    from torch.nn.utils import rnn as trnn
    g = np.random.default_rng(0)
    arrays = [g.standard_normal((n, 2)) for n in (3, 1, 2)]
    for kw in ({}, {"batch_first": True}, {"batch_first": True, "padding_side": "left", "padding_value": 7.0}):
        theirs = trnn.pad_sequence([torch.tensor(a) for a in arrays], **kw).numpy()
        ours = pad_sequence([md.tensor(a) for a in arrays], **kw).numpy()
        np.testing.assert_array_equal(ours, theirs)


# bad input --------------------------------------------------------------------------------------
def _raises(exc, msg, fn):
    with pytest.raises(exc) as info:
        fn()
    assert str(info.value) == msg


def test_bad_lengths_get_pytorchs_exceptions_and_messages():
    x = md.randn(4, 3, 2)
    _raises(RuntimeError, "`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You "
                          "can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to sidestep "
                          "this requirement if you do not need ONNX exportability.",
            lambda: pack_padded_sequence(x, [2, 3, 1]))
    _raises(RuntimeError, "Length of all samples has to be greater than 0, but found an element in 'lengths' that "
                          "is <= 0", lambda: pack_padded_sequence(x, [3, 2, 0]))
    _raises(RuntimeError, "Expected `len(lengths)` to be equal to batch_size, but got 2 (batch_size=3)",
            lambda: pack_padded_sequence(x, [2, 2]))
    # PyTorch reads past the end here; the length names what is wrong instead
    _raises(RuntimeError, "Expected every length to be at most the padded sequence length 4, but got a length of 5",
            lambda: pack_padded_sequence(x, [5, 2, 1]))
    _raises(RuntimeError, "Expected every length to be at most the padded sequence length 4, but got a length of 5",
            lambda: pack_padded_sequence(x, [2, 5, 1], enforce_sorted=False))
    _raises(ValueError, "Expected total_length to be at least the length of the longest sequence in input, but got "
                        "total_length=2 and max sequence length being 3",
            lambda: pad_packed_sequence(pack_padded_sequence(x, [3, 2, 1]), total_length=2))


@pytest.mark.parametrize("batch_sizes, message", [
    ([3, 3], "batch_sizes add up to 6 rows, but data has 5"),
    ([2, 3], "must be positive and non-increasing"),
    ([4, -1], "must be positive and non-increasing"),
    ([3, 0], "must be positive and non-increasing"),
    ([[3, 2]], "must be a 1-D integer sequence, got shape \\(1, 2\\)"),
])
def test_a_hand_built_packed_sequence_must_have_a_layout_the_loops_can_index(batch_sizes, message):
    with pytest.raises(ValueError, match=message):
        PackedSequence(md.randn(5, 4), md.tensor(batch_sizes))
    with pytest.raises(ValueError, match="sorted_indices must be a permutation of 0..2"):
        PackedSequence(md.randn(5, 4), md.tensor([3, 2]), sorted_indices=md.tensor([0, 0, 1]))
    packed = PackedSequence(md.randn(5, 4), md.tensor([3, 2]), sorted_indices=md.tensor([2, 0, 1]))
    out, _ = nn.LSTM(4, 2)(packed)
    assert out.data.shape == (5, 2)


def test_packing_messages_equal_pytorchs_own():
    torch = pytest.importorskip("torch")
    from torch.nn.utils import rnn as trnn
    for shape, lengths in (((4, 3, 2), [2, 3, 1]), ((4, 3, 2), [3, 2, 0]), ((4, 3, 2), [2, 2]), ((4, 0, 2), [])):
        with pytest.raises(Exception) as theirs:
            trnn.pack_padded_sequence(torch.randn(*shape), lengths)
        with pytest.raises(Exception) as ours:
            pack_padded_sequence(md.randn(*shape), lengths)
        assert type(ours.value) is type(theirs.value) and str(ours.value) == str(theirs.value)
