"""A synthetic variable-length sequence classification task (no download), for the encoder.

Token 0 is padding; tokens 1..K are the K class markers; the rest are filler. A sequence of
length L (uniform in [min_len, max_len]) is filler with its class marker c placed ``hits``
times and every other marker fewer times, so the label is "the most frequent marker": a
mean over the real tokens answers it, and padding that leaks into any statistic disturbs it.
"""
import numpy as np

PAD = 0


class CountTask:
    def __init__(self, num_classes=4, vocab_size=16, min_len=4, max_len=24, hits=3):
        if vocab_size <= num_classes + 1:
            raise ValueError(f"CountTask: vocab_size {vocab_size} leaves no filler tokens for {num_classes} classes")
        if min_len < hits:
            raise ValueError(f"CountTask: min_len {min_len} is shorter than hits {hits}")
        self.num_classes, self.vocab_size = num_classes, vocab_size
        self.min_len, self.max_len, self.hits = min_len, max_len, hits

    def sample(self, n, rng):
        """(list of n int64 token arrays of varying length, labels (n,) int64)."""
        K = self.num_classes
        labels = rng.integers(0, K, n)
        seqs = []
        for c in labels:
            L = int(rng.integers(self.min_len, self.max_len + 1))
            s = rng.integers(K + 1, self.vocab_size, L)
            counts = {k: (self.hits if k == c else int(rng.integers(0, self.hits))) for k in range(K)}
            pos = rng.permutation(L)
            i = 0
            for k, cnt in counts.items():
                take = min(cnt, L - i) if k != c else cnt
                s[pos[i:i + take]] = k + 1
                i += take
            seqs.append(s.astype(np.int64))
        return seqs, labels.astype(np.int64)

    @staticmethod
    def pad(seqs, length=None):
        """(ids (B, T) padded with PAD, mask (B, T) True at padding); T = the longest or ``length``."""
        T = max(len(s) for s in seqs) if length is None else int(length)
        if T < max(len(s) for s in seqs):
            raise ValueError(f"CountTask.pad: length {T} is shorter than the longest sequence")
        ids = np.full((len(seqs), T), PAD, np.int64)
        for i, s in enumerate(seqs):
            ids[i, :len(s)] = s
        return ids, ids == PAD
