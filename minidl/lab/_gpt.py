"""Small character-level GPT runs shared by the Transformer experiments (rmsnorm, pre-post,
deepnorm): the zoo GPT on the bundled Python documentation text, AdamW, a linear warm-up to
a constant learning rate, no gradient clipping (clipping would hide the instabilities these
experiments are about). Batches for step t come from a generator seeded by (seed, t), so
every configuration sees the same data in the same order."""
import functools
import math

import numpy as np

from .. import optim, random
from ..data.text import CharCorpus, load_text
from ..zoo.gpt import GPT
from ._common import progress


@functools.lru_cache(maxsize=1)
def corpus():
    return CharCorpus(load_text(None), val_fraction=0.1)


def make_gpt(seed=0, **cfg):
    random.manual_seed(seed)
    return GPT(vocab_size=corpus().vocab_size, **cfg)


def warmup_constant(opt, warmup):
    return optim.lr_scheduler.LambdaLR(opt, lambda t: min(1.0, (t + 1) / warmup) if warmup > 0 else 1.0)


def train_gpt(model, steps, lr, warmup=0, batch_size=8, seed=0, eval_batches=4, diverge_at=None,
              betas=(0.9, 0.99), before_step=None, desc=None):
    """Train ``model`` for ``steps`` steps; returns a dict with the per-step training losses,
    the final validation loss (nats/char, mean over ``eval_batches`` fixed batches) and
    whether the run diverged (a non-finite loss, or one above ``diverge_at``; training stops).
    ``before_step(t)``, when given, runs before step t (an experiment's probe)."""
    data = corpus()
    T = model.block_size
    opt = optim.AdamW(model.parameters(), lr=lr, betas=betas, weight_decay=0.0)
    sched = warmup_constant(opt, warmup)
    losses, diverged = [], False
    limit = diverge_at if diverge_at is not None else 2 * math.log(data.vocab_size)
    model.train()
    for t in progress(range(steps), desc or f"GPT ({model.n_layer} layers), lr {lr:g}, warm-up {warmup}"):
        if before_step is not None:
            before_step(t)
        x, y = data.batch("train", batch_size, T, generator=np.random.default_rng((seed, t)))
        _, loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        v = float(loss.item())
        losses.append(v)
        if not math.isfinite(v) or v > limit:
            diverged = True
            break
    return {"losses": losses, "val": float("nan") if diverged else evaluate(model, eval_batches, batch_size),
            "diverged": diverged}


def evaluate(model, batches, batch_size, seed=12345):
    from ..autograd import grad_mode
    data = corpus()
    model.eval()
    rng = np.random.default_rng(seed)
    with grad_mode.no_grad():
        vals = [float(model(*data.batch("val", batch_size, model.block_size, generator=rng))[1].item())
                for _ in range(batches)]
    model.train()
    return float(np.mean(vals))
