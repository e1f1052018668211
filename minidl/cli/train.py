"""``minidl train MODEL``: one training loop for every zoo model.

    python -m minidl train resnet8 --norm group --epochs 5 --out runs/rn8-gn
    python -m minidl train gpt --steps 800 --norm rms --norm-position pre --out runs/gpt
    python -m minidl train gpt --steps 1600 --out runs/gpt --resume     # continue to step 1600

Writes into --out: ``metrics.csv`` (one row per step: loss, lr, time, throughput),
``metrics.json`` (configuration, evaluations, summary), ``loss.png`` and ``checkpoint.npz``
(md.save: model, optimizer, scheduler, step, RNG state, metrics so far, configuration; at
each evaluation, at the end, and on Ctrl-C before exiting). ``--resume`` continues from the
checkpoint in --out with the architecture and hyper-parameters stored there; batches are a
function of (seed, step), so a resumed run reproduces the uninterrupted one exactly.
"""
import csv
import json
import math
import os
import time

from .. import optim, random
from ..io import load, save
from ..zoo import MODELS as CNN_MODELS
from ..zoo import NORMS as CNN_NORMS
from ..zoo.transformer import NORM_KINDS, NORM_POSITIONS
from .tasks import ImageTask, SeqTask, TextTask

TRANSFORMERS = ("gpt", "encoder", "vit")
MODEL_NAMES = tuple(sorted(CNN_MODELS)) + TRANSFORMERS
ALL_NORMS = tuple(dict.fromkeys(CNN_NORMS + NORM_KINDS))
CHECKPOINT = "checkpoint.npz"


class TrainError(ValueError):
    """A bad combination of arguments (reported by the CLI as an argparse error)."""


def valid_norms(model):
    if model in TRANSFORMERS:
        return tuple(n for n in NORM_KINDS if not (model == "gpt" and n == "batch"))
    return CNN_NORMS


def task_kind(model):
    return {"gpt": "text", "encoder": "seq"}.get(model, "image")


def add_arguments(p):
    p.add_argument("model", choices=MODEL_NAMES, help="a zoo model")
    p.add_argument("--data", default=None,
                   help="images: digits; gpt: pydoc (default) or a text file; encoder: count")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    g = p.add_mutually_exclusive_group()
    g.add_argument("--epochs", type=float, default=None, help="train this many epochs (default 1)")
    g.add_argument("--steps", type=int, default=None, help="train this many optimizer steps in total")
    p.add_argument("--batch-size", type=int, default=None, help="default 64 for images and sequences, 32 for text")
    p.add_argument("--lr", type=float, default=None, help="default 0.05 (SGD, CNNs) or 3e-3 (AdamW, Transformers)")
    p.add_argument("--optimizer", default=None, choices=("sgd", "adamw"))
    p.add_argument("--weight-decay", type=float, default=None)
    p.add_argument("--warmup", type=int, default=None, help="linear warm-up steps (default: 5%% of the steps)")
    p.add_argument("--norm", default=None, choices=ALL_NORMS, help="the model's normalization layer")
    p.add_argument("--norm-position", default=None, choices=NORM_POSITIONS, help="Transformers: pre, post or deepnorm")
    p.add_argument("--d-model", type=int, default=64, help="Transformers")
    p.add_argument("--n-layer", type=int, default=2, help="Transformers")
    p.add_argument("--n-head", type=int, default=4, help="Transformers")
    p.add_argument("--block-size", type=int, default=64, help="gpt: context length")
    p.add_argument("--width", type=int, default=16, help="resnets: channels of the first stage")
    p.add_argument("--eval-every", type=int, default=None, help="steps between evaluations (default: one epoch, "
                   "at most 200)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="output directory (default runs/train/MODEL)")
    p.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.npz")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


# building ----------------------------------------------------------------------------------
def model_config(args, task):
    """The constructor arguments of the model (stored in the checkpoint)."""
    m = args.model
    norm = args.norm
    if norm is not None and norm not in valid_norms(m):
        raise TrainError(f"--norm {norm!r} is not available for {m}; choose from {', '.join(valid_norms(m))}")
    if args.norm_position is not None and m not in TRANSFORMERS:
        raise TrainError(f"--norm-position applies to the Transformers ({', '.join(TRANSFORMERS)}), not {m}")
    if m in CNN_MODELS:
        cfg = {"in_channels": 1, "num_classes": 10, "norm": norm or ("none" if m == "lenet" else "batch")}
        if m == "lenet":
            cfg["input_size"] = 8
        if m.startswith("resnet"):
            cfg["width"] = args.width
        return cfg
    cfg = {"d_model": args.d_model, "n_layer": args.n_layer, "n_head": args.n_head, "norm": norm or "layer",
           "norm_position": args.norm_position or "pre", "dropout": 0.0}
    if m == "gpt":
        cfg.update(vocab_size=task.corpus.vocab_size, block_size=args.block_size)
    elif m == "encoder":
        cfg.update(vocab_size=task.task.vocab_size, num_classes=task.task.num_classes, max_len=task.max_len)
    else:
        cfg.update(image_size=8, patch_size=2, in_channels=1, num_classes=10)
    return cfg


def build_model(name, cfg):
    from .. import zoo
    if name in CNN_MODELS:
        return zoo.get_model(name, **cfg)
    if name == "gpt":
        return zoo.GPT(**cfg)
    if name == "encoder":
        return zoo.TransformerEncoderClassifier(**cfg)
    return zoo.ViT(**cfg)


def make_task(args, tokenizer=None):
    kind = task_kind(args.model)
    data = args.data
    if kind == "image":
        if data not in (None, "digits"):
            raise TrainError(f"--data {data!r}: image models train on 'digits'")
        return ImageTask(data, args.batch_size, args.seed, args.device)
    if kind == "seq":
        if data not in (None, "count"):
            raise TrainError(f"--data {data!r}: the encoder trains on 'count'")
        return SeqTask(data, args.batch_size, args.seed, args.device)
    if data not in (None, "pydoc") and not os.path.isfile(data):
        raise TrainError(f"--data {data!r}: expected 'pydoc' or the path of a text file")
    return TextTask(data, args.batch_size, args.seed, args.device, args.block_size, tokenizer)


def make_optimizer(args, model):
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    groups = [g for g in groups if g["params"]]
    if args.optimizer == "sgd":
        return optim.SGD(groups, lr=args.lr, momentum=0.9, nesterov=True)
    return optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.99))


def fill_defaults(args):
    transformer = args.model in TRANSFORMERS
    if args.batch_size is None:
        args.batch_size = 32 if args.model == "gpt" else 64
    if args.optimizer is None:
        args.optimizer = "adamw" if transformer else "sgd"
    if args.lr is None:
        args.lr = 3e-3 if args.optimizer == "adamw" else 0.05
    if args.weight_decay is None:
        args.weight_decay = 0.01 if args.optimizer == "adamw" else 5e-4
    if args.out is None:
        args.out = os.path.join("runs", "train", args.model)
    return args


# the loop ----------------------------------------------------------------------------------
def train_step(model, task, opt, sched, batch):
    """One optimizer step on ``batch``; returns the loss as a float."""
    loss = task.loss(model, batch)
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
    return float(loss.item())


# arguments a resumed run takes from its checkpoint (the rest, e.g. --steps, from the command line)
_STORED = ("data", "batch_size", "lr", "optimizer", "weight_decay", "warmup", "seed", "eval_every")


def run(args):
    """Train as ``args`` says; returns 0, or 130 when interrupted (after saving a checkpoint)."""
    ckpt = None
    if args.resume:
        args.out = args.out or os.path.join("runs", "train", args.model)
        ckpt_path = os.path.join(args.out, CHECKPOINT)
        if not os.path.exists(ckpt_path):
            raise TrainError(f"--resume: no checkpoint at {ckpt_path}")
        ckpt = load(ckpt_path)
        if ckpt.get("model_name") != args.model:
            raise TrainError(f"--resume: {ckpt_path} holds a {ckpt.get('model_name')!r} model, not {args.model!r}")
        for k in _STORED:
            setattr(args, k, ckpt["args"][k])
    fill_defaults(args)
    os.makedirs(args.out, exist_ok=True)
    ckpt_path = os.path.join(args.out, CHECKPOINT)
    task = make_task(args, tokenizer=ckpt.get("tokenizer") if ckpt else None)
    cfg = ckpt["config"] if ckpt else model_config(args, task)
    random.manual_seed(args.seed)
    model = build_model(args.model, cfg)
    if args.device != "cpu":
        try:
            model.to(args.device)
        except RuntimeError as exc:   # no GPU (and no simulator): say so as an argument error
            raise TrainError(f"--device {args.device}: {exc}") from None
    if args.steps is not None:
        total = args.steps
    else:
        total = max(1, int(round((args.epochs if args.epochs is not None else 1.0) * task.steps_per_epoch)))
    if total < 1:
        raise TrainError(f"--steps must be at least 1, got {total}")
    if args.warmup is None:
        args.warmup = max(1, total // 20) if total > 1 else 0
    if args.warmup > total:
        raise TrainError(f"--warmup {args.warmup} exceeds the {total} training steps")
    eval_every = args.eval_every or min(task.steps_per_epoch, 200)
    opt = make_optimizer(args, model)
    sched = optim.lr_scheduler.linear_warmup_cosine(opt, args.warmup, total, min_lr_ratio=0.1)
    history = {"step": [], "loss": [], "lr": [], "seconds": [], "throughput": []}
    evals = []
    start = 0
    if ckpt:
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        sched.load_state_dict(ckpt["scheduler"])
        random.set_rng_state(ckpt["rng"])
        history = {k: list(v) for k, v in ckpt["history"].items()}
        evals = list(ckpt["evals"])
        start = int(ckpt["step"])
    n_params = sum(p.numel() for p in model.parameters())
    print(f"{args.model} {cfg}: {n_params:,} parameters; {task.describe()}; steps {start}->{total} "
          f"(batch {args.batch_size}, {args.optimizer} lr {args.lr:g}, warm-up {args.warmup}); out {args.out}",
          flush=True)

    def checkpoint(step):
        blob = {"format": "minidl-train", "model_name": args.model, "config": cfg, "model": model.state_dict(),
                "optimizer": opt.state_dict(), "scheduler": sched.state_dict(), "step": step,
                "rng": random.get_rng_state(), "history": history, "evals": evals,
                "args": {k: getattr(args, k) for k in _STORED}}
        if task.kind == "text":
            blob["tokenizer"] = task.corpus.tokenizer.to_dict()
        save(blob, ckpt_path)

    bar = None
    if not args.no_progress and total > start:
        try:
            from tqdm import tqdm
            bar = tqdm(total=total, initial=start, unit="step", dynamic_ncols=True, leave=False)
        except ImportError:
            bar = None
    step = start
    status = 0
    try:
        while step < total:
            t0 = time.perf_counter()
            batch = task.batch(step)
            loss = train_step(model, task, opt, sched, batch)
            dt = time.perf_counter() - t0
            step += 1
            rate = task.items(batch) / dt
            for k, v in zip(history, (step, loss, opt.param_groups[0]["lr"], dt, rate)):
                history[k].append(v)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{loss:.4f}", **{f"{task.unit}_s": f"{rate:,.0f}"})
            if not math.isfinite(loss):
                raise FloatingPointError(f"the loss became {loss} at step {step}")
            if step % eval_every == 0 or step == total:
                metrics = task.evaluate(model)
                evals.append({"step": step, **metrics})
                msg = f"step {step}/{total}: train loss {loss:.4f}, " + ", ".join(
                    f"{k} {v:.4f}" for k, v in metrics.items())
                (bar.write if bar is not None else print)(msg)
                checkpoint(step)
    except KeyboardInterrupt:
        if bar is not None:
            bar.close()
            bar = None
        checkpoint(step)
        print(f"\ninterrupted at step {step}: checkpoint saved to {ckpt_path}; continue with --resume", flush=True)
        status = 130
    finally:
        if bar is not None:
            bar.close()
    if status == 0 and (not evals or evals[-1]["step"] != step):
        checkpoint(step)
    write_metrics(args, cfg, history, evals, n_params, status)
    return status


def write_metrics(args, cfg, history, evals, n_params, status):
    with open(os.path.join(args.out, "metrics.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(list(history))
        w.writerows(zip(*history.values()))
    summary = {"model": args.model, "config": cfg, "parameters": n_params, "steps": len(history["step"]),
               "final_loss": history["loss"][-1] if history["loss"] else None,
               "train_seconds": float(sum(history["seconds"])), "interrupted": status != 0,
               "last_eval": evals[-1] if evals else None}
    with open(os.path.join(args.out, "metrics.json"), "w") as f:
        json.dump({"summary": summary, "evals": evals, "args": {k: v for k, v in vars(args).items()
                                                                if not callable(v)}}, f, indent=2)
    try:
        plot_loss(history, evals, os.path.join(args.out, "loss.png"), f"{args.model} {cfg.get('norm', '')}")
    except ImportError:
        print('matplotlib is not installed: no loss plot (pip install "minidl[plot]")')
    if evals:
        print("final: " + ", ".join(f"{k} {v:.4f}" for k, v in evals[-1].items() if k != "step") +
              f" after {history['step'][-1]} steps ({summary['train_seconds']:.1f} s of training)")


def plot_loss(history, evals, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from ..lab._common import smooth
    fig, ax = plt.subplots(figsize=(7, 4))
    if history["step"]:
        ax.plot(history["step"], history["loss"], alpha=0.3, color="C0", label="train loss (batch)")
        ax.plot(history["step"], smooth(history["loss"], 20), color="C0", label="train loss (20-step mean)")
    keys = [k for k in (evals[0] if evals else {}) if k.endswith("loss")]
    for k in keys:
        ax.plot([e["step"] for e in evals], [e[k] for e in evals], "o-", color="C1", label=k.replace("_", " "))
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper right")
    if evals and "test_acc" in evals[0]:
        ax2 = ax.twinx()
        ax2.plot([e["step"] for e in evals], [100 * e["test_acc"] for e in evals], "s--", color="C2",
                 label="test accuracy")
        ax2.set_ylabel("test accuracy (%)")
        ax2.legend(loc="center right")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
