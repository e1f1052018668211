"""Train a small character-level GPT on the Python documentation that ships with CPython.

    python examples/train_gpt.py                       # default config: a few minutes on 2 cores
    python examples/train_gpt.py --data my.txt --max-iters 3000 --d-model 192

Shows a progress bar (loss, tokens/s), evaluates the validation loss (nats per character)
every ``--eval-interval`` steps, saves checkpoints (``md.save``: model, optimizer, config,
tokenizer) and a loss plot to ``--out-dir``, and prints a sample at the end.
Resume with ``--resume``; sample from a checkpoint without training with ``--max-iters 0 --resume``.
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
from minidl.data.text import CharCorpus, CharTokenizer, load_text  # noqa: E402
from minidl.zoo.gpt import GPT  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=None, help="a UTF-8 text file (default: CPython's pydoc_data topics)")
    p.add_argument("--out-dir", default="runs/gpt")
    p.add_argument("--block-size", type=int, default=64)
    p.add_argument("--n-layer", type=int, default=4)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--norm-position", default="pre", choices=["pre", "post", "deepnorm"])
    p.add_argument("--norm", default="layer", choices=["layer", "rms", "scale"])
    p.add_argument("--pos", default="learned", choices=["learned", "sinusoidal", "rotary"])
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-iters", type=int, default=800)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--min-lr-ratio", type=float, default=0.1)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--grad-clip", type=float, default=1.0, help="clip the global gradient norm (0: off)")
    p.add_argument("--eval-interval", type=int, default=200)
    p.add_argument("--eval-iters", type=int, default=20)
    p.add_argument("--val-fraction", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--sample-len", type=int, default=400)
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--top-k", type=int, default=None)
    p.add_argument("--prompt", default="\n")
    p.add_argument("--resume", action="store_true", help="continue from OUT_DIR/ckpt.npz")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    return p.parse_args(argv)


MODEL_KEYS = ("block_size", "n_layer", "n_head", "d_model", "dropout", "norm_position", "norm", "pos")


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


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.out_dir, exist_ok=True)
    ckpt_path = os.path.join(args.out_dir, "ckpt.npz")
    md.manual_seed(args.seed)

    text = load_text(args.data)
    start_iter, history = 0, {"train": [], "val": []}
    ckpt = md.load(ckpt_path) if args.resume else None
    tokenizer = CharTokenizer.from_dict(ckpt["tokenizer"]) if ckpt else None
    corpus = CharCorpus(text, tokenizer=tokenizer, val_fraction=args.val_fraction)
    if ckpt:
        for k in MODEL_KEYS:  # the architecture comes from the checkpoint
            setattr(args, k, ckpt["config"][k])
    cfg = {k: getattr(args, k) for k in MODEL_KEYS}
    model = GPT(vocab_size=corpus.vocab_size, **cfg).to(args.device)
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    opt = optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                       {"params": no_decay, "weight_decay": 0.0}], lr=args.lr, betas=(0.9, 0.99))
    sched = optim.lr_scheduler.linear_warmup_cosine(opt, min(args.warmup, max(args.max_iters, 1)),
                                                    max(args.max_iters, 1), args.min_lr_ratio)
    if ckpt:
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        start_iter = int(ckpt["iter"])
        history = {k: [tuple(x) for x in v] for k, v in ckpt["history"].items()}
        md.set_rng_state(json.loads(ckpt["rng_state"]))
        for _ in range(start_iter):
            sched.step()

    print(f"corpus: {len(text):,} chars, vocab {corpus.vocab_size}, train {len(corpus.train):,} / "
          f"val {len(corpus.val):,}; model: {model.num_parameters():,} parameters; {cfg}")

    def checkpoint(it):
        md.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "config": cfg, "iter": it,
                 "tokenizer": corpus.tokenizer.to_dict(),
                 "history": {k: [list(x) for x in v] for k, v in history.items()},
                 "rng_state": json.dumps(md.get_rng_state())}, ckpt_path)

    tokens_per_step = args.batch_size * args.block_size
    train_time = 0.0
    bar = None
    if not args.no_progress and args.max_iters > start_iter:
        from tqdm import tqdm
        bar = tqdm(total=args.max_iters, initial=start_iter, unit="step", dynamic_ncols=True)
    val = None
    for it in range(start_iter, args.max_iters):
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
            bar.set_postfix(loss=f"{lv:.3f}", tok_s=f"{tokens_per_step / dt:,.0f}", lr=f"{sched.get_last_lr()[0]:.1e}")
        if (it + 1) % args.eval_interval == 0 or it + 1 == args.max_iters:
            losses = estimate_loss(model, corpus, args)
            val = losses["val"]
            history["val"].append((it + 1, val))
            msg = f"step {it + 1}: train {losses['train']:.4f}, val {val:.4f} nats/char"
            (bar.write if bar is not None else print)(msg)
            checkpoint(it + 1)
            save_plot(history, os.path.join(args.out_dir, "loss.png"))
    if bar is not None:
        bar.close()
    steps = args.max_iters - start_iter
    if steps > 0:
        print(f"trained {steps} steps in {train_time:.1f} s ({steps * tokens_per_step / train_time:,.0f} tokens/s, "
              f"{1e3 * train_time / steps:.0f} ms/step); final val loss {val:.4f} nats/char "
              f"({val / math.log(2):.3f} bits/char)")

    model.cpu()  # sampling is token by token: cheapest on the host
    md.manual_seed(args.seed)
    prompt = corpus.tokenizer.encode(args.prompt)[None]
    out = model.generate(prompt, args.sample_len, temperature=args.temperature, top_k=args.top_k)
    print("---- sample ----")
    print(corpus.tokenizer.decode(out.numpy()[0]))
    return val


if __name__ == "__main__":
    main()
