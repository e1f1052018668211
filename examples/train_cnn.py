"""Train a zoo CNN on the UCI handwritten digits (8x8, 1,437 train / 360 test images).

    python examples/train_cnn.py --model resnet8 --norm batch --epochs 15
    python examples/train_cnn.py --model resnet8 --norm group --out runs/gn
    python examples/train_cnn.py --model lenet --epochs 40 --lr 0.003 --optimizer adam

Shows a progress bar (loss, images/s), evaluates test accuracy after each epoch, and writes
to --out: a plot of training loss and test accuracy (<model>_<norm>.png), a checkpoint
(<model>_<norm>.ckpt, md.save: model, optimizer, scheduler, RNG, epoch, history) and a
JSON summary. ``--resume`` continues from a checkpoint exactly where it stopped.
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
from minidl.data import DataLoader, load_digits  # noqa: E402
from minidl.zoo import NORMS, get_model  # noqa: E402

CNN_MODELS = ("lenet", "vgg_small", "resnet8", "resnet20")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="resnet8", choices=CNN_MODELS)
    p.add_argument("--norm", default="batch", choices=NORMS)
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--optimizer", default="sgd", choices=("sgd", "adam", "adamw"))
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--warmup-epochs", type=float, default=1.0)
    p.add_argument("--augment", action="store_true", help="random shifts of up to one pixel")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="runs/train_cnn")
    p.add_argument("--resume", default=None, help="a checkpoint written by this script")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    return p.parse_args(argv)


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


def progress(iterable, total, desc, disable):
    try:
        from tqdm import tqdm
    except ImportError:
        return iterable, None
    bar = tqdm(iterable, total=total, desc=desc, disable=disable, leave=False, dynamic_ncols=True)
    return bar, bar


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


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    md.manual_seed(args.seed)
    train_set, test_set = load_digits("train"), load_digits("test")
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True)   # order from md's RNG
    test_loader = DataLoader(test_set, batch_size=256)
    model = build_model(args).to(args.device)
    opt, sched = build_optimizer(args, model, len(train_loader))
    aug_rng = np.random.default_rng(args.seed + 1)
    history = {"step_loss": [], "test_acc": [], "test_loss": [], "epoch_time": [],
               "steps_per_epoch": len(train_loader)}
    start_epoch = 0
    if args.resume:
        ck = md.load(args.resume)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
        sched.load_state_dict(ck["scheduler"])
        md.set_rng_state(ck["rng"])
        aug_rng.bit_generator.state = ck["aug_rng"]
        history, start_epoch = ck["history"], ck["epoch"]

    n_params = sum(p.numel() for p in model.parameters())
    tag = f"{args.model}_{args.norm}"
    print(f"{tag}: {n_params:,} parameters, {len(train_set)} train / {len(test_set)} test images, "
          f"{args.epochs} epochs of {len(train_loader)} steps")
    t_start = time.perf_counter()
    for epoch in range(start_epoch, args.epochs):
        t0 = time.perf_counter()
        seen = 0
        bar_iter, bar = progress(train_loader, len(train_loader), f"epoch {epoch + 1}/{args.epochs}",
                                 args.no_progress)
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
            if bar is not None:
                bar.set_postfix(loss=f"{history['step_loss'][-1]:.4f}",
                                img_s=f"{seen / (time.perf_counter() - t0):.0f}")
        if bar is not None:
            bar.close()
        epoch_time = time.perf_counter() - t0
        acc, test_loss = evaluate(model, test_loader, args.device)
        history["test_acc"].append(acc)
        history["test_loss"].append(test_loss)
        history["epoch_time"].append(epoch_time)
        n = len(train_loader)
        print(f"epoch {epoch + 1:3d}  train loss {np.mean(history['step_loss'][-n:]):.4f}  "
              f"test loss {test_loss:.4f}  test acc {100 * acc:.2f}%  "
              f"({epoch_time:.1f}s, {seen / epoch_time:.0f} img/s, lr {sched.get_last_lr()[0]:.4g})", flush=True)
        md.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
                 "rng": md.get_rng_state(), "aug_rng": aug_rng.bit_generator.state, "epoch": epoch + 1,
                 "history": history, "args": vars(args)}, os.path.join(args.out, tag + ".ckpt"))

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
