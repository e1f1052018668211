"""``minidl train MODEL``: every zoo model, trained by minidl.train's loop.

    python -m minidl train resnet8 --norm group --epochs 5 --out runs/rn8-gn
    python -m minidl train gpt --steps 800 --norm rms --norm-position pre --out runs/gpt
    python -m minidl train lstm --steps 800 --hidden-size 256 --norm layer --out runs/lstm
    python -m minidl train resnet8 --precision fp16 --epochs 5 --out runs/rn8-fp16   # autocast + GradScaler
    python -m minidl train gpt --out runs/gpt --resume                  # continue an interrupted run
    python -m minidl train gpt --steps 1600 --out runs/gpt --resume     # extend it to step 1600
    mpiexec -n 2 python -m minidl train resnet8 --norm syncbatch --out runs/rn8-sync   # data parallel, 2 ranks

This module turns flags into a model, a task (minidl.cli.tasks: data, loss, evaluation) and an
optimizer; minidl.train does the rest, as for the example scripts: a progress bar, ``metrics.csv``,
``metrics.json``, ``loss.png`` and ``checkpoint.npz`` in --out, Ctrl-C / SIGTERM at the end of the
step in flight (exit status 130 / 143), and ``--resume`` by minidl.train.run's rule: the
architecture, hyper-parameters and run length stored in the checkpoint hold (a flag given
again must agree), ``--steps``/``--epochs`` set a new length, ``--eval-every``, ``--device``
and ``--no-progress`` may change. Batches are a function of (seed, step), so a resumed run
reproduces the uninterrupted one exactly.

``--precision fp16`` / ``bf16`` trains in mixed precision (minidl.train.precision): the forward
pass and the loss under ``md.autocast``, float32 master weights, and for fp16 a GradScaler whose
state is in the checkpoint. Before training, the activation bytes one step keeps for backward are
measured on the first batch in fp32 and in the run's precision and printed (and in metrics.json).

Under an MPI launcher (``mpiexec -n K``) the run is data parallel (minidl.train.replicas): each
rank trains the model wrapped in DistributedDataParallel on its own batch of ``--batch-size``
(images: its DistributedSampler shard of each epoch), rank 0 alone writes and prints, every rank
resumes from the checkpoint, which records K (a run resumes on as many ranks). ``--norm
syncbatch`` builds the BatchNorm model and converts it with nn.SyncBatchNorm.convert_sync_batchnorm
(on one process it is BatchNorm, with a warning).
"""
import os

from .. import optim, random
from ..train import Run, add_arguments as add_run_arguments, fit, same_data
from ..train.precision import PRECISIONS, Precision
from ..train.replicas import Replicas
from ..train.run import flag
from ..zoo import MODELS as CNN_MODELS
from ..zoo import NORMS as CNN_NORMS
from ..zoo.char_lstm import NORMS as LSTM_NORMS
from ..zoo.transformer import NORM_KINDS, NORM_POSITIONS
from .args import UsageError, check_heads, nonnegative_float, nonnegative_int, positive_float, positive_int
from .tasks import ImageTask, SeqTask, ShardedImageTask, TextTask

PROGRAM = "minidl train"

TRANSFORMERS = ("gpt", "encoder", "vit")
LANGUAGE_MODELS = ("gpt", "lstm")   # character-level, on the text corpus
MODEL_NAMES = tuple(sorted(CNN_MODELS)) + TRANSFORMERS + ("lstm",)
RESNETS = tuple(m for m in MODEL_NAMES if m.startswith("resnet"))
SYNC_NORM = "syncbatch"   # BatchNorm with statistics over every rank (nn.SyncBatchNorm): where "batch" is valid
ALL_NORMS = tuple(dict.fromkeys(CNN_NORMS + NORM_KINDS + LSTM_NORMS + (SYNC_NORM,)))
ARCH_DEFAULTS = {"d_model": 64, "n_layer": 2, "n_head": 4, "block_size": 64, "width": 16, "embed_dim": 64,
                 "hidden_size": 128}
ARCH_HELP = {"d_model": "Transformers", "n_layer": "Transformers and lstm: layers", "n_head": "Transformers",
             "block_size": "gpt: context length; lstm: steps of backpropagation through time",
             "width": "resnets: channels of the first stage", "embed_dim": "lstm: token embedding size",
             "hidden_size": "lstm: hidden state size"}
_T = (f"the Transformers ({', '.join(TRANSFORMERS)})", TRANSFORMERS)
APPLIES_TO = {"d_model": _T, "n_layer": (f"the Transformers ({', '.join(TRANSFORMERS)}) and lstm",
                                         TRANSFORMERS + ("lstm",)),
              "n_head": _T, "norm_position": _T, "block_size": ("gpt and lstm", LANGUAGE_MODELS),
              "width": (f"the ResNets ({', '.join(RESNETS)})", RESNETS), "embed_dim": ("lstm", ("lstm",)),
              "hidden_size": ("lstm", ("lstm",))}
DEFAULT_DATA = {"image": "digits", "seq": "count", "text": "pydoc"}


class TrainError(UsageError):
    """A bad combination of arguments (reported by the CLI as an argparse error)."""


def valid_norms(model):
    if model == "lstm":
        return LSTM_NORMS
    if model in TRANSFORMERS:
        return tuple(n for n in NORM_KINDS if not (model == "gpt" and n == "batch")) + ((SYNC_NORM,) if model != "gpt"
                                                                                         else ())
    return CNN_NORMS + (SYNC_NORM,)


def task_kind(model):
    return {"gpt": "text", "lstm": "text", "encoder": "seq"}.get(model, "image")


def add_arguments(p):
    p.add_argument("model", choices=MODEL_NAMES, help="a zoo model")
    p.add_argument("--data", default=None,
                   help="images: digits; gpt, lstm: pydoc (default) or a text file; encoder: count")
    p.add_argument("--batch-size", type=positive_int, default=None,
                   help="default 64 for images and sequences, 32 for text")
    p.add_argument("--lr", type=positive_float, default=None,
                   help="default 0.05 (SGD, CNNs) or 3e-3 (AdamW, Transformers and lstm)")
    p.add_argument("--optimizer", default=None, choices=("sgd", "adamw"))
    p.add_argument("--weight-decay", type=nonnegative_float, default=None)
    p.add_argument("--warmup", type=nonnegative_int, default=None,
                   help="linear warm-up steps (default: 5%% of the steps)")
    p.add_argument("--norm", default=None, choices=ALL_NORMS, help="the model's normalization layer")
    p.add_argument("--norm-position", default=None, choices=NORM_POSITIONS, help="Transformers: pre, post or deepnorm")
    p.add_argument("--precision", default=None, choices=PRECISIONS,
                   help="fp32 (default), or mixed precision: fp16 (autocast + GradScaler) or bf16 (autocast); "
                        "parameters stay float32")
    for dest, default in ARCH_DEFAULTS.items():
        p.add_argument("--" + dest.replace("_", "-"), type=positive_int, default=None,
                       help=f"{ARCH_HELP[dest]} (default {default})")
    add_run_arguments(p, out=None, seed_default=None, eval_every="one epoch, at most 200 steps")
    return p


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
    if m == "lstm":
        return {"vocab_size": task.corpus.vocab_size, "embed_dim": args.embed_dim, "hidden_size": args.hidden_size,
                "num_layers": args.n_layer, "norm": norm or "none", "dropout": 0.0}
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
    if cfg.get("norm") == SYNC_NORM:   # the BatchNorm model, its BatchNorms made SyncBatchNorms (PyTorch's idiom)
        from ..nn import SyncBatchNorm
        return SyncBatchNorm.convert_sync_batchnorm(build_model(name, {**cfg, "norm": "batch"}))
    from .. import zoo
    try:
        if name in CNN_MODELS:
            return zoo.get_model(name, **cfg)
        if name == "gpt":
            return zoo.GPT(**cfg)
        if name == "lstm":
            return zoo.CharLSTM(**cfg)
        if name == "encoder":
            return zoo.TransformerEncoderClassifier(**cfg)
        return zoo.ViT(**cfg)
    except ValueError as exc:   # the constructors validate their arguments: those came from flags
        raise TrainError(f"cannot build {name} with {cfg}: {exc}") from None


def make_task(args, tokenizer=None, replicas=None):
    """The task of ``args``; on one of several ``replicas`` it draws that rank's batches."""
    kind = task_kind(args.model)
    data = args.data
    ranks = replicas is not None and replicas.world_size > 1
    rank_key = (replicas.rank,) if ranks else ()
    if kind == "image":
        if data != "digits":
            raise TrainError(f"--data {data!r}: image models train on 'digits'")
        if ranks:
            return ShardedImageTask(data, args.batch_size, args.seed, args.device, replicas)
        return ImageTask(data, args.batch_size, args.seed, args.device)
    if kind == "seq":
        if data != "count":
            raise TrainError(f"--data {data!r}: the encoder trains on 'count'")
        return SeqTask(data, args.batch_size, args.seed, args.device, rank_key=rank_key)
    if data != "pydoc" and not os.path.isfile(data):
        raise TrainError(f"--data {data!r}: expected 'pydoc' or the path of a text file")
    return TextTask(data, args.batch_size, args.seed, args.device, args.block_size, tokenizer, rank_key=rank_key)


def make_optimizer(args, model):
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    groups = [g for g in groups if g["params"]]
    if args.optimizer == "sgd":
        return optim.SGD(groups, lr=args.lr, momentum=0.9, nesterov=True)
    return optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.99))


def fill_defaults(args):
    adamw = args.model in TRANSFORMERS + LANGUAGE_MODELS
    if args.data is None:
        args.data = DEFAULT_DATA[task_kind(args.model)]
    elif task_kind(args.model) == "text" and args.data != "pydoc":
        args.data = os.path.abspath(args.data)   # a resumed run finds it from any directory
    if args.batch_size is None:
        args.batch_size = 32 if args.model in LANGUAGE_MODELS else 64
    if args.optimizer is None:
        args.optimizer = "adamw" if adamw else "sgd"
    if args.lr is None:
        args.lr = 3e-3 if args.optimizer == "adamw" else 0.05
    if args.weight_decay is None:
        args.weight_decay = 0.01 if args.optimizer == "adamw" else 5e-4
    if args.seed is None:
        args.seed = 0
    if args.precision is None:
        args.precision = "fp32"
    for dest, default in ARCH_DEFAULTS.items():
        if getattr(args, dest) is None:
            setattr(args, dest, default)
    return args


# hyper-parameters a resumed run takes from its checkpoint: given again, they must agree with it
_STORED = ("data", "batch_size", "lr", "optimizer", "weight_decay", "warmup", "seed")
_ARCH = ("norm", "norm_position", *ARCH_DEFAULTS)   # compared with the stored model config


def adopt_stored(run, args):
    """Take the stored run's hyper-parameters and architecture into ``args`` (minidl.train's rule;
    this command's flags default to None, so a flag that is not None was given)."""
    ckpt = run.checkpoint
    if ckpt.get("model_name") != args.model:
        raise TrainError(f"--resume: {run.path} holds a {ckpt.get('model_name')!r} model, not {args.model!r}")
    stored = {k: ckpt["args"][k] for k in _STORED}
    stored["data"] = stored["data"] or DEFAULT_DATA[task_kind(args.model)]
    stored["precision"] = ckpt["args"].get("precision") or "fp32"   # checkpoints from before --precision: fp32
    if args.model == "lstm":   # its block size shapes the batches, not the model; its config names differ
        cfg = ckpt["config"]
        stored.update(block_size=ckpt["args"]["block_size"], embed_dim=cfg["embed_dim"],
                      hidden_size=cfg["hidden_size"], n_layer=cfg["num_layers"], norm=cfg["norm"])
    else:
        stored.update({k: ckpt["config"][k] for k in _ARCH if k in ckpt["config"]})
    keys = (*_STORED, "precision", *_ARCH)
    run.adopt(args, keys, {k for k in keys if getattr(args, k) is not None}, stored=stored, same={"data": same_data})
    if args.eval_every is None:
        args.eval_every = ckpt["args"].get("eval_every")


def run(args):
    """Train as ``args`` says; returns 0, 1 when the loss diverges, or 128 + the signal's number
    when stopped by SIGINT/SIGTERM (after saving a checkpoint of the last whole step)."""
    check_applicable(args)
    replicas = Replicas.join()   # under mpiexec: this rank of the data-parallel run
    k = replicas.world_size
    args.out = args.out or os.path.join("runs", "train", args.model)
    launch = f"mpiexec -n {k} " if k > 1 else ""
    train_run = Run(args.out, PROGRAM, resume=args.resume, command=f"{launch}python -m minidl train {args.model}",
                    device=args.device)
    ckpt = train_run.checkpoint
    if ckpt is not None:
        adopt_stored(train_run, args)
        if ckpt.get("world_size", 1) != k:   # --batch-size is per rank: another count would be another run
            raise TrainError(f"--resume: the run in {args.out} trained on {ckpt.get('world_size', 1)} rank(s), this "
                             f"one has {k}; resume it with as many (mpiexec -n {ckpt.get('world_size', 1)})")
    fill_defaults(args)
    task = make_task(args, tokenizer=ckpt.get("tokenizer") if ckpt else None, replicas=replicas)
    total = train_run.length(args.steps, args.epochs, task.steps_per_epoch)
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
    trained = model   # what computes the loss: the model, or on several ranks its DistributedDataParallel
    if k > 1:
        from ..nn.parallel import DistributedDataParallel
        trained = DistributedDataParallel(model)
    opt = make_optimizer(args, model)
    sched = optim.lr_scheduler.linear_warmup_cosine(opt, args.warmup, total, min_lr_ratio=0.1)
    per_rank = f" per rank on each of {k} ranks" if k > 1 else ""
    if replicas.main:
        print(f"{args.model} {cfg}; {task.describe()}; batch {args.batch_size}{per_rank}, {args.optimizer} lr "
              f"{args.lr:g}, warm-up {args.warmup}", flush=True)
    extra = {"model_name": args.model}
    if k > 1:
        extra["world_size"] = k
    if task.kind == "text":
        extra["tokenizer"] = task.corpus.tokenizer.to_dict()
    loss = lambda batch: task.loss(trained, batch)  # noqa: E731
    precision = Precision(args.precision, args.device)
    if precision.mixed:   # one batch's graph in fp32 and in the run's precision; the run itself is unchanged
        precision.measure_memory(model, loss, task.batch(train_run.step))
        if replicas.main:
            print(f"{args.precision} mixed precision: {precision.memory_line()}", flush=True)
    result = fit(train_run, model, opt, sched, task, loss, total,
                 evaluate=lambda: task.evaluate(model), eval_every=args.eval_every or min(task.steps_per_epoch, 200),
                 progress=not args.no_progress, unit=task.unit, items=task.items, args=vars(args), config=cfg,
                 extra=extra, title=f"{args.model} {cfg.get('norm', '')}", precision=precision, replicas=replicas)
    return result.status
