"""Train a zoo CNN on the UCI handwritten digits (8x8, 1,437 train / 360 test images).

    python examples/train_cnn.py --model resnet8 --norm batch --epochs 15
    python examples/train_cnn.py --model resnet8 --norm group --out runs/gn
    python examples/train_cnn.py --model lenet --epochs 40 --lr 0.003 --optimizer adam

Shows a progress bar (loss, images/s), evaluates test accuracy after each epoch, and writes
to --out: a plot of training loss and test accuracy (<model>_<norm>.png), a checkpoint
(<model>_<norm>.ckpt, md.save: model, optimizer, scheduler, RNG states, epoch and position in
it, history, arguments) after each epoch, and a JSON summary.

Ctrl-C or SIGTERM stops after the step in flight and saves the checkpoint there (mid-epoch),
exit status 130 (143). ``--resume CKPT`` continues exactly where it stopped, with the
hyper-parameters stored in CKPT: given again, a flag must agree with them, except
``--epochs`` (the run's new length), ``--out``, ``--device`` and ``--no-progress``.
Needs the extras: pip install "minidl[digits,plot]".
"""
import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import minidl as md  # noqa: E402
import minidl.nn.functional as F  # noqa: E402
from minidl import optim  # noqa: E402
from minidl.cli.args import (UsageError, check_resumed, check_run_length, given_options,  # noqa: E402
                             nonnegative_float, positive_float, positive_int, seed)
from minidl.cli.interrupt import StopRequest, saved_message, unsaved_message  # noqa: E402
from minidl.data import DataLoader, load_digits  # noqa: E402
from minidl.zoo import NORMS, get_model  # noqa: E402

CNN_MODELS = ("lenet", "vgg_small", "resnet8", "resnet20")
# what a resumed run takes from its checkpoint (given again, a flag must agree)
STORED = ("model", "norm", "batch_size", "lr", "optimizer", "weight_decay", "warmup_epochs", "augment", "seed")


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="resnet8", choices=CNN_MODELS)
    p.add_argument("--norm", default="batch", choices=NORMS)
    p.add_argument("--epochs", type=positive_int, default=15)
    p.add_argument("--batch-size", type=positive_int, default=64)
    p.add_argument("--lr", type=positive_float, default=0.05)
    p.add_argument("--optimizer", default="sgd", choices=("sgd", "adam", "adamw"))
    p.add_argument("--weight-decay", type=nonnegative_float, default=5e-4)
    p.add_argument("--warmup-epochs", type=nonnegative_float, default=1.0)
    p.add_argument("--augment", action="store_true", help="random shifts of up to one pixel")
    p.add_argument("--seed", type=seed, default=0)
    p.add_argument("--out", default="runs/train_cnn")
    p.add_argument("--resume", default=None, metavar="CKPT", help="a checkpoint written by this script")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    return p


def flag(dest):
    return "--" + dest.replace("_", "-")


def build_model(args):
    kw = dict(in_channels=1, num_classes=10, norm=args.norm)
    if args.model == "lenet":
        kw["input_size"] = 8
    return get_model(args.model, **kw)


def build_optimizer(args, model, steps_per_epoch):
    params = list(model.parameters())
    if args.optimizer == "sgd":
        opt = optim.SGD(params, lr=args.lr, momentum=0.9, nesterov=True, weight_decay=args.weight_decay)
    elif args.optimizer == "adam":
        opt = optim.Adam(params, lr=args.lr, weight_decay=args.weight_decay)
    else:
        opt = optim.AdamW(params, lr=args.lr, weight_decay=args.weight_decay)
    total = args.epochs * steps_per_epoch
    warmup = min(total, int(args.warmup_epochs * steps_per_epoch))
    sched = optim.lr_scheduler.linear_warmup_cosine(opt, warmup, total)
    return opt, sched


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
            correct += int((logits.numpy().argmax(1) == y.numpy()).sum())
            total += y.shape[0]
    model.train()
    return correct / total, loss_sum / total


def progress(iterable, total, desc, disable, initial=0):
    try:
        from tqdm import tqdm
    except ImportError:
        return iterable, None
    bar = tqdm(iterable, total=total, initial=initial, desc=desc, disable=disable, leave=False, dynamic_ncols=True)
    return bar, bar


def epoch_batches(loader, skip, rng_state):
    """The loader's batches from number ``skip`` on. The epoch's order is drawn from md's RNG
    when the first batch is asked for (the caller restores the RNG of the epoch's start), then
    the RNG is set to ``rng_state``, where the interrupted run was after batch ``skip``."""
    it = iter(loader)
    for _ in range(skip):
        next(it)
    if rng_state is not None:
        md.set_rng_state(rng_state)
    yield from it


def save_plot(history, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    steps = np.arange(1, len(history["step_loss"]) + 1) / max(1, history["steps_per_epoch"])
    ax1.plot(steps, history["step_loss"], lw=0.8, alpha=0.6, label="train loss (per step)")
    epochs = np.arange(1, len(history["test_acc"]) + 1)
    ax1.plot(epochs, history["test_loss"], "o-", ms=3, label="test loss")
    ax1.set_yscale("log")
    ax1.set_xlabel("epoch")
    ax1.set_ylabel("cross-entropy")
    ax1.legend()
    ax2.plot(epochs, 100 * np.asarray(history["test_acc"]), "o-", ms=3, color="C2")
    ax2.set_xlabel("epoch")
    ax2.set_ylabel("test accuracy (%)")
    ax2.set_ylim(max(0, 100 * min(history["test_acc"]) - 5), 100)
    ax2.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def read_resumed(parser, args, given):
    """The checkpoint of ``--resume``, with its stored arguments taken into ``args``."""
    try:
        ck = md.load(args.resume)
        stored = {flag(k): ck["args"][k] for k in STORED}
        check_resumed(args.resume, stored, {flag(k): getattr(args, k) for k in STORED if k in given})
    except (OSError, ValueError, KeyError, TypeError) as exc:   # unreadable, not this script's, or a conflict
        parser.error(str(exc) if isinstance(exc, UsageError) else f"--resume {args.resume}: {exc}")
    for k in STORED:
        setattr(args, k, ck["args"][k])
    if "epochs" not in given:
        args.epochs = ck["args"]["epochs"]
    return ck


def main(argv=None):
    parser = build_parser()
    args, given = given_options(parser, argv)
    ck = read_resumed(parser, args, given) if args.resume else None
    md.manual_seed(args.seed)
    train_set, test_set = load_digits("train"), load_digits("test")
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True)   # order from md's RNG
    test_loader = DataLoader(test_set, batch_size=256)
    n = len(train_loader)
    model = build_model(args).to(args.device)
    opt, sched = build_optimizer(args, model, n)
    aug_rng = np.random.default_rng(args.seed + 1)
    history = {"step_loss": [], "test_acc": [], "test_loss": [], "epoch_time": [], "steps_per_epoch": n}
    start_epoch, start_batch, partial = 0, 0, {"seconds": 0.0, "seen": 0}
    if ck:
        start_epoch, start_batch = int(ck["epoch"]), int(ck.get("batch", 0))
        asked = f"--epochs {args.epochs} ({args.epochs * n} steps)" if "epochs" in given else None
        try:
            if not check_run_length(args.resume, start_epoch * n + start_batch, args.epochs * n, asked):
                print(f"nothing to train: {args.resume} is complete after {start_epoch} epochs; "
                      f"give --epochs N with N > {start_epoch} to train longer")
                return None
        except UsageError as exc:
            parser.error(str(exc))
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
        sched.load_state_dict(ck["scheduler"])
        if args.epochs != ck["args"]["epochs"]:   # a new run length: this step's lr under the new schedule
            sched.last_epoch -= 1
            sched.step()
        md.set_rng_state(ck["rng"])
        aug_rng.bit_generator.state = ck["aug_rng"]
        history = ck["history"]
        partial = ck.get("partial", partial)
    os.makedirs(args.out, exist_ok=True)

    n_params = sum(p.numel() for p in model.parameters())
    tag = f"{args.model}_{args.norm}"
    ckpt_path = os.path.join(args.out, tag + ".ckpt")
    command = f"python examples/train_cnn.py --resume {ckpt_path} --out {args.out}"
    print(f"{tag}: {n_params:,} parameters, {len(train_set)} train / {len(test_set)} test images, "
          f"{args.epochs} epochs of {n} steps")

    def checkpoint(epoch, batch, epoch_rng=None):
        with stop.saving():
            md.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
                     "rng": md.get_rng_state(), "aug_rng": aug_rng.bit_generator.state, "epoch": epoch,
                     "batch": batch, "epoch_rng": epoch_rng, "partial": partial, "history": history,
                     "args": vars(args)}, ckpt_path)
        return epoch * n + batch

    t_start = time.perf_counter()
    saved = start_epoch * n + start_batch if ck else None   # the step the checkpoint on disk holds
    epoch, done = start_epoch, start_batch
    stop = StopRequest()
    with stop:
        try:
            for epoch in range(start_epoch, args.epochs):
                skip = done if epoch == start_epoch else 0
                if skip:
                    md.set_rng_state(ck["epoch_rng"])
                epoch_rng = md.get_rng_state()   # this epoch's order is drawn from here
                t0 = time.perf_counter() - partial["seconds"]
                seen, done = partial["seen"], skip
                bar_iter, bar = progress(epoch_batches(train_loader, skip, ck["rng"] if skip else None), n,
                                         f"epoch {epoch + 1}/{args.epochs}", args.no_progress, initial=skip)
                for x, y in bar_iter:
                    if args.augment:
                        x = shift_batch(x, aug_rng)
                    x, y = x.to(args.device), y.to(args.device)
                    loss = F.cross_entropy(model(x), y)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    sched.step()
                    seen += y.shape[0]
                    history["step_loss"].append(float(loss.item()))
                    done += 1
                    if bar is not None:
                        bar.set_postfix(loss=f"{history['step_loss'][-1]:.4f}",
                                        img_s=f"{seen / (time.perf_counter() - t0):.0f}")
                    if stop.requested and done < n:   # honoured between whole steps
                        break
                if bar is not None:
                    bar.close()
                if done < n:   # stopped mid-epoch: save the position in it
                    partial = {"seconds": time.perf_counter() - t0, "seen": seen}
                    saved = checkpoint(epoch, done, epoch_rng)
                    print(saved_message(stop, f"epoch {epoch + 1}, step {done}/{n}", ckpt_path, command))
                    raise SystemExit(stop.exit_status)
                partial = {"seconds": 0.0, "seen": 0}
                epoch_time = time.perf_counter() - t0
                acc, test_loss = evaluate(model, test_loader, args.device)
                history["test_acc"].append(acc)
                history["test_loss"].append(test_loss)
                history["epoch_time"].append(epoch_time)
                print(f"epoch {epoch + 1:3d}  train loss {np.mean(history['step_loss'][-n:]):.4f}  "
                      f"test loss {test_loss:.4f}  test acc {100 * acc:.2f}%  "
                      f"({epoch_time:.1f}s, {seen / epoch_time:.0f} img/s, lr {sched.get_last_lr()[0]:.4g})",
                      flush=True)
                saved = checkpoint(epoch + 1, 0)
                if stop.requested and epoch + 1 < args.epochs:
                    print(saved_message(stop, f"the end of epoch {epoch + 1}", ckpt_path, command))
                    raise SystemExit(stop.exit_status)
        except KeyboardInterrupt:   # a second Ctrl-C, mid-step: the state in memory is not a whole step
            where = f"epoch {epoch + 1}, step {done + 1}/{n}"
            print(unsaved_message(where, epoch * n + done, saved, ckpt_path, command))
            raise SystemExit(130) from None

    wall = time.perf_counter() - t_start
    summary = {"model": args.model, "norm": args.norm, "final_test_acc": history["test_acc"][-1],
               "best_test_acc": max(history["test_acc"]), "train_seconds": sum(history["epoch_time"]),
               "wall_seconds_this_run": wall, "epochs": args.epochs, "args": vars(args)}
    with open(os.path.join(args.out, tag + ".json"), "w") as f:
        json.dump(summary, f, indent=2)
    try:
        save_plot(history, os.path.join(args.out, tag + ".png"),
                  f"{args.model} ({args.norm} norm) on digits: final test acc "
                  f"{100 * history['test_acc'][-1]:.2f}%")
    except ImportError:
        print('matplotlib is not installed: no plot (pip install "minidl[plot]")')
    print(f"final test accuracy {100 * summary['final_test_acc']:.2f}% "
          f"(best {100 * summary['best_test_acc']:.2f}%), training time {summary['train_seconds']:.1f}s")
    return summary


if __name__ == "__main__":
    main()
