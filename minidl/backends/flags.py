"""``md.backends.cudnn`` / ``md.backends.mps`` (and, in cuda_flags.py, ``md.backends.cuda``):
PyTorch's switches for vendor libraries, so that scripts setting them run unchanged.

minidl uses neither cuDNN nor Apple's MPS: its GPU kernels are its own (numba.cuda), which
have no autotuning to benchmark, no nondeterministic algorithm to avoid and no TF32 mode.
The flags therefore accept and remember any assignment and change nothing.
"""


class _Flags:
    """A namespace whose known flags start at PyTorch's defaults and take any bool."""

    def __init__(self, name, **defaults):
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_known", set(defaults))
        for k, v in defaults.items():
            object.__setattr__(self, k, v)

    def __setattr__(self, key, value):
        if key not in self._known:
            raise AttributeError(f"{self._name} has no flag {key!r}; expected one of {sorted(self._known)}")
        object.__setattr__(self, key, value)

    def __repr__(self):
        return f"<{self._name}: " + ", ".join(f"{k}={getattr(self, k)!r}" for k in sorted(self._known)) + ">"


class _Cudnn(_Flags):
    def __init__(self):
        super().__init__("minidl.backends.cudnn", enabled=True, benchmark=False, deterministic=False,
                         allow_tf32=True, benchmark_limit=10)

    @staticmethod
    def is_available():
        """False: minidl's GPU kernels do not use cuDNN."""
        return False

    @staticmethod
    def version():
        return None

    def flags(self, enabled=False, benchmark=False, deterministic=False, allow_tf32=True, **_):
        """``with md.backends.cudnn.flags(...)``: set the flags for a block, restored after."""
        import contextlib

        @contextlib.contextmanager
        def scope():
            old = {k: getattr(self, k) for k in ("enabled", "benchmark", "deterministic", "allow_tf32")}
            for k, v in dict(enabled=enabled, benchmark=benchmark, deterministic=deterministic,
                             allow_tf32=allow_tf32).items():
                setattr(self, k, v)
            try:
                yield
            finally:
                for k, v in old.items():
                    setattr(self, k, v)
        return scope()


class _Mps(_Flags):
    def __init__(self):
        super().__init__("minidl.backends.mps")

    @staticmethod
    def is_available():
        """False: minidl has no Apple GPU device."""
        return False

    @staticmethod
    def is_built():
        return False


cudnn = _Cudnn()
mps = _Mps()
