"""One way to train: the loop behind ``minidl train`` and the example training scripts.

    from minidl import train

    run = train.Run(args.out, "examples/train_cnn.py", resume=args.resume)   # OUT/checkpoint.npz
    run.adopt(args, STORED, given)     # resuming: the stored hyper-parameters (given again: must agree)
    steps = run.length(args.steps, args.epochs, len(loader), default_epochs=15)
    model, optimizer, scheduler = ...  # built for `steps`
    result = train.fit(run, model, optimizer, scheduler, train.EpochBatches(loader), loss, steps,
                       evaluate=evaluate, eval_every=len(loader))

- ``Run`` (run.py): the output directory, the flags every training program shares
  (``add_arguments``: --epochs | --steps, --eval-every, --seed, --out, --resume, --device,
  --no-progress) and the rule for resuming.
- ``fit`` (loop.py): the loop, with a tqdm progress bar, evaluations, ``checkpoint.npz`` at each
  evaluation, at the end and when stopped, ``metrics.csv`` / ``metrics.json`` / ``loss.png``,
  and exact resumption (model, optimizer, scheduler, RNG, data position, run length).
- ``EpochBatches`` (data.py): a DataLoader as batches of steps, resumable mid-epoch.
- ``StopRequest`` (interrupt.py): Ctrl-C / SIGTERM honoured between whole steps.
- ``Precision`` (precision.py): fp32, or fp16 / bf16 mixed precision (autocast, a GradScaler for
  fp16 saved with the checkpoint), given to ``fit``; ``memory.graph_bytes`` measures the
  activation bytes a step keeps for backward.
- ``Replicas`` (replicas.py): the ranks of a data-parallel run (``Replicas.join()`` under mpiexec),
  given to ``fit``: rank 0 alone writes and prints, the ranks stop at the same step.
"""
from .data import EpochBatches
from .interrupt import StopRequest
from .loop import Result, fit, train_step
from .precision import PRECISIONS, Precision
from .replicas import Replicas
from .run import CHECKPOINT, Run, UsageError, add_arguments, given_options, same_data

__all__ = ["CHECKPOINT", "EpochBatches", "PRECISIONS", "Precision", "Replicas", "Result", "Run", "StopRequest",
           "UsageError", "add_arguments", "fit", "given_options", "same_data", "train_step"]
