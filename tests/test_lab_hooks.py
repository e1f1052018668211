"""The lab watches and alters layers through hooks, and measures in train mode without
moving any running statistic."""
import numpy as np

import minidl as md
from minidl import nn
from minidl.lab import padding
from minidl.lab._state import buffers_restored
from minidl.lab.seqdata import CountTask


def test_a_train_mode_forward_inside_buffers_restored_leaves_running_statistics_as_they_were():
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    before = [b.numpy().copy() for b in model.buffers()]
    x = md.tensor(np.random.default_rng(0).standard_normal((8, 3)).astype(np.float32))
    with md.no_grad(), buffers_restored(model):
        model.train()(x)
        assert not np.allclose(model[1].running_mean.numpy(), before[0])   # the forward did update them
    for b, old in zip(model.buffers(), before):
        np.testing.assert_array_equal(b.numpy(), old)


def _model_and_batch(variant):
    task = CountTask()
    seqs, _ = task.sample(6, np.random.default_rng(0))
    ids, kpm = task.pad(seqs, task.max_len * 2)
    return padding.build(variant, task, task.max_len * 7, 16, seed=0), ids, kpm


def test_the_unmasked_variant_is_the_masked_model_with_the_mask_withheld_from_its_norms():
    masked, ids, kpm = _model_and_batch("masked-batch")
    unmasked, _, _ = _model_and_batch("batch")       # same seed: the same weights
    assert kpm.any()
    with md.no_grad():
        y_masked = masked.train()(md.tensor(ids), kpm).numpy()
        y_unmasked = unmasked.train()(md.tensor(ids), kpm).numpy()
        for m in masked.modules():                    # withhold the mask by hand: the same output
            if isinstance(m, padding.SeqNorm):
                m.register_forward_pre_hook(lambda module, args: args[:1])
        y_by_hand = masked(md.tensor(ids), kpm).numpy()
    assert not np.allclose(y_masked, y_unmasked)
    np.testing.assert_allclose(y_unmasked, y_by_hand, rtol=1e-6)


def test_the_first_norm_input_is_what_that_norm_receives_the_embedded_tokens():
    model, ids, kpm = _model_and_batch("batch")
    with md.no_grad():
        x = model.tok_emb(md.tensor(ids))
        if model.pos_emb is not None:
            x = model.pos_emb(x)
    got = padding.first_norm_input(model, ids, kpm)
    np.testing.assert_allclose(got, x.numpy(), rtol=1e-6)
    assert model.training                             # the model's mode is left as it was
    assert list(model.blocks[0].norm1._forward_pre_hooks.values()) == [padding._withhold_mask]  # removed again
