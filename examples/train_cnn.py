"""Train a zoo CNN on the UCI handwritten digits (8x8, 1,437 train / 360 test images).

    python examples/train_cnn.py --model resnet8 --norm batch --epochs 15
    python examples/train_cnn.py --model resnet8 --norm group --out runs/gn
    python examples/train_cnn.py --model lenet --epochs 40 --lr 0.003 --optimizer adam
    python examples/train_cnn.py --out runs/gn --resume            # continue a stopped run

The model, the data and the optimizer are built here; minidl.train's loop (the one behind
``minidl train``) trains them: a progress bar (loss, images/s), test accuracy after each epoch,
and in --out: ``checkpoint.npz`` (after each epoch and when stopped), ``metrics.csv``,
``metrics.json`` and ``loss.png``.

Ctrl-C or SIGTERM stops after the step in flight and saves it (mid-epoch too), exit status
130 (143). ``--resume`` continues exactly where it stopped, with the hyper-parameters stored
in the checkpoint: given again, a flag must agree with them, except ``--epochs``/``--steps``
(the run's new length), ``--eval-every``, ``--device`` and ``--no-progress``.
Needs the extras: pip install "minidl[digits,plot]".
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import minidl as md  # noqa: E402
import minidl.nn.functional as F  # noqa: E402
from minidl import optim, train  # noqa: E402
from minidl.cli.args import nonnegative_float, positive_float, positive_int  # noqa: E402
from minidl.data import DataLoader, load_digits  # noqa: E402
from minidl.zoo import NORMS, get_model  # noqa: E402

PROGRAM = "examples/train_cnn.py"
CNN_MODELS = ("lenet", "vgg_small", "resnet8", "resnet20")
# what a resumed run takes from its checkpoint (given again, a flag must agree)
STORED = ("model", "norm", "batch_size", "lr", "optimizer", "weight_decay", "warmup_epochs", "augment", "seed")


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="resnet8", choices=CNN_MODELS)
    p.add_argument("--norm", default="batch", choices=NORMS)
    p.add_argument("--batch-size", type=positive_int, default=64)
    p.add_argument("--lr", type=positive_float, default=0.05)
    p.add_argument("--optimizer", default="sgd", choices=("sgd", "adam", "adamw"))
    p.add_argument("--weight-decay", type=nonnegative_float, default=5e-4)
    p.add_argument("--warmup-epochs", type=nonnegative_float, default=1.0)
    p.add_argument("--augment", action="store_true", help="random shifts of up to one pixel")
    train.add_arguments(p, out="runs/train_cnn", length="15 epochs")
    return p


def build_model(args):
    kw = dict(in_channels=1, num_classes=10, norm=args.norm)
    if args.model == "lenet":
        kw["input_size"] = 8
    return get_model(args.model, **kw), kw


def build_optimizer(args, model, steps, steps_per_epoch):
    params = list(model.parameters())
    if args.optimizer == "sgd":
        opt = optim.SGD(params, lr=args.lr, momentum=0.9, nesterov=True, weight_decay=args.weight_decay)
    elif args.optimizer == "adam":
        opt = optim.Adam(params, lr=args.lr, weight_decay=args.weight_decay)
    else:
        opt = optim.AdamW(params, lr=args.lr, weight_decay=args.weight_decay)
    warmup = min(steps, int(args.warmup_epochs * steps_per_epoch))
    return opt, optim.lr_scheduler.linear_warmup_cosine(opt, warmup, steps)


def shift_batch(x, rng):
    """Random translation by -1, 0 or +1 pixel in each direction (zero fill), per image."""
    a = x.numpy()
    n, _, h, w = a.shape
    padded = np.pad(a, ((0, 0), (0, 0), (1, 1), (1, 1)))
    dy, dx = rng.integers(0, 3, n), rng.integers(0, 3, n)
    rows = dy[:, None] + np.arange(h)[None, :]
    cols = dx[:, None] + np.arange(w)[None, :]
    out = padded[np.arange(n)[:, None, None, None], np.arange(a.shape[1])[None, :, None, None],
                 rows[:, None, :, None], cols[:, None, None, :]]
    return md.from_numpy(np.ascontiguousarray(out))


def evaluate(model, loader, device):
    model.eval()
    correct = total = 0
    loss_sum = 0.0
    with md.no_grad():
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            logits = model(x)
            loss_sum += float(F.cross_entropy(logits, y, reduction="sum").item())
            correct += int((logits.cpu().numpy().argmax(1) == y.cpu().numpy()).sum())
            total += y.shape[0]
    model.train()
    return {"test_loss": loss_sum / total, "test_acc": correct / total}


def main(argv=None):
    parser = build_parser()
    args, given = train.given_options(parser, argv)
    try:   # a bad --out, a checkpoint this script did not write, a flag that disagrees with it: exit status 2
        run = train.Run(args.out, PROGRAM, resume=args.resume, device=args.device)
        run.adopt(args, STORED, given)
        md.manual_seed(args.seed)
        train_loader = DataLoader(load_digits("train"), batch_size=args.batch_size, shuffle=True)  # md's RNG
        test_loader = DataLoader(load_digits("test"), batch_size=256)
        steps = run.length(args.steps, args.epochs, len(train_loader), default_epochs=15)
        model, config = build_model(args)
        model.to(args.device)
        opt, sched = build_optimizer(args, model, steps, len(train_loader))
    except train.UsageError as exc:
        parser.error(str(exc))
    print(f"{args.model} ({args.norm} norm) on digits: {len(train_loader.dataset)} train / "
          f"{len(test_loader.dataset)} test images, {steps} steps of batch {args.batch_size}")

    def prepare(batch, step):
        x, y = batch
        if args.augment:   # shifts drawn from (seed, step): a resumed run draws the same
            x = shift_batch(x, np.random.default_rng((args.seed, step)))
        return x.to(args.device), y.to(args.device)

    return train.fit(run, model, opt, sched, train.EpochBatches(train_loader, prepare),
                     lambda batch: F.cross_entropy(model(batch[0]), batch[1]), steps,
                     evaluate=lambda: evaluate(model, test_loader, args.device),
                     eval_every=args.eval_every or len(train_loader), progress=not args.no_progress, unit="img",
                     args=args, config=config, title=f"{args.model} ({args.norm} norm) on digits")


if __name__ == "__main__":
    raise SystemExit(main().status)
