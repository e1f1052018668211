"""``minidl sample CHECKPOINT``: text from a character-level language model's checkpoint.

Reads the checkpoint that ``minidl train gpt``, ``minidl train lstm`` or ``examples/train_gpt.py``
wrote (``OUT/checkpoint.npz``, by minidl.train): it holds the model's name and ``config``, its
state and the character ``tokenizer``. The directory OUT is accepted too.
"""
import os

from .. import random
from ..io import CheckpointError, load
from ..train import CHECKPOINT
from ..zoo.char_lstm import CharLSTM
from ..zoo.gpt import GPT
from .args import UsageError, nonnegative_float, nonnegative_int, positive_int, seed


class SampleError(UsageError):
    pass


MODELS = {"gpt": GPT, "lstm": CharLSTM}   # checkpoints without a model name are examples/train_gpt.py's


def add_arguments(p):
    p.add_argument("checkpoint", help=f"a GPT or LSTM checkpoint file, or the --out directory holding {CHECKPOINT}")
    p.add_argument("--prompt", default="\n")
    p.add_argument("--length", type=nonnegative_int, default=200, help="characters to generate")
    p.add_argument("--temperature", type=nonnegative_float, default=0.8, help="0: always the likeliest character")
    p.add_argument("--top-k", type=positive_int, default=None, help="sample among the k likeliest characters")
    p.add_argument("--seed", type=seed, default=0)
    p.add_argument("--num-samples", type=positive_int, default=1)
    return p


def resolve(path):
    if os.path.isdir(path):
        if os.path.exists(os.path.join(path, CHECKPOINT)):
            return os.path.join(path, CHECKPOINT)
        raise SampleError(f"{path} is a directory without {CHECKPOINT}")
    if not os.path.exists(path):
        raise SampleError(f"no such checkpoint: {path}")
    return path


def load_model(path):
    """(model, tokenizer) from a GPT or LSTM checkpoint."""
    from ..data.text import CharTokenizer
    try:
        ck = load(resolve(path))
    except CheckpointError as exc:
        raise SampleError(str(exc)) from None
    if not isinstance(ck, dict) or "config" not in ck or "tokenizer" not in ck:
        raise SampleError(f"{path} is not a language model's checkpoint (it has no config and tokenizer)")
    name = ck.get("model_name", "gpt")
    if name not in MODELS:
        raise SampleError(f"{path} holds a {name!r} model; `sample` needs a {' or '.join(MODELS)} model")
    tok = CharTokenizer.from_dict(ck["tokenizer"])
    cfg = dict(ck["config"])
    cfg.setdefault("vocab_size", tok.vocab_size)
    model = MODELS[name](**cfg)
    model.load_state_dict(ck["model"])
    model.eval()
    return model, tok


def run(args):
    model, tok = load_model(args.checkpoint)
    try:
        prompt = tok.encode(args.prompt)
    except KeyError as exc:
        raise SampleError(str(exc.args[0])) from None
    if len(prompt) == 0:
        raise SampleError("--prompt must not be empty")
    texts = []
    for i in range(args.num_samples):
        random.manual_seed(args.seed + i)
        out = model.generate(prompt[None], args.length, temperature=args.temperature, top_k=args.top_k)
        texts.append(tok.decode(out.numpy(force=True)[0]))
        if i:
            print("-" * 40)
        print(texts[-1])
    return texts
