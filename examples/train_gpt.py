"""Train a small character-level GPT on the Python documentation that ships with CPython.

    python examples/train_gpt.py                       # default config: a few minutes on 2 cores
    python examples/train_gpt.py --data my.txt --max-iters 3000 --d-model 192

Shows a progress bar (loss, tokens/s), evaluates the validation loss (nats per character)
every ``--eval-interval`` steps, saves checkpoints (``md.save``: model, optimizer, config,
tokenizer, RNG state, step, run length, arguments) and a loss plot to ``--out-dir``, and
prints a sample at the end.

Ctrl-C or SIGTERM stops after the step in flight, saves OUT_DIR/ckpt.npz there and exits with
status 130 (143). ``--resume`` continues exactly where it stopped (batches come from md's RNG,
which the checkpoint holds), with the architecture and hyper-parameters stored there: given
again, a flag must agree with them, except ``--max-iters`` (the run's new length), the
sampling flags, ``--out-dir``, ``--device`` and ``--no-progress``. Sample from a checkpoint
without training with ``--max-iters 0 --resume``.
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import minidl as md  # noqa: E402
import minidl.nn as nn  # noqa: E402
from minidl import optim  # noqa: E402
from minidl.cli.args import (UsageError, check_heads, check_resumed, check_run_length, fraction,  # noqa: E402
                             given_options, nonnegative_float, nonnegative_int, open_fraction, positive_float,
                             positive_int, same_data, seed, unit_interval)
from minidl.cli.interrupt import StopRequest, saved_message, unsaved_message  # noqa: E402
from minidl.data.text import CharCorpus, CharTokenizer, load_text  # noqa: E402
from minidl.zoo.gpt import GPT  # noqa: E402


def build_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=None, help="a UTF-8 text file (default: CPython's pydoc_data topics)")
    p.add_argument("--out-dir", default="runs/gpt")
    p.add_argument("--block-size", type=positive_int, default=64)
    p.add_argument("--n-layer", type=positive_int, default=4)
    p.add_argument("--n-head", type=positive_int, default=4)
    p.add_argument("--d-model", type=positive_int, default=128)
    p.add_argument("--dropout", type=fraction, default=0.0)
    p.add_argument("--norm-position", default="pre", choices=["pre", "post", "deepnorm"])
    p.add_argument("--norm", default="layer", choices=["layer", "rms", "scale"])
    p.add_argument("--pos", default="learned", choices=["learned", "sinusoidal", "rotary"])
    p.add_argument("--batch-size", type=positive_int, default=32)
    p.add_argument("--max-iters", type=nonnegative_int, default=800)
    p.add_argument("--lr", type=positive_float, default=3e-3)
    p.add_argument("--min-lr-ratio", type=unit_interval, default=0.1)
    p.add_argument("--warmup", type=nonnegative_int, default=50)
    p.add_argument("--weight-decay", type=nonnegative_float, default=0.1)
    p.add_argument("--grad-clip", type=nonnegative_float, default=1.0, help="clip the global gradient norm (0: off)")
    p.add_argument("--eval-interval", type=positive_int, default=200)
    p.add_argument("--eval-iters", type=positive_int, default=20)
    p.add_argument("--val-fraction", type=open_fraction, default=0.1)
    p.add_argument("--seed", type=seed, default=1337)
    p.add_argument("--sample-len", type=nonnegative_int, default=400)
    p.add_argument("--temperature", type=nonnegative_float, default=0.8, help="0: always the likeliest character")
    p.add_argument("--top-k", type=positive_int, default=None)
    p.add_argument("--prompt", default="\n")
    p.add_argument("--resume", action="store_true", help="continue from OUT_DIR/ckpt.npz")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    return p


MODEL_KEYS = ("block_size", "n_layer", "n_head", "d_model", "dropout", "norm_position", "norm", "pos")
# besides the architecture, what a resumed run takes from its checkpoint (given again, a flag must agree);
# the evaluation flags are among them because evaluation batches come from the same RNG as training's
STORED = ("data", "batch_size", "lr", "min_lr_ratio", "warmup", "weight_decay", "grad_clip", "eval_interval",
          "eval_iters", "val_fraction", "seed")


def flag(dest):
    return "--" + dest.replace("_", "-")


def batch(corpus, split, args):
    x, y = corpus.batch(split, args.batch_size, args.block_size)
    return x.to(args.device), y.to(args.device)


def estimate_loss(model, corpus, args):
    """Mean loss over ``eval_iters`` random batches of each split, in eval mode."""
    model.eval()
    out = {}
    with md.no_grad():
        for split in ("train", "val"):
            out[split] = float(np.mean([model(*batch(corpus, split, args))[1].item()
                                        for _ in range(args.eval_iters)]))
    model.train()
    return out



def save_plot(history, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4))
    steps, train = zip(*history["train"]) if history["train"] else ((), ())
    if train:
        k = min(25, len(train))
        smooth = np.convolve(train, np.ones(k) / k, mode="valid")
        ax.plot(steps, train, alpha=0.25, color="C0", label="train (batch)")
        ax.plot(steps[k - 1:], smooth, color="C0", label=f"train ({k}-step mean)")
    if history["val"]:
        vs, vl = zip(*history["val"])
        ax.plot(vs, vl, "o-", color="C1", label="validation")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats/char)")
    ax.set_title("char-level GPT")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def read_resumed(parser, args, given, ckpt_path):
    """The checkpoint in OUT_DIR, with its stored architecture and arguments taken into ``args``."""
    try:
        ckpt = md.load(ckpt_path)
        stored = {flag(k): ckpt["config"][k] for k in MODEL_KEYS}
        stored.update({flag(k): ckpt["args"][k] for k in STORED if k in ckpt.get("args", {})})
        check_resumed(ckpt_path, stored, {flag(k): getattr(args, k) for k in (*MODEL_KEYS, *STORED) if k in given},
                      same={"--data": same_data})
    except (OSError, ValueError, KeyError, TypeError) as exc:   # missing, unreadable, not this script's, a conflict
        parser.error(str(exc) if isinstance(exc, UsageError) else f"--resume: {ckpt_path}: {exc}")
    for k, v in stored.items():
        setattr(args, k[2:].replace("-", "_"), v)
    if "max_iters" not in given and "max_iters" in ckpt:
        args.max_iters = int(ckpt["max_iters"])
    return ckpt


def build_corpus(parser, args, tokenizer):
    try:
        corpus = CharCorpus(load_text(args.data), tokenizer=tokenizer, val_fraction=args.val_fraction)
        prompt = corpus.tokenizer.encode(args.prompt)[None]
    except (OSError, UnicodeDecodeError, KeyError) as exc:
        parser.error(str(exc.args[0]) if isinstance(exc, KeyError) else f"--data {args.data}: {exc}")
    shortest = min(len(corpus.train), len(corpus.val))
    if args.block_size >= shortest:
        parser.error(f"--block-size {args.block_size}: the text's smaller split has {shortest} characters; "
                     "expected a block size below that")
    if not args.prompt:
        parser.error("--prompt must not be empty")
    return corpus, prompt


def main(argv=None):
    parser = build_parser()
    args, given = given_options(parser, argv)
    ckpt_path = os.path.join(args.out_dir, "ckpt.npz")
    ckpt = read_resumed(parser, args, given, ckpt_path) if args.resume else None
    try:
        check_heads(args.d_model, args.n_head, head_dim_even=args.pos == "rotary")
    except UsageError as exc:
        parser.error(str(exc))
    if args.data is not None:
        args.data = os.path.abspath(args.data)   # a resumed run finds it from any directory
    md.manual_seed(args.seed)

    start_iter, history = 0, {"train": [], "val": []}
    tokenizer = CharTokenizer.from_dict(ckpt["tokenizer"]) if ckpt else None
    corpus, prompt = build_corpus(parser, args, tokenizer)
    cfg = {k: getattr(args, k) for k in MODEL_KEYS}
    model = GPT(vocab_size=corpus.vocab_size, **cfg).to(args.device)
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    opt = optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                       {"params": no_decay, "weight_decay": 0.0}], lr=args.lr, betas=(0.9, 0.99))
    sched = optim.lr_scheduler.linear_warmup_cosine(opt, min(args.warmup, max(args.max_iters, 1)),
                                                    max(args.max_iters, 1), args.min_lr_ratio)
    train_to = args.max_iters
    if ckpt:
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        start_iter = int(ckpt["iter"])
        history = {k: [tuple(x) for x in v] for k, v in ckpt["history"].items()}
        md.set_rng_state(json.loads(ckpt["rng_state"]))
        for _ in range(start_iter):   # the lr of this step (under the run's length, new or stored)
            sched.step()
        if args.max_iters == 0:   # sample only
            train_to = start_iter
        else:
            asked = f"--max-iters {args.max_iters}" if "max_iters" in given else None
            try:
                if not check_run_length(ckpt_path, start_iter, args.max_iters, asked):
                    print(f"nothing to train: {ckpt_path} is complete at step {start_iter}; "
                          f"give --max-iters N with N > {start_iter} to train longer")
            except UsageError as exc:
                parser.error(str(exc))
    os.makedirs(args.out_dir, exist_ok=True)

    print(f"corpus: {len(corpus.train) + len(corpus.val):,} chars, vocab {corpus.vocab_size}, "
          f"train {len(corpus.train):,} / val {len(corpus.val):,}; model: {model.num_parameters():,} parameters; {cfg}")

    def checkpoint(it):
        with stop.saving():
            md.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "config": cfg, "iter": it,
                     "max_iters": args.max_iters, "tokenizer": corpus.tokenizer.to_dict(),
                     "args": {k: getattr(args, k) for k in STORED},
                     "history": {k: [list(x) for x in v] for k, v in history.items()},
                     "rng_state": json.dumps(md.get_rng_state())}, ckpt_path)
        return it

    tokens_per_step = args.batch_size * args.block_size
    command = f"python examples/train_gpt.py --out-dir {args.out_dir} --resume"
    train_time = 0.0
    bar = None
    if not args.no_progress and train_to > start_iter:
        from tqdm import tqdm
        bar = tqdm(total=train_to, initial=start_iter, unit="step", dynamic_ncols=True)
    val = None
    saved = start_iter if ckpt else None   # the step the checkpoint on disk holds
    it = start_iter
    stop = StopRequest()
    with stop:
        try:
            for it in range(start_iter, train_to):
                t0 = time.perf_counter()
                x, y = batch(corpus, "train", args)
                _, loss = model(x, y)
                opt.zero_grad()
                loss.backward()
                if args.grad_clip > 0:
                    nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
                opt.step()
                sched.step()
                dt = time.perf_counter() - t0
                train_time += dt
                lv = loss.item()
                history["train"].append((it + 1, lv))
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(loss=f"{lv:.3f}", tok_s=f"{tokens_per_step / dt:,.0f}",
                                    lr=f"{sched.get_last_lr()[0]:.1e}")
                if (it + 1) % args.eval_interval == 0 or it + 1 == train_to:
                    losses = estimate_loss(model, corpus, args)
                    val = losses["val"]
                    history["val"].append((it + 1, val))
                    msg = f"step {it + 1}: train {losses['train']:.4f}, val {val:.4f} nats/char"
                    (bar.write if bar is not None else print)(msg)
                    saved = checkpoint(it + 1)
                    save_plot(history, os.path.join(args.out_dir, "loss.png"))
                if stop.requested and it + 1 < train_to:   # honoured between whole steps
                    if saved != it + 1:
                        saved = checkpoint(it + 1)
                    if bar is not None:
                        bar.close()
                    print(saved_message(stop, f"step {it + 1}/{train_to}", ckpt_path, command))
                    raise SystemExit(stop.exit_status)
        except KeyboardInterrupt:   # a second Ctrl-C, mid-step: the state in memory is not a whole step
            if bar is not None:
                bar.close()
            print(unsaved_message(f"step {it + 1}", it, saved, ckpt_path, command))
            raise SystemExit(130) from None
    if bar is not None:
        bar.close()
    steps = train_to - start_iter
    if steps > 0:
        print(f"trained {steps} steps in {train_time:.1f} s ({steps * tokens_per_step / train_time:,.0f} tokens/s, "
              f"{1e3 * train_time / steps:.0f} ms/step); final val loss {val:.4f} nats/char "
              f"({val / math.log(2):.3f} bits/char)")

    model.cpu()  # sampling is token by token: cheapest on the host
    md.manual_seed(args.seed)
    out = model.generate(prompt, args.sample_len, temperature=args.temperature, top_k=args.top_k)
    print("---- sample ----")
    print(corpus.tokenizer.decode(out.numpy()[0]))
    return val


if __name__ == "__main__":
    main()
