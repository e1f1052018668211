"""Measuring a model in train mode without changing it: its buffers put back afterwards."""
from contextlib import contextmanager

from ..autograd import grad_mode


@contextmanager
def buffers_restored(model):
    """Run the block, then give every buffer of ``model`` (BatchNorm's running statistics and
    batch count) back the values it had before: a train-mode forward used only to measure
    updates those statistics, and the measurement must not."""
    saved = [(b, b.detach().clone()) for b in model.buffers()]
    try:
        yield
    finally:
        with grad_mode.no_grad():
            for b, value in saved:
                b.copy_(value)
