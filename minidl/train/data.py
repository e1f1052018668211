"""A DataLoader as the trainer's data: the batch of any step, resumable exactly.

The trainer asks its data for ``batch(step)``. Data made from (seed, step) (as ``minidl
train``'s tasks are) resumes by itself; a shuffling DataLoader does not, since it draws each
epoch's order from minidl's RNG (``md.manual_seed``) when its iteration starts. EpochBatches
keeps the RNG state of that moment (``state_dict``, saved with the checkpoint), so a run
resumed mid-epoch draws the same order again, skips to its position, and then continues with
the RNG as the checkpoint left it: every later draw (dropout, the next epochs' orders) is
the one the uninterrupted run made. A DataLoader with its own ``seed`` is told the epoch
(``set_epoch``) instead.
"""
from .. import random


class EpochBatches:
    """Step ``t`` is batch ``t % n`` of epoch ``t // n`` of ``loader`` (n = len(loader)), passed
    through ``transform(batch, step)`` when given (moving it to a device, augmenting it: draw
    from a generator seeded by the step so that a resumed run draws the same)."""

    def __init__(self, loader, transform=None):
        self.loader, self.transform = loader, transform
        self.steps_per_epoch = len(loader)
        if self.steps_per_epoch == 0:
            raise ValueError("EpochBatches: the loader yields no batches (an empty dataset, or drop_last with "
                             "fewer samples than one batch)")
        self._it, self._next = None, None   # the epoch being iterated and the step it yields next
        self._epoch_rng = None              # minidl's RNG state when that epoch's order was drawn

    def batch(self, step):
        if self._it is None or step != self._next:
            self._start(step)
        batch = next(self._it)
        self._next = step + 1
        if self._next % self.steps_per_epoch == 0:
            self._it = None
        return batch if self.transform is None else self.transform(batch, step)

    def _start(self, step):
        epoch, position = divmod(step, self.steps_per_epoch)
        if hasattr(self.loader, "set_epoch"):
            self.loader.set_epoch(epoch)
        if position == 0:
            self._epoch_rng = random.get_rng_state()
            self._it = iter(self.loader)
            return
        if self._epoch_rng is None:
            raise ValueError(f"EpochBatches: cannot start at step {step}, inside epoch {epoch}, without the RNG "
                             "state of the epoch's start (load_state_dict of the checkpoint's data state)")
        now = random.get_rng_state()
        random.set_rng_state(self._epoch_rng)
        self._it = iter(self.loader)
        for _ in range(position):   # the order is drawn at the first batch; skip those trained already
            next(self._it)
        random.set_rng_state(now)

    def state_dict(self):
        return {"epoch_rng": self._epoch_rng}

    def load_state_dict(self, state):
        self._epoch_rng = state["epoch_rng"]
        self._it = self._next = None
