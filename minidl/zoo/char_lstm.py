"""A character-level LSTM language model (Graves 2013; Karpathy's char-rnn), the recurrent
counterpart of the zoo's GPT on the same text corpus.

    model = CharLSTM(vocab_size=96, embed_dim=64, hidden_size=256, num_layers=2)
    logits, loss = model(idx, targets)          # idx, targets (B, T) int64; loss: mean NLL in nats
    out = model.generate(idx, max_new_tokens=200, temperature=0.8, top_k=10)

embedding -> dropout -> nn.LSTM (batch_first, dropout between layers) -> dropout -> linear head.
``norm="layer"`` / ``"batch"`` put nn.LayerNormLSTM / nn.BatchNormLSTM in the LSTM's place.
Unlike GPT there is no context window: ``generate`` reads the prompt once and then feeds one
token at a time, carrying the LSTM's (h, c), so each new token costs one step whatever the
length so far. ``forward(idx, targets)`` starts from a zero state, as GPT's returns (logits,
loss); ``step(idx, state)`` is the stateful form, (logits, new state), for truncated BPTT.
"""
import numpy as np

from .. import nn
from ..nn import functional as F
from ..tensor.tensor import Tensor
from .gpt import _ids, sample_tokens


NORMS = ("none", "layer", "batch")


class CharLSTM(nn.Module):
    def __init__(self, vocab_size, embed_dim=64, hidden_size=256, num_layers=2, dropout=0.0, norm="none"):
        super().__init__()
        if norm not in NORMS:
            raise ValueError(f"CharLSTM: norm must be one of {', '.join(NORMS)}, got {norm!r}")
        self.vocab_size, self.embed_dim, self.hidden_size = int(vocab_size), int(embed_dim), int(hidden_size)
        self.num_layers, self.norm = int(num_layers), norm
        self.tok_emb = nn.Embedding(self.vocab_size, self.embed_dim)
        self.drop = nn.Dropout(dropout)
        layer = {"none": nn.LSTM, "layer": nn.LayerNormLSTM, "batch": nn.BatchNormLSTM}[norm]
        self.lstm = layer(self.embed_dim, self.hidden_size, self.num_layers, batch_first=True,
                          dropout=dropout if self.num_layers > 1 else 0.0)
        self.head = nn.Linear(self.hidden_size, self.vocab_size)

    def step(self, idx, state=None, start=0):
        """(logits (B, T, vocab), (h, c)) continuing from ``state`` (None: zeros); ``start``: the
        position of idx's first token in the sequence (BatchNormLSTM's statistics are per step)."""
        x = self.drop(self.tok_emb(_ids(idx)))
        y, state = self.lstm(x, state) if self.norm == "none" else self.lstm(x, state, start=start)
        return self.head(self.drop(y)), state

    def forward(self, idx, targets=None):
        """(logits (B, T, vocab), loss or None): mean cross-entropy over every position."""
        idx = _ids(idx)
        if idx.ndim != 2:
            raise ValueError(f"CharLSTM: expected token ids of shape (B, T), got {list(idx.shape)}")
        B, T = idx.shape
        logits, _ = self.step(idx)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(B * T, self.vocab_size), _ids(targets).reshape(B * T))
        return logits, loss

    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
        """Extend idx (B, T) by ``max_new_tokens`` tokens sampled from softmax(logits / temperature)
        (restricted to the ``top_k`` most likely when given; temperature=0 is greedy), one LSTM
        step per token. Draws from minidl.random's generator (``md.manual_seed`` repeats it)."""
        state = None

        def next_logits(ids):   # the whole prompt once, then only the newest token
            nonlocal state
            if state is None:
                logits, state = self.step(Tensor._wrap(ids, None, 0))
            else:
                logits, state = self.step(Tensor._wrap(np.ascontiguousarray(ids[:, -1:]), None, 0), state,
                                          start=ids.shape[1] - 1)
            return logits
        return sample_tokens(self, idx, max_new_tokens, temperature, top_k, next_logits)

    def num_parameters(self):
        return sum(p.numel() for p in self.parameters())
