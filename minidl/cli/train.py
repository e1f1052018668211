"""``minidl train MODEL``: one training loop for every zoo model.

    python -m minidl train resnet8 --norm group --epochs 5 --out runs/rn8-gn
    python -m minidl train gpt --steps 800 --norm rms --norm-position pre --out runs/gpt
    python -m minidl train gpt --out runs/gpt --resume                  # continue an interrupted run
    python -m minidl train gpt --steps 1600 --out runs/gpt --resume     # extend it to step 1600

Writes into --out: ``metrics.csv`` (one row per step: loss, lr, time, throughput),
``metrics.json`` (configuration, evaluations, summary), ``loss.png`` and ``checkpoint.npz``
(md.save: model, optimizer, scheduler, step, run length, RNG state, metrics so far,
configuration), at each evaluation, at the end, and when stopped.

Ctrl-C or SIGTERM stops at the end of the step in flight (see minidl.cli.interrupt): the
checkpoint holds that whole step and the exit status is 130 (143 for SIGTERM). ``--resume``
continues from the checkpoint in --out with the architecture, hyper-parameters and run
length stored there; batches are a function of (seed, step), so a resumed run reproduces the
uninterrupted one exactly. At resume ``--steps``/``--epochs`` set a new run length (the
learning-rate schedule is recomputed for it from the current step on), ``--eval-every``,
``--device`` and ``--no-progress`` may change, and any other hyper-parameter flag must agree
with the stored value. Resuming a complete run trains nothing and rewrites nothing.
"""
import csv
import json
import math
import os
import shlex
import time

from .. import optim, random
from ..io import CheckpointError, load, save
from ..zoo import MODELS as CNN_MODELS
from ..zoo import NORMS as CNN_NORMS
from ..zoo.transformer import NORM_KINDS, NORM_POSITIONS
from .args import (UsageError, check_heads, check_resumed, check_run_length, nonnegative_float, nonnegative_int,
                   positive_float, positive_int, same_data, seed)
from .interrupt import StopRequest, saved_message, unsaved_message
from .tasks import ImageTask, SeqTask, TextTask

TRANSFORMERS = ("gpt", "encoder", "vit")
MODEL_NAMES = tuple(sorted(CNN_MODELS)) + TRANSFORMERS
RESNETS = tuple(m for m in MODEL_NAMES if m.startswith("resnet"))
ALL_NORMS = tuple(dict.fromkeys(CNN_NORMS + NORM_KINDS))
CHECKPOINT = "checkpoint.npz"
ARCH_DEFAULTS = {"d_model": 64, "n_layer": 2, "n_head": 4, "block_size": 64, "width": 16}
ARCH_HELP = {"d_model": "Transformers", "n_layer": "Transformers", "n_head": "Transformers",
             "block_size": "gpt: context length", "width": "resnets: channels of the first stage"}
_T = (f"the Transformers ({', '.join(TRANSFORMERS)})", TRANSFORMERS)
APPLIES_TO = {"d_model": _T, "n_layer": _T, "n_head": _T, "norm_position": _T, "block_size": ("gpt", ("gpt",)),
              "width": (f"the ResNets ({', '.join(RESNETS)})", RESNETS)}
DEFAULT_DATA = {"image": "digits", "seq": "count", "text": "pydoc"}


class TrainError(UsageError):
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
    g.add_argument("--epochs", type=positive_float, default=None,
                   help="train this many epochs (default 1); with --resume: the run's new length")
    g.add_argument("--steps", type=positive_int, default=None,
                   help="train this many optimizer steps in total; with --resume: the run's new length")
    p.add_argument("--batch-size", type=positive_int, default=None,
                   help="default 64 for images and sequences, 32 for text")
    p.add_argument("--lr", type=positive_float, default=None,
                   help="default 0.05 (SGD, CNNs) or 3e-3 (AdamW, Transformers)")
    p.add_argument("--optimizer", default=None, choices=("sgd", "adamw"))
    p.add_argument("--weight-decay", type=nonnegative_float, default=None)
    p.add_argument("--warmup", type=nonnegative_int, default=None,
                   help="linear warm-up steps (default: 5%% of the steps)")
    p.add_argument("--norm", default=None, choices=ALL_NORMS, help="the model's normalization layer")
    p.add_argument("--norm-position", default=None, choices=NORM_POSITIONS, help="Transformers: pre, post or deepnorm")
    for dest, default in ARCH_DEFAULTS.items():
        p.add_argument("--" + dest.replace("_", "-"), type=positive_int, default=None,
                       help=f"{ARCH_HELP[dest]} (default {default})")
    p.add_argument("--eval-every", type=positive_int, default=None, help="steps between evaluations (default: one "
                   "epoch, at most 200)")
    p.add_argument("--seed", type=seed, default=None, help="default 0")
    p.add_argument("--out", default=None, help="output directory (default runs/train/MODEL)")
    p.add_argument("--resume", action="store_true", help="continue the run whose checkpoint is in --out")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def flag(dest):
    return "--" + dest.replace("_", "-")


def check_applicable(args):
    """A model flag given to a model it does not shape is an error, not silently ignored."""
    for dest, (label, models) in APPLIES_TO.items():
        if getattr(args, dest) is not None and args.model not in models:
            raise TrainError(f"{flag(dest)} applies to {label}, not {args.model}")
    norm = args.norm
    if norm is not None and norm not in valid_norms(args.model):
        raise TrainError(f"--norm {norm!r} is not available for {args.model}; choose from "
                         f"{', '.join(valid_norms(args.model))}")


# building ----------------------------------------------------------------------------------
def model_config(args, task):
    """The constructor arguments of the model (stored in the checkpoint)."""
    m = args.model
    norm = args.norm
    if m in CNN_MODELS:
        cfg = {"in_channels": 1, "num_classes": 10, "norm": norm or ("none" if m == "lenet" else "batch")}
        if m == "lenet":
            cfg["input_size"] = 8
        if m.startswith("resnet"):
            cfg["width"] = args.width
        return cfg
    check_heads(args.d_model, args.n_head)
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
    try:
        if name in CNN_MODELS:
            return zoo.get_model(name, **cfg)
        if name == "gpt":
            return zoo.GPT(**cfg)
        if name == "encoder":
            return zoo.TransformerEncoderClassifier(**cfg)
        return zoo.ViT(**cfg)
    except ValueError as exc:   # the constructors validate their arguments: those came from flags
        raise TrainError(f"cannot build {name} with {cfg}: {exc}") from None


def make_task(args, tokenizer=None):
    kind = task_kind(args.model)
    data = args.data
    if kind == "image":
        if data != "digits":
            raise TrainError(f"--data {data!r}: image models train on 'digits'")
        return ImageTask(data, args.batch_size, args.seed, args.device)
    if kind == "seq":
        if data != "count":
            raise TrainError(f"--data {data!r}: the encoder trains on 'count'")
        return SeqTask(data, args.batch_size, args.seed, args.device)
    if data != "pydoc" and not os.path.isfile(data):
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
    if args.data is None:
        args.data = DEFAULT_DATA[task_kind(args.model)]
    elif task_kind(args.model) == "text" and args.data != "pydoc":
        args.data = os.path.abspath(args.data)   # a resumed run finds it from any directory
    if args.batch_size is None:
        args.batch_size = 32 if args.model == "gpt" else 64
    if args.optimizer is None:
        args.optimizer = "adamw" if transformer else "sgd"
    if args.lr is None:
        args.lr = 3e-3 if args.optimizer == "adamw" else 0.05
    if args.weight_decay is None:
        args.weight_decay = 0.01 if args.optimizer == "adamw" else 5e-4
    if args.seed is None:
        args.seed = 0
    for dest, default in ARCH_DEFAULTS.items():
        if getattr(args, dest) is None:
            setattr(args, dest, default)
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


# hyper-parameters a resumed run takes from its checkpoint: given again, they must agree with it
_STORED = ("data", "batch_size", "lr", "optimizer", "weight_decay", "warmup", "seed")
_ARCH = ("norm", "norm_position", *ARCH_DEFAULTS)   # compared with the stored model config


def read_checkpoint(args):
    path = os.path.join(args.out, CHECKPOINT)
    if not os.path.exists(path):
        raise TrainError(f"--resume: no checkpoint at {path}")
    try:
        ckpt = load(path)
    except CheckpointError as exc:
        raise TrainError(f"--resume: {exc}") from None
    if not isinstance(ckpt, dict) or ckpt.get("format") != "minidl-train":
        raise TrainError(f"--resume: {path} was not written by `minidl train`")
    if ckpt.get("model_name") != args.model:
        raise TrainError(f"--resume: {path} holds a {ckpt.get('model_name')!r} model, not {args.model!r}")
    return ckpt


def adopt_stored(args, ckpt):
    """Take the stored run's hyper-parameters and architecture into ``args``; a flag given
    again with another value is an error (the resumed run would not continue the stored one)."""
    stored_args, cfg = ckpt["args"], ckpt["config"]
    stored = {flag(k): stored_args[k] for k in _STORED}
    stored["--data"] = stored["--data"] or DEFAULT_DATA[task_kind(args.model)]
    stored.update({flag(k): cfg[k] for k in _ARCH if k in cfg})
    given = {flag(k): getattr(args, k) for k in (*_STORED, *_ARCH) if getattr(args, k) is not None}
    check_resumed(args.out, stored, given, same={"--data": same_data})
    for k in (*_STORED, *_ARCH):
        if flag(k) in stored:
            setattr(args, k, stored[flag(k)])
    if args.eval_every is None:
        args.eval_every = stored_args.get("eval_every")


def run_length(args, task, ckpt):
    """(total steps, how they were asked for: "--steps 6", "--epochs 2 (44 steps)", or None)."""
    if args.steps is not None:
        return args.steps, f"--steps {args.steps}"
    if args.epochs is not None:
        total = max(1, int(round(args.epochs * task.steps_per_epoch)))
        return total, f"--epochs {args.epochs:g} ({total} steps)"
    if ckpt is None:
        return task.steps_per_epoch, None
    if "total_steps" not in ckpt:
        raise TrainError("--resume: the checkpoint does not record the run's length; give --steps")
    return int(ckpt["total_steps"]), None


def resume_command(args):
    cmd = f"python -m minidl train {args.model} --out {shlex.quote(args.out)} --resume"
    return cmd + (f" --device {args.device}" if args.device != "cpu" else "")


def run(args):
    """Train as ``args`` says; returns 0, 1 when the loss diverges, or 128 + the signal's number
    when stopped by SIGINT/SIGTERM (after saving a checkpoint of the last whole step)."""
    check_applicable(args)
    args.out = args.out or os.path.join("runs", "train", args.model)
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise TrainError(f"--out {args.out!r} is a file; expected a directory")
    ckpt = None
    if args.resume:
        ckpt = read_checkpoint(args)
        adopt_stored(args, ckpt)
    fill_defaults(args)
    ckpt_path = os.path.join(args.out, CHECKPOINT)
    task = make_task(args, tokenizer=ckpt.get("tokenizer") if ckpt else None)
    total, asked = run_length(args, task, ckpt)
    start = int(ckpt["step"]) if ckpt else 0
    if ckpt and not check_run_length(args.out, start, total, asked):
        print(f"nothing to train: the run in {args.out} is complete at step {start} (nothing rewritten); "
              f"give --steps N with N > {start} to train it longer", flush=True)
        return 0
    if args.warmup is None:
        args.warmup = max(1, total // 20) if total > 1 else 0
    if args.warmup > total:
        raise TrainError(f"--warmup {args.warmup} exceeds the {total} training steps")
    cfg = ckpt["config"] if ckpt else model_config(args, task)
    random.manual_seed(args.seed)
    model = build_model(args.model, cfg)
    if args.device != "cpu":
        try:
            model.to(args.device)
        except RuntimeError as exc:   # no GPU (and no simulator): say so as an argument error
            raise TrainError(f"--device {args.device}: {exc}") from None
    eval_every = args.eval_every or min(task.steps_per_epoch, 200)
    opt = make_optimizer(args, model)
    sched = optim.lr_scheduler.linear_warmup_cosine(opt, args.warmup, total, min_lr_ratio=0.1)
    history = {"step": [], "loss": [], "lr": [], "seconds": [], "throughput": []}
    evals = []
    if ckpt:
        try:
            model.load_state_dict(ckpt["model"])
            opt.load_state_dict(ckpt["optimizer"])
            sched.load_state_dict(ckpt["scheduler"])
        except (KeyError, ValueError, TypeError) as exc:
            raise TrainError(f"--resume: the checkpoint in {args.out} does not fit the model: {exc}") from None
        if total != ckpt.get("total_steps"):   # a new run length: this step's lr under the new schedule
            sched.last_epoch -= 1
            sched.step()
        random.set_rng_state(ckpt["rng"])
        history = {k: list(v) for k, v in ckpt["history"].items()}
        evals = list(ckpt["evals"])
    n_params = sum(p.numel() for p in model.parameters())
    print(f"{args.model} {cfg}: {n_params:,} parameters; {task.describe()}; steps {start}->{total} "
          f"(batch {args.batch_size}, {args.optimizer} lr {args.lr:g}, warm-up {args.warmup}); out {args.out}",
          flush=True)
    os.makedirs(args.out, exist_ok=True)

    def checkpoint(step):
        blob = {"format": "minidl-train", "model_name": args.model, "config": cfg, "model": model.state_dict(),
                "optimizer": opt.state_dict(), "scheduler": sched.state_dict(), "step": step,
                "total_steps": total, "rng": random.get_rng_state(), "history": history, "evals": evals,
                "args": {k: getattr(args, k) for k in (*_STORED, "eval_every")}}
        if task.kind == "text":
            blob["tokenizer"] = task.corpus.tokenizer.to_dict()
        with stop.saving():
            save(blob, ckpt_path)
        return step

    bar = None
    if not args.no_progress:
        try:
            from tqdm import tqdm
            bar = tqdm(total=total, initial=start, unit="step", dynamic_ncols=True, leave=False)
        except ImportError:
            bar = None
    step, in_flight, status = start, start + 1, 0
    saved = start if ckpt else None   # the step the checkpoint on disk holds
    stop = StopRequest()
    with stop:
        try:
            while step < total and not stop.requested:   # a stop request is honoured between whole steps
                in_flight = step + 1
                t0 = time.perf_counter()
                batch = task.batch(step)
                loss = train_step(model, task, opt, sched, batch)
                dt = time.perf_counter() - t0
                if not math.isfinite(loss):
                    status = diverged(loss, in_flight, saved, ckpt_path)
                    break
                rate = task.items(batch) / dt
                for k, v in zip(history, (in_flight, loss, opt.param_groups[0]["lr"], dt, rate)):
                    history[k].append(v)
                step = in_flight
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(loss=f"{loss:.4f}", **{f"{task.unit}_s": f"{rate:,.0f}"})
                if step % eval_every == 0 or step == total:
                    metrics = task.evaluate(model)
                    evals.append({"step": step, **metrics})
                    msg = f"step {step}/{total}: train loss {loss:.4f}, " + ", ".join(
                        f"{k} {v:.4f}" for k, v in metrics.items())
                    (bar.write if bar is not None else print)(msg)
                    saved = checkpoint(step)
            if status == 0 and step < total:   # stopped on request, at a step boundary
                if saved != step:
                    saved = checkpoint(step)
                status = stop.exit_status
                message = saved_message(stop, f"step {step}/{total}", ckpt_path, resume_command(args))
        except KeyboardInterrupt:   # a second Ctrl-C, mid-step: the state in memory is not a whole step
            status = 130
            where = f"step {in_flight}" if step < in_flight else f"the evaluation after step {step}"
            message = unsaved_message(where, step, saved, ckpt_path, resume_command(args))
        finally:
            if bar is not None:
                bar.close()
    if status > 1:
        print(message, flush=True)
    write_metrics(args, cfg, history, evals, n_params, status, saved)
    return status


def diverged(loss, step, saved, ckpt_path):
    where = f"{ckpt_path} holds step {saved}" if saved is not None else "no checkpoint was saved"
    print(f"the loss became {loss} at step {step}: training stopped, that step is not saved ({where}); "
          "a lower --lr may help", flush=True)
    return 1


def write_metrics(args, cfg, history, evals, n_params, status, saved):
    with open(os.path.join(args.out, "metrics.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(list(history))
        w.writerows(zip(*history.values()))
    summary = {"model": args.model, "config": cfg, "parameters": n_params, "steps": len(history["step"]),
               "final_loss": history["loss"][-1] if history["loss"] else None,
               "train_seconds": float(sum(history["seconds"])), "interrupted": status > 1,
               "diverged": status == 1, "checkpoint_step": saved, "last_eval": evals[-1] if evals else None}
    with open(os.path.join(args.out, "metrics.json"), "w") as f:
        json.dump({"summary": summary, "evals": evals, "args": {k: v for k, v in vars(args).items()
                                                                if not callable(v)}}, f, indent=2)
    try:
        plot_loss(history, evals, os.path.join(args.out, "loss.png"), f"{args.model} {cfg.get('norm', '')}")
    except ImportError:
        print('matplotlib is not installed: no loss plot (pip install "minidl[plot]")')
    if evals and status == 0:
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
