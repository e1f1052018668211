"""Classifier and generator scripts over sequences as users write them (after the text-classification
tutorial with EmbeddingBag, a packed-LSTM sentiment classifier with a resumable checkpoint, and a
character generator on LSTMCell/GRUCell with seeded temperature sampling), condensed to tiny sizes.
Each takes the framework module; the harness (same weights from NumPy, same data, compared losses,
parameters, logs and warnings) is test_port_sequence_scripts.py's."""
import os

import numpy as np
import pytest

import minidl
from test_port_sequence_scripts import _dtype, _init, _np, _ns, _params, check_common, compare_with_torch, run


# (4) text classification: EmbeddingBag over flat token lists with offsets, SGD lr 5, clipping, accuracy --------
CORPUS = [(0, "the cat sat on the mat"), (1, "stocks fell sharply today"), (2, "the team won the match"),
          (0, "a dog and a cat"), (1, "markets rally on news"), (2, "the striker scored twice"),
          (0, "birds sing at dawn"), (1, "bank raises rates"), (2, "fans cheer the goal"),
          (0, "the horse ran"), (1, "shares drop"), (2, "match ends in a draw")]
VOCAB = {w: i + 1 for i, w in enumerate(sorted({w for _, s in CORPUS for w in s.split()}))}   # 0: unknown/pad


def embedding_bag_script(torch, workdir, log, mode="mean"):
    t = _ns(torch)
    nn = t.nn
    out = {'loss': [], 'acc': []}

    def text_pipeline(x):
        return [VOCAB.get(w, 0) for w in x.split()]

    def collate_batch(batch):
        label_list, text_list, offsets = [], [], [0]
        for (_label, _text) in batch:
            label_list.append(int(_label))
            processed_text = torch.tensor(text_pipeline(_text), dtype=torch.int64)
            text_list.append(processed_text)
            offsets.append(processed_text.size(0))
        offsets = torch.tensor(offsets[:-1]).cumsum(dim=0)
        return torch.tensor(label_list, dtype=torch.int64), torch.cat(text_list), offsets

    class TextClassificationModel(nn.Module):
        def __init__(self, vocab_size, embed_dim, num_class):
            super(TextClassificationModel, self).__init__()
            self.embedding = nn.EmbeddingBag(vocab_size, embed_dim, sparse=False, mode=mode)
            self.fc = nn.Linear(embed_dim, num_class)
            initrange = 0.5
            self.embedding.weight.data.uniform_(-initrange, initrange)
            self.fc.weight.data.uniform_(-initrange, initrange)
            self.fc.bias.data.zero_()

        def forward(self, text, offsets):
            return self.fc(self.embedding(text, offsets))

    model = TextClassificationModel(len(VOCAB) + 1, 8, 3)
    _init(torch, model, 11, 0.4)
    criterion = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=5 if mode == "mean" else 1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1.0, gamma=0.1)
    train_dataloader = t.data.DataLoader(CORPUS[:8], batch_size=4, shuffle=False, collate_fn=collate_batch)
    valid_dataloader = t.data.DataLoader(CORPUS[8:], batch_size=4, shuffle=False, collate_fn=collate_batch)

    def evaluate(dataloader):
        model.eval()
        total_acc, total_count = 0, 0
        with torch.no_grad():
            for label, text, offsets in dataloader:
                total_acc += (model(text, offsets).argmax(1) == label).sum().item()
                total_count += label.size(0)
        return total_acc / total_count

    total_accu = None
    for epoch in range(1, 3):
        model.train()
        total_acc, total_count = 0, 0
        for idx, (label, text, offsets) in enumerate(train_dataloader):
            optimizer.zero_grad()
            predicted_label = model(text, offsets)
            loss = criterion(predicted_label, label)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
            optimizer.step()
            total_acc += (predicted_label.argmax(1) == label).sum().item()
            total_count += label.size(0)
            out['loss'].append(loss.item())
            log("| {:5d}/{:5d} batches | accuracy {:8.3f}".format(idx, len(train_dataloader), total_acc / total_count))
        accu_val = evaluate(valid_dataloader)
        if total_accu is not None and total_accu > accu_val:
            scheduler.step()
        else:
            total_accu = accu_val
        out['acc'].append(accu_val)
        log("| end of epoch {:3d} | valid accuracy {:8.3f} | lr {}".format(epoch, accu_val, scheduler.get_last_lr()))
    with torch.no_grad():
        out['pred'] = model(torch.tensor(text_pipeline("the cat ran")), torch.tensor([0])).argmax(1).item() + 1
        out['bags'] = _np(model.embedding(torch.tensor([[1, 2, 3], [4, 5, 6]])))
        out['functional'] = _np(t.F.embedding_bag(torch.tensor([1, 2, 3, 4]), model.embedding.weight,
                                                  torch.tensor([0, 1]), mode=mode))
        out['empty_bag'] = _np(model.embedding(torch.tensor([1, 2]), torch.tensor([0, 2, 2])))
        if mode == "sum":
            out['weighted'] = _np(model.embedding(torch.tensor([1, 2, 3]), torch.tensor([0, 2]),
                                                  per_sample_weights=torch.tensor([0.5, 2.0, -1.0])))
    out.update(_params(model))
    return out


# (5) an LSTM classifier over pack_padded_sequence(enforce_sorted=False), h_n of the last layer, a checkpoint of
# model + optimizer + scheduler + RNG state, and the resumed run's next steps equal to the uninterrupted run's ---
def lstm_classifier_script(torch, workdir, log, dropout=0.0):
    t = _ns(torch)
    nn, F = t.nn, t.F
    out = {'loss': [], 'acc': []}

    class LSTMClassifier(nn.Module):
        def __init__(self, vocab_size, embedding_dim, hidden_dim, output_dim, n_layers, bidirectional):
            super().__init__()
            self.embedding = nn.Embedding(vocab_size, embedding_dim, padding_idx=0)
            self.lstm = nn.LSTM(embedding_dim, hidden_dim, num_layers=n_layers, bidirectional=bidirectional,
                                dropout=dropout, batch_first=True)
            self.fc = nn.Linear(hidden_dim * 2 if bidirectional else hidden_dim, output_dim)
            self.dropout, self.bidirectional = nn.Dropout(dropout), bidirectional

        def forward(self, text, text_lengths):
            packed_embedded = nn.utils.rnn.pack_padded_sequence(self.dropout(self.embedding(text)),
                                                                text_lengths.to('cpu'), batch_first=True,
                                                                enforce_sorted=False)
            packed_output, (hidden, cell) = self.lstm(packed_embedded)
            output, output_lengths = nn.utils.rnn.pad_packed_sequence(packed_output, batch_first=True)
            if self.bidirectional:
                hidden = self.dropout(torch.cat((hidden[-2, :, :], hidden[-1, :, :]), dim=1))
            else:
                hidden = hidden[-1]
            return self.fc(hidden), output, output_lengths

    def collate(batch):
        seqs = [torch.tensor([VOCAB[w] for w in s.split()]) for _, s in batch]
        return (nn.utils.rnn.pad_sequence(seqs, batch_first=True), torch.tensor([len(s) for s in seqs]),
                torch.tensor([lab for lab, _ in batch]))

    def categorical_accuracy(preds, y):
        top_pred = preds.argmax(1, keepdim=True)
        return top_pred.eq(y.view_as(top_pred)).sum().float() / y.shape[0]

    def make():
        m = LSTMClassifier(len(VOCAB) + 1, 6, 5, 3, 2, True)
        _init(torch, m, 21, 0.3)
        o = torch.optim.Adam(m.parameters(), lr=0.05, weight_decay=1e-4)
        return m, o, t.sched.StepLR(o, step_size=2, gamma=0.5)

    model, optimizer, scheduler = make()
    loader = list(t.data.DataLoader(CORPUS, batch_size=4, collate_fn=collate))
    criterion = nn.CrossEntropyLoss()

    def step(m, o, s, batch):
        text, lengths, labels = batch
        m.train()
        o.zero_grad()
        predictions, output, output_lengths = m(text, lengths)
        loss = criterion(predictions, labels)
        acc = categorical_accuracy(predictions, labels)
        loss.backward()
        o.step()
        s.step()
        return loss.item(), acc.item(), output, output_lengths

    for i, batch in enumerate(loader[:2]):
        loss, acc, output, output_lengths = step(model, optimizer, scheduler, batch)
        out['loss'].append(loss)
        out['acc'].append(acc)
        log(f'step {i} | loss {loss:.4f} | acc {acc * 100:.2f}% | out {tuple(output.shape)} '
            f'lens {output_lengths.tolist()}')
    out['output_lengths_dtype'] = _dtype(output_lengths)
    path = os.path.join(workdir, 'ckpt.pt')
    torch.save({'epoch': 2, 'model_state_dict': model.state_dict(), 'optimizer_state_dict': optimizer.state_dict(),
                'scheduler': scheduler.state_dict(), 'loss': out['loss'][-1], 'rng_state': torch.get_rng_state()},
               path)
    out['cont'] = [step(model, optimizer, scheduler, b)[0] for b in loader[2:]]
    model2, optimizer2, scheduler2 = make()
    checkpoint = torch.load(path, weights_only=True)
    model2.load_state_dict(checkpoint['model_state_dict'])
    optimizer2.load_state_dict(checkpoint['optimizer_state_dict'])
    scheduler2.load_state_dict(checkpoint['scheduler'])
    torch.set_rng_state(checkpoint['rng_state'])   # the same dropout masks as the uninterrupted run
    out['ckpt'] = (checkpoint['epoch'], checkpoint['loss'])
    out['resumed'] = [step(model2, optimizer2, scheduler2, b)[0] for b in loader[2:]]
    out['resume_equal'] = all(np.array_equal(_np(a), _np(b)) for a, b in zip(model.state_dict().values(),
                                                                          model2.state_dict().values()))
    out['lr_after'] = [scheduler.get_last_lr(), scheduler2.get_last_lr()]
    model.eval()
    with torch.no_grad():
        text, lengths, labels = loader[0]
        logits = model(text, lengths)[0]
        out['eval_acc'], out['probs'] = categorical_accuracy(logits, labels).item(), _np(F.softmax(logits, dim=-1))
    out.update(_params(model))
    return out


# (6) a character generator stepping an LSTMCell or GRUCell, clip_grad_value_, RMSprop, then temperature
# sampling with torch.multinomial from a seeded torch.Generator (replayed through get_state / set_state) --------
TEXT = "hello world, hello there. the world is here."


def cell_generator_script(torch, workdir, log, cell="LSTMCell"):
    t = _ns(torch)
    nn, F = t.nn, t.F
    chars = sorted(set(TEXT))
    stoi = {c: i for i, c in enumerate(chars)}
    itos = {i: c for c, i in stoi.items()}
    data = torch.tensor([stoi[c] for c in TEXT], dtype=torch.long)
    V, H = len(chars), 12
    out = {'loss': []}

    class CharGen(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed, self.cell, self.head = nn.Embedding(V, 8), getattr(nn, cell)(8, H), nn.Linear(H, V)

        def init_state(self, batch):
            h = torch.zeros(batch, H)
            return (h, torch.zeros(batch, H)) if cell == "LSTMCell" else h

        def step(self, x, state):
            state = self.cell(self.embed(x), state)
            return self.head(state[0] if isinstance(state, tuple) else state), state

        def forward(self, x, state=None):
            state = self.init_state(x.size(0)) if state is None else state
            logits = []
            for t_ in range(x.size(1)):
                lo, state = self.step(x[:, t_], state)
                logits.append(lo)
            return torch.stack(logits, dim=1), state

    model = CharGen()
    _init(torch, model, 31, 0.3)
    opt = torch.optim.RMSprop(model.parameters(), lr=0.01)
    xb = torch.stack([data[s:s + 6] for s in (0, 10, 20)])
    yb = torch.stack([data[s + 1:s + 7] for s in (0, 10, 20)])
    for it in range(3):
        logits, state = model(xb)
        loss = F.cross_entropy(logits.view(-1, V), yb.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_value_(model.parameters(), 0.5)
        opt.step()
        out['loss'].append(loss.item())
        log(f"iter {it} loss {loss.item():.4f}")

    @torch.no_grad()
    def sample(prime, n, temperature, generator):
        model.eval()
        logits, state = model(torch.tensor([[stoi[c] for c in prime]]), model.init_state(1))
        last, res, probs_seen = logits[:, -1], list(prime), []
        for _ in range(n):
            probs = F.softmax(last / temperature, dim=-1)
            probs_seen.append(probs)
            idx = torch.multinomial(probs, num_samples=1, generator=generator)
            res.append(itos[idx.item()])
            last, state = model.step(idx.view(1), state)
        return "".join(res), torch.cat(probs_seen)

    g = torch.Generator().manual_seed(7)
    g_state = g.get_state()
    s1, p1 = sample("he", 8, 0.8, g)
    g.set_state(g_state)
    s2, _ = sample("he", 8, 0.8, g)
    s3, _ = sample("he", 8, 0.8, torch.Generator().manual_seed(7))
    out['same_seed'], out['sample_len'], out['state_dtype'] = s1 == s2 == s3, len(s1), _dtype(g_state)
    out['probs_first'], out['probs_dtype'] = _np(p1[0]), _dtype(p1)
    out['greedy'] = [sample("he", 5, 1e-4, torch.Generator().manual_seed(s))[0] for s in (0, 1)]
    out['gen_seed'] = torch.Generator().manual_seed(7).initial_seed()
    out.update(_params(model))
    return out


SCRIPTS = {"embedding_bag": embedding_bag_script, "lstm_classifier": lstm_classifier_script,
           "cell_generator": cell_generator_script}


def _sanity(name, out, **kw):
    """What each script must show on its own, torch or not."""
    check_common(out)
    if name == "embedding_bag":
        w = out["p.embedding.weight"]
        reduce = {"sum": np.sum, "max": np.max}.get(kw.get("mode"), np.mean)
        np.testing.assert_allclose(out["functional"], [w[1], reduce(w[[2, 3, 4]], 0)], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(out["bags"], [reduce(w[[1, 2, 3]], 0), reduce(w[[4, 5, 6]], 0)], rtol=1e-5,
                                   atol=1e-6)
        np.testing.assert_array_equal(out["empty_bag"][1], 0)
        if "weighted" in out:
            np.testing.assert_allclose(out["weighted"], [0.5 * w[1] + 2 * w[2], -w[3]], rtol=1e-5, atol=1e-6)
        assert all(0 <= a <= 1 for a in out["acc"]) and out["warnings"] == []
    elif name == "lstm_classifier":
        assert out["resume_equal"] and out["cont"] == out["resumed"] and out["ckpt"] == (2, out["loss"][1])
        assert out["lr_after"][0] == out["lr_after"][1] and out["output_lengths_dtype"] == "int64"
        np.testing.assert_allclose(out["probs"].sum(-1), 1.0, rtol=1e-6)
        assert "lens [6, 4, 5, 5]" in out["printed"] and out["warnings"] == []
    elif name == "cell_generator":
        assert out["same_seed"] and out["sample_len"] == 10 and out["state_dtype"] == "uint8"
        assert out["loss"][-1] < out["loss"][0] and out["probs_dtype"] == "float32"
        np.testing.assert_allclose(out["probs_first"].sum(), 1.0, rtol=1e-6)
        assert out["greedy"][0] == out["greedy"][1] and out["gen_seed"] == 7 and out["warnings"] == []


VARIANTS = [("embedding_bag", {}), ("embedding_bag", dict(mode="sum")), ("embedding_bag", dict(mode="max")),
            ("lstm_classifier", {}), ("cell_generator", {}), ("cell_generator", dict(cell="GRUCell"))]


def _id(case):
    return case[0] + "".join(f"-{v}" for v in case[1].values())


@pytest.mark.parametrize("case", VARIANTS, ids=_id)
def test_script_runs_on_minidl_alone(case, tmp_path):
    name, kw = case
    _sanity(name, run(minidl, SCRIPTS[name], tmp_path, **kw), **kw)


@pytest.mark.parametrize("case", VARIANTS, ids=_id)
def test_script_matches_pytorch_from_the_same_weights(case, tmp_path):
    name, kw = case
    compare_with_torch(SCRIPTS[name], lambda out: _sanity(name, out, **kw), tmp_path, **kw)


def test_lstm_classifier_with_dropout_resumes_exactly_on_minidl(tmp_path):
    """Dropout masks drawn after the resume are the uninterrupted run's: the checkpoint carries
    torch.get_rng_state() and the resumed run sets it back."""
    _sanity("lstm_classifier", run(minidl, lstm_classifier_script, tmp_path, dropout=0.3))
