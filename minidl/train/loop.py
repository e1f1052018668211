"""The training loop: steps, evaluations, checkpoints, metrics, a progress bar, and stopping.

``fit`` trains ``model`` from the run's current step to ``steps``. Each step fetches
``data.batch(step)``, computes ``loss(batch)``, back-propagates, optionally clips the
gradient norm, and steps the optimizer and the scheduler. Every ``eval_every`` steps and at
the last one it calls ``evaluate()`` (a dict of metrics), prints them and saves the
checkpoint. Ctrl-C or SIGTERM is honoured between whole steps (see ``interrupt``): the step
in flight finishes, is saved, and ``fit`` returns 128 + the signal's number as its status; a
second one quits at once without saving. A non-finite loss stops the run (status 1) without
saving that step. metrics.csv, metrics.json and loss.png are written whenever ``fit`` ends.

The checkpoint (``OUT/checkpoint.npz``, md.save) holds the model, optimizer and scheduler
states, the step and the run length, minidl's RNG state, the data's state (when it has one),
the metrics so far, the program's arguments and model configuration, and any ``extra`` entries
(a tokenizer). A resumed run (``Run(..., resume=True)``) loads all of it and trains exactly the
steps the uninterrupted run would have, bit for bit.

A data-parallel run (``replicas``, minidl.train.replicas) runs this loop on every rank: rank 0
alone prints and writes the files above, and the ranks agree after each step on the loss, the
throughput and a stop request (one small all-reduce), so they stop at the same step.
"""
import math
import os
import time
from dataclasses import dataclass, field

from .. import random
from ..io import save
from ..nn.utils import clip_grad_norm_
from . import metrics
from .interrupt import StopRequest, saved_message, unsaved_message
from .precision import Precision
from .replicas import Replicas
from .run import FORMAT, UsageError


_FP32 = Precision()


@dataclass
class Result:
    status: int      # 0: done; 1: the loss diverged; 128 + a signal's number: stopped (checkpoint saved)
    step: int        # the steps trained in all (this call and the runs it resumed)
    trained: int     # the steps this call trained
    evals: list = field(default_factory=list)     # [{"step": s, metric: value, ...}]
    history: dict = field(default_factory=dict)   # per step: step, loss, lr, seconds, throughput
    saved: int = None                             # the step the checkpoint on disk holds

    @property
    def last_eval(self):
        return self.evals[-1] if self.evals else None


def train_step(loss, batch, optimizer, scheduler=None, grad_clip=None, parameters=None, precision=None):
    """One optimizer step on ``batch``; returns the loss as a float. ``precision`` (a
    ``Precision``, default fp32): the forward pass and the loss run under its autocast, and
    fp16 steps go through its GradScaler (gradients unscaled before clipping)."""
    precision = precision or _FP32
    with precision.autocast():
        value = loss(batch)
    optimizer.zero_grad()
    clip = (lambda: clip_grad_norm_(parameters, grad_clip)) if grad_clip else None
    precision.backward_and_step(value, optimizer, clip)
    if scheduler is not None:
        scheduler.step()
    return float(value.item())


def _restore(run, model, optimizer, scheduler, data, steps, precision=_FP32):
    ckpt = run.checkpoint
    try:
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        if scheduler is not None:
            scheduler.load_state_dict(ckpt["scheduler"])
        precision.load_state_dict(ckpt.get("scaler"))
    except (KeyError, ValueError, TypeError) as exc:
        raise UsageError(f"--resume: the checkpoint in {run.out} does not fit the model: {exc}") from None
    if scheduler is not None and steps != ckpt.get("total_steps"):
        scheduler.last_epoch -= 1   # a new run length: this step's lr under the new schedule
        scheduler.step()
    random.set_rng_state(ckpt["rng"])
    if hasattr(data, "load_state_dict") and ckpt.get("data") is not None:
        data.load_state_dict(ckpt["data"])
    return {k: list(v) for k, v in ckpt["history"].items()}, list(ckpt["evals"])


def _progress(enabled, start, total):
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, initial=start, unit="step", dynamic_ncols=True, leave=False)


def fit(run, model, optimizer, scheduler, data, loss, steps, evaluate=None, eval_every=None, grad_clip=None,
        progress=True, unit="item", items=None, args=None, config=None, extra=None, title="", precision=None,
        replicas=None):
    """Train to step ``steps`` and return a Result (see the module docstring).

    ``data``: has ``batch(step)`` (and, to be saved with the checkpoint, ``state_dict`` /
    ``load_state_dict``), or is a function of the step. ``loss(batch)``: the loss tensor.
    ``items(batch)``: how many ``unit``s a batch holds, for the throughput (default: its first
    tensor's first dimension). ``args`` (a dict or namespace) and ``config`` are stored in the
    checkpoint and metrics.json; ``extra`` entries go into the checkpoint as they are.
    ``precision``: a ``Precision`` (fp32, fp16 or bf16 mixed precision; its loss scaler's state is
    saved with the checkpoint). ``replicas`` (minidl.train.replicas): the ranks of a data-parallel
    run, whose rank 0 alone writes and prints, and which take every decision together; ``model``
    is then the bare module (not its DistributedDataParallel wrapper), so that the checkpoint is
    the one a single process writes."""
    precision = precision or _FP32
    replicas = replicas or Replicas()
    main = replicas.main
    print_ = print if main else (lambda *a, **k: None)   # rank 0 alone prints
    batch_of = getattr(data, "batch", data)
    items = items or (lambda b: (b[0] if isinstance(b, (tuple, list)) else b).shape[0])
    args = {k: v for k, v in (args if isinstance(args, dict) else vars(args or {})).items() if not callable(v)}
    start = run.step
    history, evals = metrics.new_history(), []
    if run.checkpoint is not None:
        history, evals = _restore(run, model, optimizer, scheduler, data, steps, precision)
        if start == steps:
            print_(f"nothing to train: the run in {run.out} is complete at step {start} (nothing rewritten); "
                  f"give --steps N with N > {start} to train it longer", flush=True)
            return Result(0, start, 0, evals, history, start)
    eval_every = eval_every or steps
    n_params = sum(p.numel() for p in model.parameters())
    ranks = f" on each of {replicas.world_size} ranks" if replicas.world_size > 1 else ""
    print_(f"{n_params:,} parameters{ranks}; steps {start} -> {steps}, evaluating every {eval_every}; writing to "
           f"{run.out}", flush=True)
    if main:
        os.makedirs(run.out, exist_ok=True)
    parameters = list(model.parameters()) if grad_clip else None

    def checkpoint(step):
        blob = {"format": FORMAT, "program": run.program, "args": args, "config": config,
                "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict() if scheduler is not None else None, "step": step,
                "total_steps": steps, "rng": random.get_rng_state(),
                "data": data.state_dict() if hasattr(data, "state_dict") else None,
                "history": history, "evals": evals, "scaler": precision.state_dict(), **(extra or {})}
        if main:
            with stop.saving():
                save(blob, run.path)
        return step

    bar = _progress(progress and main, start, steps)
    say = bar.write if bar is not None else (lambda text: print_(text, flush=True))
    agreed_stop = False   # with several ranks, only a stop every rank knows of ends the loop
    step, in_flight, status, message = start, start + 1, 0, None
    saved = start if run.checkpoint is not None else None   # the step the checkpoint on disk holds
    stop = StopRequest()
    with stop:
        try:
            # a stop request is honoured between whole steps
            while step < steps and not (agreed_stop if replicas.world_size > 1 else stop.requested):
                in_flight = step + 1
                t0 = time.perf_counter()
                batch = batch_of(step)
                value = train_step(loss, batch, optimizer, scheduler, grad_clip, parameters, precision)
                value, n_items, signum = replicas.agree(value, items(batch), stop.signum)
                dt = time.perf_counter() - t0
                if signum is not None:
                    agreed_stop, stop.signum = True, stop.signum or signum
                if not math.isfinite(value):
                    status = _diverged(value, in_flight, saved, run.path, print_)
                    break
                rate = n_items / dt
                for k, v in zip(history, (in_flight, value, optimizer.param_groups[0]["lr"], dt, rate)):
                    history[k].append(v)
                step = in_flight
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(loss=f"{value:.4f}", **{f"{unit}_s": f"{rate:,.0f}"})
                if step % eval_every == 0 or step == steps:
                    measured = evaluate() if evaluate is not None else {}
                    evals.append({"step": step, **measured})
                    say(f"step {step}/{steps}: loss {value:.4f}" + (f", {metrics.show(measured)}" if measured else ""))
                    saved = checkpoint(step)
            if status == 0 and step < steps:   # stopped on request, at a step boundary
                if saved != step:
                    saved = checkpoint(step)
                status = stop.exit_status
                message = saved_message(stop, f"step {step}/{steps}", run.path, run.resume_command)
        except KeyboardInterrupt:   # a second Ctrl-C, mid-step: the state in memory is not a whole step
            status = 130
            where = f"step {in_flight}" if step < in_flight else f"the evaluation after step {step}"
            message = unsaved_message(where, step, saved, run.path, run.resume_command)
        finally:
            if bar is not None:
                bar.close()
    if message:
        print_(message, flush=True)
    seconds = float(sum(history["seconds"]))
    summary = {"program": run.program, "config": config, "parameters": n_params, "steps": len(history["step"]),
               "final_loss": history["loss"][-1] if history["loss"] else None, "train_seconds": seconds,
               "interrupted": status > 1, "diverged": status == 1, "checkpoint_step": saved,
               "last_eval": evals[-1] if evals else None, **precision.describe()}
    if main:
        metrics.write(run.out, history, evals, summary, args, title)
    if status == 0 and step > start:
        rate = sum(r * s for r, s in zip(history["throughput"], history["seconds"])) / max(seconds, 1e-12)
        last = metrics.show(evals[-1]) if evals and len(evals[-1]) > 1 else f"loss {history['loss'][-1]:.4f}"
        print_(f"final: {last} after {step} steps ({seconds:.1f} s of training, {rate:,.0f} {unit}/s)", flush=True)
    return Result(status, step, step - start, evals, history, saved)


def _diverged(loss, step, saved, path, print_=print):
    where = f"{path} holds step {saved}" if saved is not None else "no checkpoint was saved"
    print_(f"the loss became {loss} at step {step}: training stopped, that step is not saved ({where}); "
          "a lower --lr may help", flush=True)
    return 1
