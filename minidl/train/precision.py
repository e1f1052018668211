"""The numeric precision a training run computes in: fp32, or mixed precision with fp16 or bf16.

``Precision("fp16", device)`` is what ``fit`` and ``train_step`` are given (default: fp32):

- ``autocast()``: the context the forward pass and the loss run in; fp16 and bf16 run the model's
  matrix products and convolutions in that dtype under ``md.autocast(device, dtype)``, and keep
  norms, softmax and losses in float32 (PyTorch's op policy). The parameters stay float32.
- ``scaler``: fp16 gets a GradScaler (float16 gradients underflow without loss scaling, see
  minidl/amp/grad_scaler.py); its state is saved in the checkpoint and restored on resume, so a
  resumed run skips and scales exactly the steps the uninterrupted one did. bf16 has float32's
  exponent range and gets no scaler, as in PyTorch's practice.
- ``measure_memory(model, loss, batch)``: the activation bytes one step keeps for backward in this
  precision and in fp32 (minidl/train/memory.py), measured on one batch without changing the run
  (the model's buffers and minidl's RNG are put back afterwards).
"""
import contextlib

from .. import random
from . import memory

PRECISIONS = ("fp32", "fp16", "bf16")


def _low_dtype(name):
    from ..tensor import dtype
    return {"fp16": dtype.float16, "bf16": dtype.bfloat16}[name]


def _autocast(name, device):
    """The region a forward pass in precision ``name`` runs in."""
    if name == "fp32":
        return contextlib.nullcontext()
    from ..amp import autocast
    return autocast(device, dtype=_low_dtype(name))


class Precision:
    def __init__(self, name="fp32", device="cpu"):
        if name not in PRECISIONS:
            raise ValueError(f"precision: expected one of {', '.join(PRECISIONS)}, got {name!r}")
        self.name, self.device = name, str(device).split(":")[0]
        self.scaler = None
        if name == "fp16":
            from ..amp.grad_scaler import GradScaler
            self.scaler = GradScaler(self.device)
        self.memory = None   # {"fp32": GraphBytes, name: GraphBytes} once measured
        self.skipped = 0     # optimizer steps the scaler skipped in this call of fit

    @property
    def mixed(self):
        return self.name != "fp32"

    def autocast(self):
        return _autocast(self.name, self.device)

    # the step ---------------------------------------------------------------------------------
    def backward_and_step(self, value, optimizer, clip):
        """``value.backward()`` and the optimizer step (through the scaler for fp16); ``clip()`` (or
        None) clips the gradients in between, after they are unscaled. Returns whether it stepped."""
        if self.scaler is None:
            value.backward()
            if clip is not None:
                clip()
            optimizer.step()
            return True
        scaler = self.scaler
        scale = scaler.get_scale()
        scaler.scale(value).backward()
        if clip is not None:
            scaler.unscale_(optimizer)
            clip()
        scaler.step(optimizer)
        scaler.update()
        stepped = scaler.get_scale() >= scale   # a skipped step is the only way S shrinks
        self.skipped += not stepped
        return stepped

    # checkpoints ------------------------------------------------------------------------------
    def state_dict(self):
        return self.scaler.state_dict() if self.scaler is not None else None

    def load_state_dict(self, state):
        if self.scaler is not None and state:
            self.scaler.load_state_dict(state)

    # memory -----------------------------------------------------------------------------------
    def measure_memory(self, model, loss, batch):
        """Measure the activation bytes kept for backward on ``batch`` in fp32 and in this precision
        (two forward passes whose graphs are dropped); nothing of the run changes."""
        buffers = [(b, b._data.copy()) for b in model.buffers()]
        rng = random.get_rng_state()
        found = {}
        try:
            for name in dict.fromkeys(("fp32", self.name)):
                with _autocast(name, self.device):
                    value = loss(batch)
                found[name] = memory.graph_bytes(value)
                del value
        finally:
            for b, saved in buffers:
                b._data[...] = saved
            random.set_rng_state(rng)
        self.memory = found
        return found

    def memory_line(self):
        if not self.memory:
            return None
        ref, got = self.memory["fp32"], self.memory[self.name]
        if self.name == "fp32":
            return f"activations kept for backward: {memory.show_bytes(got.saved)} (held by the graph " \
                   f"{memory.show_bytes(got.held)})"
        return (f"activations kept for backward: {memory.show_bytes(got.saved)} in {self.name} vs "
                f"{memory.show_bytes(ref.saved)} in fp32 ({got.saved / max(ref.saved, 1):.2f}x); held by the "
                f"graph {memory.show_bytes(got.held)} vs {memory.show_bytes(ref.held)} "
                f"({got.held / max(ref.held, 1):.2f}x)")

    def describe(self):
        """What metrics.json records about the run's precision."""
        out = {"precision": self.name}
        if self.scaler is not None:
            out.update(loss_scale=self.scaler.get_scale(), skipped_steps=self.skipped)
        if self.memory:
            out["activation_bytes"] = {k: {"saved": v.saved, "held": v.held, "saved_by_dtype": v.by_dtype}
                                       for k, v in self.memory.items()}
        return out
