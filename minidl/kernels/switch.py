"""Choosing, per op family, between the readable NumPy reference and the fast kernel.

Every op with a kernel (the norms, conv/pooling/gelu/embedding, attention) has two
implementations of the same math. A family's switch lets a reader, a test or a benchmark run
the very same layer on either:

    from minidl.ops.normalization import implementation
    with implementation("reference"):
        y = F.layer_norm(x, (768,))

Each family's default comes from an environment variable (MINIDL_NORM_IMPL,
MINIDL_LAYER_IMPL, MINIDL_ATTENTION_IMPL) read at import.
"""
import os
from contextlib import contextmanager


class ImplementationSwitch:
    def __init__(self, family, env_var, choices=("numba", "reference"), default="numba"):
        self.family, self.env_var, self.choices = family, env_var, tuple(choices)
        self.current = os.environ.get(env_var, default)
        if self.current not in self.choices:
            raise ValueError(f"{env_var}: expected one of {self.choices}, got {self.current!r}")

    def set(self, name):
        """Select an implementation for the whole family; returns the previous one."""
        if name not in self.choices:
            raise ValueError(f"set_implementation ({self.family} ops): expected one of {self.choices}, got {name!r}")
        previous, self.current = self.current, name
        return previous

    def get(self):
        return self.current

    @contextmanager
    def use(self, name):
        """``with switch.use("reference"): ...`` selects ``name`` inside the block only."""
        previous = self.set(name)
        try:
            yield
        finally:
            self.set(previous)

    def use_kernel(self, array):
        """True when the CPU kernel should handle ``array``: not "reference", and a NumPy
        array (other devices bring their own kernels)."""
        return self.current != "reference" and type(array).__module__ == "numpy"
