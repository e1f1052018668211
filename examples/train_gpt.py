"""Train a small character-level GPT on the Python documentation that ships with CPython.

    python examples/train_gpt.py                       # default config: a few minutes on 2 cores
    python examples/train_gpt.py --data my.txt --steps 3000 --d-model 192
    python examples/train_gpt.py --out runs/gpt --resume          # continue a stopped run
    python -m minidl sample runs/gpt                              # sample again, without training

The model, the data and the optimizer are built here; minidl.train's loop (the one behind
``minidl train``) trains them: a progress bar (loss, tokens/s), the training and validation
loss (nats per character) every ``--eval-every`` steps, and in --out: ``checkpoint.npz``
(with the model's config and the tokenizer, at each evaluation and when stopped),
``metrics.csv``, ``metrics.json`` and ``loss.png``. A sample is printed at the end.

Ctrl-C or SIGTERM stops after the step in flight, saves it and exits with status 130 (143).
``--resume`` continues exactly where it stopped (batches, dropout and the evaluation batches
all come from md's RNG, which the checkpoint holds), with the architecture and
hyper-parameters stored there: given again, a flag must agree with them, except
``--steps``/``--epochs`` (the run's new length), the sampling flags, ``--device`` and
``--no-progress``. ``--eval-every`` is stored too: evaluation draws from the same RNG.
"""
import argparse
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import minidl as md  # noqa: E402
from minidl import optim, train  # noqa: E402
from minidl.cli.args import (check_heads, fraction, nonnegative_float, nonnegative_int, open_fraction,  # noqa: E402
                             positive_float, positive_int, unit_interval)
from minidl.data.text import CharCorpus, CharTokenizer, load_text  # noqa: E402
from minidl.zoo.gpt import GPT  # noqa: E402

PROGRAM = "examples/train_gpt.py"
MODEL_KEYS = ("block_size", "n_layer", "n_head", "d_model", "dropout", "norm_position", "norm", "pos")
# besides the architecture, what a resumed run takes from its checkpoint (given again, a flag must agree)
STORED = MODEL_KEYS + ("data", "batch_size", "lr", "min_lr_ratio", "warmup", "weight_decay", "grad_clip",
                       "eval_every", "eval_iters", "val_fraction", "seed")


def build_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=None, help="a UTF-8 text file (default: CPython's pydoc_data topics)")
    p.add_argument("--block-size", type=positive_int, default=64)
    p.add_argument("--n-layer", type=positive_int, default=4)
    p.add_argument("--n-head", type=positive_int, default=4)
    p.add_argument("--d-model", type=positive_int, default=128)
    p.add_argument("--dropout", type=fraction, default=0.0)
    p.add_argument("--norm-position", default="pre", choices=["pre", "post", "deepnorm"])
    p.add_argument("--norm", default="layer", choices=["layer", "rms", "scale"])
    p.add_argument("--pos", default="learned", choices=["learned", "sinusoidal", "rotary"])
    p.add_argument("--batch-size", type=positive_int, default=32)
    p.add_argument("--lr", type=positive_float, default=3e-3)
    p.add_argument("--min-lr-ratio", type=unit_interval, default=0.1)
    p.add_argument("--warmup", type=nonnegative_int, default=50)
    p.add_argument("--weight-decay", type=nonnegative_float, default=0.1)
    p.add_argument("--grad-clip", type=nonnegative_float, default=1.0, help="clip the global gradient norm (0: off)")
    p.add_argument("--eval-iters", type=positive_int, default=20)
    p.add_argument("--val-fraction", type=open_fraction, default=0.1)
    p.add_argument("--sample-len", type=nonnegative_int, default=400)
    p.add_argument("--temperature", type=nonnegative_float, default=0.8, help="0: always the likeliest character")
    p.add_argument("--top-k", type=positive_int, default=None)
    p.add_argument("--prompt", default="\n")
    train.add_arguments(p, out="runs/gpt", seed_default=1337, length="800 steps", eval_every="200")
    return p


def build_corpus(args, tokenizer):
    try:
        corpus = CharCorpus(load_text(args.data), tokenizer=tokenizer, val_fraction=args.val_fraction)
        prompt = corpus.tokenizer.encode(args.prompt)[None]
    except (OSError, UnicodeDecodeError, KeyError) as exc:
        raise train.UsageError(str(exc.args[0]) if isinstance(exc, KeyError) else f"--data {args.data}: {exc}")
    shortest = min(len(corpus.train), len(corpus.val))
    if args.block_size >= shortest:
        raise train.UsageError(f"--block-size {args.block_size}: the text's smaller split has {shortest} characters; "
                               "expected a block size below that")
    if not args.prompt:
        raise train.UsageError("--prompt must not be empty")
    return corpus, prompt


def main(argv=None):
    parser = build_parser()
    args, given = train.given_options(parser, argv)
    try:   # a bad --out, a checkpoint this script did not write, a flag that disagrees with it: exit status 2
        run = train.Run(args.out, PROGRAM, resume=args.resume, device=args.device)
        run.adopt(args, STORED, given, same={"data": train.same_data})
        args.eval_every = args.eval_every or 200
        if args.data is not None:
            args.data = os.path.abspath(args.data)   # a resumed run finds it from any directory
        check_heads(args.d_model, args.n_head, head_dim_even=args.pos == "rotary")
        md.manual_seed(args.seed)
        tokenizer = CharTokenizer.from_dict(run.checkpoint["tokenizer"]) if run.checkpoint else None
        corpus, prompt = build_corpus(args, tokenizer)
        steps = run.length(args.steps, args.epochs, len(corpus.train) // (args.batch_size * args.block_size),
                           default_steps=800)
    except train.UsageError as exc:
        parser.error(str(exc))
    config = {"vocab_size": corpus.vocab_size, **{k: getattr(args, k) for k in MODEL_KEYS}}
    model = GPT(**config).to(args.device)
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    opt = optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                       {"params": no_decay, "weight_decay": 0.0}], lr=args.lr, betas=(0.9, 0.99))
    sched = optim.lr_scheduler.linear_warmup_cosine(opt, min(args.warmup, steps), steps, args.min_lr_ratio)
    print(f"corpus: {len(corpus.train) + len(corpus.val):,} chars, vocab {corpus.vocab_size}, "
          f"train {len(corpus.train):,} / val {len(corpus.val):,}; model: {config}")

    def batch(split):   # random windows, drawn from md's RNG
        x, y = corpus.batch(split, args.batch_size, args.block_size)
        return x.to(args.device), y.to(args.device)

    def evaluate():   # the mean loss over eval_iters random batches of each split, in eval mode
        model.eval()
        with md.no_grad():
            out = {f"{split}_loss": float(np.mean([model(*batch(split))[1].item() for _ in range(args.eval_iters)]))
                   for split in ("train", "val")}
        model.train()
        return out

    result = train.fit(run, model, opt, sched, lambda step: batch("train"), lambda b: model(*b)[1], steps,
                       evaluate=evaluate, eval_every=args.eval_every, grad_clip=args.grad_clip,
                       progress=not args.no_progress, unit="tok", items=lambda b: b[0].numel(), args=args,
                       config=config, extra={"model_name": "gpt", "tokenizer": corpus.tokenizer.to_dict()},
                       title="char-level GPT")
    if result.status:   # stopped or diverged: no sample
        return result
    if result.last_eval:
        val = result.last_eval["val_loss"]
        print(f"validation loss {val:.4f} nats/char ({val / math.log(2):.3f} bits/char)")
    model.cpu()  # sampling is token by token: cheapest on the host
    md.manual_seed(args.seed)
    out = model.generate(prompt, args.sample_len, temperature=args.temperature, top_k=args.top_k)
    print("---- sample ----")
    print(corpus.tokenizer.decode(out.numpy()[0]))
    return result


if __name__ == "__main__":
    raise SystemExit(main().status)
