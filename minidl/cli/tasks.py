"""The data side of ``minidl train``: one task per kind of zoo model.

Each task knows its data, makes the batch of any step deterministically from (seed, step)
(so a run resumed from a checkpoint sees exactly the batches the uninterrupted run would),
computes the loss of a batch and evaluates a model.

- ImageTask ("digits"): the UCI digits, 8x8; epochs are permutations drawn from
  default_rng((seed, epoch)), drop_last; evaluation: test accuracy and loss (eval mode).
- TextTask ("pydoc" or a text file): a character-level corpus; random windows drawn from
  default_rng((seed, step)); evaluation: validation loss in nats/char over fixed batches.
- SeqTask ("count"): the synthetic variable-length classification task of the lab
  (minidl.lab.seqdata.CountTask), padded per batch; evaluation: accuracy on a fixed test set.

In a data-parallel run (``replicas`` of several ranks, minidl.train.replicas) ``--batch-size``
is per rank, as with PyTorch's DistributedDataParallel: each rank draws its own batch, the
images from its DistributedSampler shard of each epoch's order (ShardedImageTask, whose
checkpointed state holds the sampler's epoch), text windows and sequences from
default_rng((seed, step, rank)). Evaluation is the same on every rank (the models are).
"""
import numpy as np

from ..autograd import grad_mode
from ..nn import functional as F
from ..tensor.factories import tensor
from .args import UsageError


def _to(t, device):
    return t if device == "cpu" else t.to(device)


class ImageTask:
    kind = "image"
    datasets = ("digits",)
    unit = "img"

    def __init__(self, data, batch_size, seed, device):
        from ..data.digits import digits_arrays
        self.xtr, self.ytr = digits_arrays("train")
        self.xte, self.yte = digits_arrays("test")
        self.batch_size, self.seed, self.device = batch_size, seed, device
        n = self._per_rank()
        if batch_size > n:
            raise UsageError(f"--batch-size {batch_size} exceeds the {n} training images" + self._of_rank)
        self.steps_per_epoch = n // batch_size

    _of_rank = ""

    def _per_rank(self):
        return len(self.xtr)

    def _order(self, epoch):
        return np.random.default_rng((self.seed, epoch)).permutation(len(self.xtr))

    def describe(self):
        return f"digits: {len(self.xtr)} train / {len(self.xte)} test 8x8 images"

    def batch(self, step):
        epoch, i = divmod(step, self.steps_per_epoch)
        perm = self._order(epoch)
        idx = perm[i * self.batch_size:(i + 1) * self.batch_size]
        return _to(tensor(self.xtr[idx]), self.device), _to(tensor(self.ytr[idx]), self.device)

    def items(self, batch):
        return batch[0].shape[0]

    def loss(self, model, batch):
        return F.cross_entropy(model(batch[0]), batch[1])

    def evaluate(self, model):
        model.eval()
        with grad_mode.no_grad():
            logits = model(_to(tensor(self.xte), self.device))
            loss = float(F.cross_entropy(logits, _to(tensor(self.yte), self.device)).item())
            acc = float((logits.numpy(force=True).argmax(1) == self.yte).mean())
        model.train()
        return {"test_loss": loss, "test_acc": acc}


class ShardedImageTask(ImageTask):
    """ImageTask on one rank of ``replicas``: each epoch's order is the rank's shard of a
    DistributedSampler (shuffled by (seed, epoch), drop_last: every rank takes as many steps)."""

    def __init__(self, data, batch_size, seed, device, replicas):
        from ..utils.data.distributed import DistributedSampler
        from ..data.digits import digits_arrays
        n = len(digits_arrays("train")[0])
        self.sampler = DistributedSampler(range(n), num_replicas=replicas.world_size, rank=replicas.rank,
                                          shuffle=True, seed=seed, drop_last=True)
        self._of_rank = f" of rank {replicas.rank} (of {replicas.world_size})"
        self._cached = (None, None)
        super().__init__(data, batch_size, seed, device)

    def _per_rank(self):
        return len(self.sampler)

    def _order(self, epoch):
        if self._cached[0] != epoch:
            self.sampler.set_epoch(epoch)
            self._cached = (epoch, np.fromiter(iter(self.sampler), np.int64))
        return self._cached[1]

    def state_dict(self):
        return {"sampler_epoch": int(self.sampler.epoch)}

    def load_state_dict(self, state):
        self.sampler.set_epoch(int(state["sampler_epoch"]))


class TextTask:
    kind = "text"
    datasets = ("pydoc", "<path to a text file>")
    unit = "tok"

    def __init__(self, data, batch_size, seed, device, block_size, tokenizer=None, eval_batches=8, rank_key=()):
        from ..data.text import CharCorpus, CharTokenizer, load_text
        try:
            text = load_text(None if data in (None, "pydoc") else data)
            tok = CharTokenizer.from_dict(tokenizer) if tokenizer else None
            self.corpus = CharCorpus(text, tokenizer=tok, val_fraction=0.1)
        except (OSError, UnicodeDecodeError, KeyError) as exc:   # unreadable, not UTF-8, or not the stored vocabulary
            raise UsageError(f"--data {data}: {exc.args[0] if isinstance(exc, KeyError) else exc}") from None
        shortest = min(len(self.corpus.train), len(self.corpus.val))
        if block_size >= shortest:   # every window needs block_size + 1 characters of each split
            raise UsageError(f"--block-size {block_size}: the text's smaller split has {shortest} characters; "
                             f"expected a block size below that (a longer text or a smaller --block-size)")
        self.batch_size, self.seed, self.device, self.block_size = batch_size, seed, device, block_size
        self.eval_batches, self.rank_key = eval_batches, tuple(rank_key)   # (rank,) on each of several ranks
        self.steps_per_epoch = max(1, len(self.corpus.train) // (batch_size * block_size))

    def describe(self):
        return (f"text: {len(self.corpus.train):,} train / {len(self.corpus.val):,} val characters, "
                f"vocab {self.corpus.vocab_size}")

    def batch(self, step):
        x, y = self.corpus.batch("train", self.batch_size, self.block_size,
                                 generator=np.random.default_rng((self.seed, step) + self.rank_key))
        return _to(x, self.device), _to(y, self.device)

    def items(self, batch):
        return batch[0].shape[0] * batch[0].shape[1]

    def loss(self, model, batch):
        return model(*batch)[1]

    def evaluate(self, model):
        model.eval()
        rng = np.random.default_rng((self.seed, 2 ** 31))
        with grad_mode.no_grad():
            vals = []
            for _ in range(self.eval_batches):
                x, y = self.corpus.batch("val", self.batch_size, self.block_size, generator=rng)
                vals.append(float(model(_to(x, self.device), _to(y, self.device))[1].item()))
        model.train()
        return {"val_loss": float(np.mean(vals))}


class SeqTask:
    kind = "seq"
    datasets = ("count",)
    unit = "seq"

    def __init__(self, data, batch_size, seed, device, n_test=256, rank_key=()):
        from ..lab.seqdata import CountTask
        self.task = CountTask()
        self.batch_size, self.seed, self.device, self.rank_key = batch_size, seed, device, tuple(rank_key)
        self.test = self.task.sample(n_test, np.random.default_rng((seed, 2 ** 31)))
        self.steps_per_epoch = 100   # an endless generator: an "epoch" is 100 batches

    @property
    def max_len(self):
        return self.task.max_len

    def describe(self):
        return (f"count: synthetic sequences of length {self.task.min_len}-{self.task.max_len}, "
                f"{self.task.num_classes} classes, padded per batch")

    def batch(self, step):
        seqs, y = self.task.sample(self.batch_size, np.random.default_rng((self.seed, step) + self.rank_key))
        ids, kpm = self.task.pad(seqs)
        return _to(tensor(ids), self.device), kpm, _to(tensor(y), self.device)

    def items(self, batch):
        return batch[0].shape[0]

    def loss(self, model, batch):
        return F.cross_entropy(model(batch[0], batch[1]), batch[2])

    def evaluate(self, model):
        seqs, y = self.test
        model.eval()
        correct, losses = 0, []
        with grad_mode.no_grad():
            for i in range(0, len(seqs), 64):
                ids, kpm = self.task.pad(seqs[i:i + 64])
                logits = model(_to(tensor(ids), self.device), kpm)
                losses.append(float(F.cross_entropy(logits, _to(tensor(y[i:i + 64]), self.device),
                                                    reduction="sum").item()))
                correct += int((logits.numpy(force=True).argmax(1) == y[i:i + 64]).sum())
        model.train()
        return {"test_loss": sum(losses) / len(seqs), "test_acc": correct / len(seqs)}
