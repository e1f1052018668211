"""Character-level text data: a tokenizer, a corpus that needs no download, and LM batches.

- ``CharTokenizer``: one token per distinct character (sorted, so the same text always gives
  the same ids); ``encode``/``decode``; ``to_dict``/``from_dict`` and ``save``/``load`` as
  plain JSON (a list of characters, no pickle).
- ``load_text(path=None)``: a text file, or by default the Python documentation that ships
  with every CPython (``pydoc_data.topics.topics``: about 465,000 characters of English
  prose and code), its topics joined in sorted key order so the corpus is identical on
  every run and platform for one Python version.
- ``CharCorpus``: the text encoded once, split into a train and a validation part (the
  first and last fractions of the text, so no window crosses the split), and ``batch``:
  random (B, T) windows x and their next-character targets y, drawn from minidl.random's
  generator (so ``md.manual_seed`` makes a training run reproducible).
"""
import json

import numpy as np

from .. import random
from ..tensor.tensor import Tensor


class CharTokenizer:
    def __init__(self, chars):
        chars = list(chars)
        if len(set(chars)) != len(chars):
            raise ValueError("CharTokenizer: the characters must be distinct")
        if any(not isinstance(c, str) or len(c) != 1 for c in chars):
            raise ValueError("CharTokenizer: every vocabulary entry must be a single character")
        self.chars = chars
        self.stoi = {c: i for i, c in enumerate(chars)}

    @classmethod
    def from_text(cls, text):
        return cls(sorted(set(text)))

    @property
    def vocab_size(self):
        return len(self.chars)

    def __len__(self):
        return len(self.chars)

    def encode(self, text):
        """The ids of ``text`` as an int64 array; a character outside the vocabulary is an error."""
        try:
            return np.fromiter((self.stoi[c] for c in text), dtype=np.int64, count=len(text))
        except KeyError as exc:
            raise KeyError(f"CharTokenizer.encode: character {exc.args[0]!r} is not in the vocabulary "
                           f"of {self.vocab_size} characters") from None

    def decode(self, ids):
        """The text of a sequence of ids (a list, an int array or an int Tensor)."""
        if isinstance(ids, Tensor):
            ids = ids.numpy(force=True)
        ids = np.asarray(ids).reshape(-1)
        if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):
            raise ValueError(f"CharTokenizer.decode: ids must be in [0, {self.vocab_size}), "
                             f"got values in [{ids.min()}, {ids.max()}]")
        return "".join(self.chars[i] for i in ids.tolist())

    def to_dict(self):
        return {"type": "char", "chars": self.chars}

    @classmethod
    def from_dict(cls, d):
        if not isinstance(d, dict) or d.get("type") != "char" or "chars" not in d:
            raise ValueError("CharTokenizer.from_dict: expected {'type': 'char', 'chars': [...]}")
        return cls(d["chars"])

    def save(self, path):
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_dict(), f, ensure_ascii=True)

    @classmethod
    def load(cls, path):
        with open(path, encoding="utf-8") as f:
            return cls.from_dict(json.load(f))

    def __repr__(self):
        return f"CharTokenizer(vocab_size={self.vocab_size})"


def load_text(path=None):
    """The text of ``path`` (UTF-8), or the Python documentation topics bundled with CPython."""
    if path is not None:
        with open(path, encoding="utf-8") as f:
            return f.read()
    try:
        from pydoc_data.topics import topics
    except ImportError:  # some distributions strip it
        raise RuntimeError("load_text: this Python has no pydoc_data.topics; pass a text file path") from None
    return "\n\n".join(topics[key].strip() for key in sorted(topics)) + "\n"


class CharCorpus:
    """A text as token ids, split into train / validation, with random LM batches."""

    def __init__(self, text, tokenizer=None, val_fraction=0.1):
        if not 0.0 <= val_fraction < 1.0:
            raise ValueError(f"CharCorpus: val_fraction must be in [0, 1), got {val_fraction}")
        self.tokenizer = tokenizer or CharTokenizer.from_text(text)
        ids = self.tokenizer.encode(text)
        n_val = int(len(ids) * val_fraction)
        self.train = ids[:len(ids) - n_val]
        self.val = ids[len(ids) - n_val:]

    @classmethod
    def from_file(cls, path=None, val_fraction=0.1):
        return cls(load_text(path), val_fraction=val_fraction)

    @property
    def vocab_size(self):
        return self.tokenizer.vocab_size

    def batch(self, split, batch_size, block_size, generator=None):
        """(x, y): int64 Tensors of shape (batch_size, block_size), y = x shifted by one,
        at uniformly random offsets into the ``split`` ("train" or "val") ids."""
        data = {"train": self.train, "val": self.val}.get(split)
        if data is None:
            raise ValueError(f"CharCorpus.batch: split must be 'train' or 'val', got {split!r}")
        if len(data) <= block_size:
            raise ValueError(f"CharCorpus.batch: the {split} split has {len(data)} tokens, too few for "
                             f"block_size {block_size}")
        rng = generator or random.generator()
        starts = rng.integers(0, len(data) - block_size, size=batch_size)
        idx = starts[:, None] + np.arange(block_size + 1)[None, :]
        win = data[idx]
        x, y = np.ascontiguousarray(win[:, :-1]), np.ascontiguousarray(win[:, 1:])
        return Tensor._wrap(x, None, 0), Tensor._wrap(y, None, 0)
