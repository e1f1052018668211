"""The normalization lab: small experiments that reproduce claims from the normalization
literature with minidl's own layers, each printing a table and saving a figure.

    from minidl.lab import run
    result = run("groupnorm", quick=True, out="runs/lab/groupnorm")
    print(result.format())

or ``python -m minidl lab groupnorm --quick``. Every experiment has a quick mode (under a minute
on two cores: 3-37 s of CPU time each) and a full mode (larger models, more steps). See docs/lab.md.
"""
import importlib
import inspect
import os

from ._common import LabResult, Table, progress_bars

# name -> (module, one-line description), in the order the lab presents them
EXPERIMENTS = {
    "padding": ("padding", "BatchNorm vs masked BatchNorm vs LayerNorm on padded sequences"),
    "batch-size": ("batch_size", "BatchNorm vs GroupNorm vs LayerNorm in a ResNet across batch sizes"),
    "train-eval": ("train_eval", "the train-mode / eval-mode output gap of BatchNorm vs LayerNorm"),
    "pre-post": ("pre_post", "Pre-LN vs Post-LN GPT, with and without warm-up; gradients at init"),
    "deepnorm": ("deepnorm", "a deep narrow Post-LN Transformer vs DeepNorm"),
    "rmsnorm": ("rmsnorm", "RMSNorm vs LayerNorm: kernel time and training loss"),
    "groupnorm": ("groupnorm", "GroupNorm from 1 to C groups: from LayerNorm to InstanceNorm"),
    "precision": ("precision", "float16 LayerNorm: float16 vs float32 accumulation across eps"),
    "axes": ("axes", "which axes BN, LN, IN and GN reduce over, probed from the layers"),
    "fp16-eps": ("fp16_eps", "float16 training with GradScaler: norm eps, float16 vs float32 statistics"),
    "qk-norm": ("qk_norm", "attention-logit growth with the learning rate, with and without qk-norm"),
    "sync-bn": ("sync_bn", "BatchNorm per device vs SyncBatchNorm vs GroupNorm at 2 images/device; ghost batches"),
    "ln-lstm": ("ln_lstm", "LSTM vs LayerNorm-LSTM vs recurrent BatchNorm; sequences longer than in training"),
    "renorm": ("renorm", "non-i.i.d. batches: BatchNorm vs Batch Renormalization vs precise statistics"),
    "weight-std": ("weight_std", "GroupNorm + Weight Standardization at batch 1-2 vs BatchNorm at batch 64"),
    "signal-prop": ("signal_prop", "residual stream variance at init and training: BN, none, SkipInit, Fixup"),
    "landscape": ("landscape", "VGG with/without BN: loss and gradient change along the gradient; noisy BN"),
}


def get(name):
    """The experiment module ``name`` (see ``EXPERIMENTS``)."""
    if name not in EXPERIMENTS:
        raise ValueError(f"unknown lab experiment {name!r}; expected one of {', '.join(EXPERIMENTS)}")
    return importlib.import_module(f".{EXPERIMENTS[name][0]}", __name__)


def run(name, quick=True, out=None, seed=0, save=True, progress=None, **options):
    """Run experiment ``name``; its figure (and result.json) go to ``out`` (default
    runs/lab/NAME). Returns the LabResult. ``progress``: a progress bar per training loop
    (default: in full mode, whose runs take minutes). ``options``: the experiment's own
    keyword arguments (``dataset="shapes"`` for batch-size); one it does not take is an error."""
    module = get(name)
    accepted = inspect.signature(module.run).parameters
    unknown = [k for k in options if k not in accepted]
    if unknown:
        raise ValueError(f"lab experiment {name!r} takes no option {', '.join(map(repr, unknown))}")
    out = out or os.path.join("runs", "lab", name if not options.get("dataset") or options["dataset"] == "digits"
                              else f"{name}-{options['dataset']}")
    with progress_bars(not quick if progress is None else progress):
        result = module.run(quick=quick, out=out, seed=seed, **options)
    if save:
        result.save_json(os.path.join(out, "result.json"))
    return result


__all__ = ["EXPERIMENTS", "LabResult", "Table", "get", "run"]
