"""Three more training programs in PyTorch's idiom, each exercising many features at once, that
run unchanged on minidl: a CNN with a max-unpool reconstruction branch, a bidirectional LSTM on
packed variable-length batches trained with CTC, and a pre-LN Transformer encoder with tied
weights and greedy decoding. Each program takes the framework module (``torch`` or ``minidl``)
and reaches ``nn``, ``nn.functional``, ``optim`` and ``utils.data`` through it. Without torch a
program runs on minidl alone and its loss must fall; with torch both frameworks start from the
same weights (copied through state_dict as NumPy arrays), see the same data, and their losses,
final parameters and eval outputs must agree to float tolerance."""
import importlib
import types

import numpy as np
import pytest

import minidl


def _ns(torch):
    name = torch.__name__
    return types.SimpleNamespace(torch=torch, nn=importlib.import_module(f"{name}.nn"),
                                 F=importlib.import_module(f"{name}.nn.functional"),
                                 optim=importlib.import_module(f"{name}.optim"),
                                 data=importlib.import_module(f"{name}.utils.data"),
                                 rnn=importlib.import_module(f"{name}.nn.utils.rnn"))


def _load_init(torch, model, init):
    if init is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in init.items()})


# (1) CNN: conv/BN/ReLU, max-pool with indices + max-unpool reconstruction, adaptive pooling, dropout,
# weighted label-smoothed cross-entropy, nesterov SGD on named groups, OneCycleLR, clipping, save/load.
def cnn_program(torch, steps, data, init=None):
    t = _ns(torch)
    nn, F = t.nn, t.F

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 4, 3, padding=1)
            self.bn = nn.BatchNorm2d(4)
            self.pool = nn.MaxPool2d(2, return_indices=True)
            self.unpool = nn.MaxUnpool2d(2)
            self.dec = nn.Conv2d(4, 1, 3, padding=1)
            self.conv2 = nn.Conv2d(4, 8, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(8)
            self.gap = nn.AdaptiveAvgPool2d((2, 2))
            self.drop = nn.Dropout(0.25)
            self.fc = nn.Linear(8 * 2 * 2, 3)

        def forward(self, x):
            h = F.relu(self.bn(self.conv(x)))
            p, idx = self.pool(h)
            recon = self.dec(self.unpool(p, idx, output_size=h.shape[-2:]))
            z = self.gap(F.relu(self.bn2(self.conv2(p))))
            return self.fc(self.drop(torch.flatten(z, 1))), recon

    model = Net()
    _load_init(torch, model, init)
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if name.endswith("bias") or name.startswith("bn") else decay).append(p)
    opt = t.optim.SGD([{"params": decay, "weight_decay": 5e-3}, {"params": no_decay, "weight_decay": 0.0}],
                      lr=0.05, momentum=0.9, nesterov=True)
    sched = t.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=max(steps, 1), pct_start=0.25)
    criterion = nn.CrossEntropyLoss(weight=torch.tensor(data["class_weight"]), label_smoothing=0.1)
    gen = torch.Generator().manual_seed(0)
    loader = t.data.DataLoader(t.data.TensorDataset(torch.tensor(data["x"]), torch.tensor(data["y"])),
                               batch_size=4, shuffle=data["shuffle"], generator=gen)
    losses, lrs = [], []
    model.train()
    while len(losses) < steps:
        for xb, yb in loader:
            if len(losses) == steps:
                break
            opt.zero_grad()
            logits, recon = model(xb)
            loss = criterion(logits, yb) + 0.5 * F.mse_loss(recon, xb)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
            opt.step()
            sched.step()
            losses.append(loss.item())
            lrs.append(opt.param_groups[0]["lr"])
    model.eval()
    x_eval = torch.tensor(data["x_eval"])
    with torch.no_grad():
        out, recon = model(x_eval)
    torch.save(model.state_dict(), data["path"])
    reloaded = Net()
    reloaded.load_state_dict(torch.load(data["path"]))
    reloaded.eval()
    with torch.no_grad():
        out2, recon2 = reloaded(x_eval)
    np.testing.assert_array_equal(out2.numpy(), out.numpy())
    np.testing.assert_array_equal(recon2.numpy(), recon.numpy())
    return model, losses, [np.array(lrs), out.numpy(), recon.numpy(),
                           np.array(opt.param_groups[0]["momentum"])]


def _cnn_data(tmp_path, shuffle):
    rng = np.random.default_rng(10)
    return {"x": rng.standard_normal((16, 1, 16, 16)).astype(np.float32),
            "y": rng.integers(0, 3, 16).astype(np.int64),
            "x_eval": rng.standard_normal((3, 1, 16, 16)).astype(np.float32),
            "class_weight": np.array([1.0, 2.0, 0.5], np.float32),
            "shuffle": shuffle, "path": str(tmp_path / "cnn_state.pt")}


# (2) sequence model: embedding, packed bidirectional 2-layer LSTM, a weight- or spectral-normalised head,
# CTC loss on padded targets, Adam with amsgrad, StepLR.
def ctc_program(torch, steps, data, init=None):
    t = _ns(torch)
    nn, F = t.nn, t.F
    V, E, H, C = 9, 6, 5, 5

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, E, padding_idx=0)
            self.lstm = nn.LSTM(E, H, num_layers=2, bidirectional=True, batch_first=True)
            self.head = getattr(nn.utils.parametrizations, data["head_norm"])(nn.Linear(2 * H, C))

        def forward(self, tokens, lengths):
            packed = t.rnn.pack_padded_sequence(self.emb(tokens), lengths, batch_first=True, enforce_sorted=False)
            out, _ = self.lstm(packed)
            out, _ = t.rnn.pad_packed_sequence(out, batch_first=True, total_length=tokens.shape[1])
            return F.log_softmax(self.head(out), dim=-1).transpose(0, 1)

    model = Net()
    _load_init(torch, model, init)
    opt = t.optim.Adam(model.parameters(), lr=0.02, amsgrad=True)
    sched = t.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    tokens, lengths = torch.tensor(data["tokens"]), torch.tensor(data["lengths"])
    targets, target_lengths = torch.tensor(data["targets"]), torch.tensor(data["target_lengths"])
    losses = []
    model.train()
    for _ in range(steps):
        opt.zero_grad()
        log_probs = model(tokens, lengths)
        loss = F.ctc_loss(log_probs, targets, lengths, target_lengths, blank=0, reduction="mean")
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    with torch.no_grad():
        log_probs = model(tokens, lengths)
        losses.append(F.ctc_loss(log_probs, targets, lengths, target_lengths).item())
    return model, losses, [log_probs.numpy(), np.array(opt.param_groups[0]["lr"])]


def _ctc_data(tmp_path, shuffle, head_norm="weight_norm"):
    rng = np.random.default_rng(11)
    lengths = np.array([7, 4, 6, 5], np.int64)
    tokens = np.zeros((4, 7), np.int64)
    for i, n in enumerate(lengths):
        tokens[i, :n] = rng.integers(1, 9, n)
    target_lengths = np.array([3, 2, 3, 1], np.int64)
    targets = np.zeros((4, 3), np.int64)
    for i, n in enumerate(target_lengths):
        targets[i, :n] = rng.integers(1, 5, n)
    return {"tokens": tokens, "lengths": lengths, "targets": targets, "target_lengths": target_lengths,
            "head_norm": head_norm}


def _ctc_spectral_data(tmp_path, shuffle):
    return _ctc_data(tmp_path, shuffle, head_norm="spectral_norm")


# (3) Transformer LM: pre-LN encoder with causal + key-padding masks, learned positions, tied
# embedding/output weights, AdamW with LambdaLR warmup, ignore_index padding, greedy decoding.
def transformer_program(torch, steps, data, init=None):
    t = _ns(torch)
    nn, F = t.nn, t.F
    V, T, D = 12, 8, 8

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(V, D)
            self.pos = nn.Embedding(T, D)
            layer = nn.TransformerEncoderLayer(D, nhead=2, dim_feedforward=16, dropout=0.0, batch_first=True,
                                               norm_first=True)
            self.encoder = nn.TransformerEncoder(layer, num_layers=2, norm=nn.LayerNorm(D),
                                                 enable_nested_tensor=False)
            self.out = nn.Linear(D, V, bias=False)
            self.out.weight = self.tok.weight

        def forward(self, idx, pad_mask=None):
            L = idx.shape[1]
            x = self.tok(idx) + self.pos(torch.arange(L))
            causal = nn.Transformer.generate_square_subsequent_mask(L)
            h = self.encoder(x, mask=causal, src_key_padding_mask=pad_mask, is_causal=True)
            return self.out(h)

    model = LM()
    _load_init(torch, model, init)
    opt = t.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.05)
    sched = t.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 3))
    idx, targets = torch.tensor(data["idx"]), torch.tensor(data["targets"])
    pad_mask = torch.zeros(idx.shape).masked_fill(idx == 0, float("-inf"))
    losses = []
    model.train()
    for _ in range(steps):
        opt.zero_grad()
        logits = model(idx, pad_mask)
        loss = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=0)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    model.eval()
    seq = torch.tensor(data["prompt"])
    with torch.no_grad():
        for _ in range(5):
            nxt = model(seq)[:, -1].argmax(dim=-1, keepdim=True)
            seq = torch.cat([seq, nxt], dim=1)
        last_logits = model(seq)[:, -1]
    return model, losses, [seq.numpy(), last_logits.numpy(), np.array(opt.param_groups[0]["lr"])]


def _transformer_data(tmp_path, shuffle):
    rng = np.random.default_rng(12)
    lengths = [8, 5, 7, 3]
    seqs = np.zeros((4, 8), np.int64)
    for i, n in enumerate(lengths):
        seqs[i, :n] = rng.integers(1, 12, n)
    idx = seqs.copy()
    targets = np.zeros_like(seqs)
    targets[:, :-1] = seqs[:, 1:]
    return {"idx": idx, "targets": targets, "prompt": seqs[:2, :2].copy()}


# the checks ----------------------------------------------------------------------------------
PROGRAMS = {"cnn": (cnn_program, _cnn_data, 8), "ctc": (ctc_program, _ctc_data, 6),
            "ctc_spectral": (ctc_program, _ctc_spectral_data, 6),
            "transformer": (transformer_program, _transformer_data, 6)}


def _fixed_dropout(framework, monkeypatch):
    """F.dropout draws the same masks in both frameworks: a fixed sequence from NumPy. Eval mode
    still bypasses it, since the module passes ``training`` through."""
    F = importlib.import_module(f"{framework.__name__}.nn.functional")
    rng = np.random.default_rng(5)

    def dropout(input, p=0.5, training=True, inplace=False):
        if not training or p == 0.0:
            return input
        keep = (rng.uniform(size=tuple(input.shape)) >= p).astype(np.float32) / (1.0 - p)
        return input * framework.tensor(keep)
    monkeypatch.setattr(F, "dropout", dropout)


def _comparable(key, value):
    """The key third of an attention in-projection bias drops out of softmax (adding a constant to
    every score of a row changes nothing), so its gradient is rounding noise that Adam's
    normalisation turns into lr-sized steps in a random direction: it is left out."""
    if key.endswith("in_proj_bias"):
        d = value.shape[0] // 3
        return np.concatenate([value[:d], value[2 * d:]])
    return value


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_runs_on_minidl_alone_and_learns(name, tmp_path):
    program, make_data, steps = PROGRAMS[name]
    minidl.manual_seed(0)
    model, losses, extra = program(minidl, steps, make_data(tmp_path, shuffle=True))
    assert len(losses) >= steps and all(np.isfinite(losses))
    assert losses[-1] < losses[0]
    assert all(np.all(np.isfinite(v.numpy())) for v in model.state_dict().values())
    assert all(np.all(np.isfinite(np.asarray(e, dtype=np.float64))) for e in extra)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_matches_pytorch_from_the_same_weights(name, tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    program, make_data, steps = PROGRAMS[name]
    minidl.manual_seed(0)
    program(minidl, 0, make_data(tmp_path, shuffle=False))
    torch.manual_seed(0)
    ref_model, _, _ = program(torch, 0, make_data(tmp_path, shuffle=False))
    init = {k: v.detach().numpy().copy() for k, v in ref_model.state_dict().items()}

    _fixed_dropout(torch, monkeypatch)
    t_model, t_losses, t_extra = program(torch, steps, make_data(tmp_path, shuffle=False), init)
    _fixed_dropout(minidl, monkeypatch)
    m_model, m_losses, m_extra = program(minidl, steps, make_data(tmp_path, shuffle=False), init)

    np.testing.assert_allclose(m_losses, t_losses, rtol=2e-4, atol=2e-5)
    t_state, m_state = t_model.state_dict(), m_model.state_dict()
    assert list(m_state) == list(t_state)
    for key in t_state:
        np.testing.assert_allclose(_comparable(key, m_state[key].numpy()),
                                   _comparable(key, t_state[key].detach().numpy()), rtol=1e-3, atol=1e-5, err_msg=key)
    for i, (a, b) in enumerate(zip(m_extra, t_extra)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-3, atol=1e-5, err_msg=f"extra {i}")
