"""The normalization lab: small experiments that reproduce claims from the normalization
literature with minidl's own layers, each printing a table and saving a figure.

    from minidl.lab import run
    result = run("groupnorm", quick=True, out="runs/lab/groupnorm")
    print(result.format())

or ``python -m minidl lab groupnorm --quick``. Every experiment has a quick mode (well under
two minutes on two cores) and a full mode (larger models, more steps). See docs/lab.md.
"""
import importlib
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
}


def get(name):
    """The experiment module ``name`` (see ``EXPERIMENTS``)."""
    if name not in EXPERIMENTS:
        raise ValueError(f"unknown lab experiment {name!r}; expected one of {', '.join(EXPERIMENTS)}")
    return importlib.import_module(f".{EXPERIMENTS[name][0]}", __name__)


def run(name, quick=True, out=None, seed=0, save=True, progress=None):
    """Run experiment ``name``; its figure (and result.json) go to ``out`` (default
    runs/lab/NAME). Returns the LabResult. ``progress``: a progress bar per training loop
    (default: in full mode, whose runs take minutes)."""
    out = out or os.path.join("runs", "lab", name)
    with progress_bars(not quick if progress is None else progress):
        result = get(name).run(quick=quick, out=out, seed=seed)
    if save:
        result.save_json(os.path.join(out, "result.json"))
    return result


__all__ = ["EXPERIMENTS", "LabResult", "Table", "get", "run"]
