"""PyTorch's process-wide numerics switches: the float32 matmul precision and deterministic
algorithms. Training scripts set them at start-up; minidl keeps what they set and reads it
back, and on its CPU kernels neither changes a result, as explained per function.
"""
import warnings

_PRECISIONS = ("highest", "high", "medium")
_state = {"precision": "highest", "deterministic": False, "warn_only": False}


def set_float32_matmul_precision(precision):
    """As ``torch.set_float32_matmul_precision``: "highest" (float32 throughout, the default),
    "high" or "medium" (PyTorch may then use TF32 or bfloat16 tensor cores on a GPU).

    minidl's matmuls compute float32 in float32 whatever is set, as PyTorch's CPU matmuls do;
    the setting is remembered (``get_float32_matmul_precision``) and mirrored in
    ``md.backends.cuda.matmul.allow_tf32``, as PyTorch mirrors it. As PyTorch, another string
    warns and changes nothing, and a non-string is a RuntimeError."""
    if not isinstance(precision, str):
        raise RuntimeError(f"set_float32_matmul_precision expects a str, but got {type(precision).__name__}")
    if precision not in _PRECISIONS:
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current "
                      "set_float32_matmul_precision call has no effect.", UserWarning, stacklevel=2)
        return
    _state["precision"] = precision
    from .backends import cuda_flags
    cuda_flags.matmul.allow_tf32 = precision != "highest"


def get_float32_matmul_precision():
    return _state["precision"]


def use_deterministic_algorithms(mode, *, warn_only=False):
    """As ``torch.use_deterministic_algorithms``: remembered, and read back by
    ``are_deterministic_algorithms_enabled``.

    minidl's CPU kernels are deterministic already: parallel reductions sum fixed per-thread
    partial results in a fixed order and scatters are split so that no two threads write one
    element (no atomics), so a run repeats bit for bit with the same seed and thread count.
    Some of its GPU kernels accumulate with atomic adds (float sums whose last bits may vary from
    run to run); the flag does not change them, and raises nowhere."""
    if not isinstance(mode, bool):
        raise TypeError(f"use_deterministic_algorithms(): argument 'mode' must be bool, not {type(mode).__name__}")
    if not isinstance(warn_only, bool):
        raise TypeError(f"use_deterministic_algorithms(): argument 'warn_only' must be bool, not "
                        f"{type(warn_only).__name__}")
    _state["deterministic"], _state["warn_only"] = mode, warn_only   # PyTorch keeps warn_only as given


def are_deterministic_algorithms_enabled():
    return _state["deterministic"]


def is_deterministic_algorithms_warn_only_enabled():
    return _state["warn_only"]


_DEBUG_MODES = ("default", "warn", "error")


def set_deterministic_debug_mode(debug_mode):
    """As ``torch.set_deterministic_debug_mode``: "default"/0 (off), "warn"/1 (deterministic,
    warn only) or "error"/2 (deterministic)."""
    if isinstance(debug_mode, str):
        if debug_mode not in _DEBUG_MODES:
            raise RuntimeError(f"invalid value of debug_mode, expected one of `default`, `warn`, `error`, but got "
                               f"{debug_mode}")
        debug_mode = _DEBUG_MODES.index(debug_mode)
    elif not isinstance(debug_mode, int) or isinstance(debug_mode, bool):
        raise TypeError(f"debug_mode must be str or int, but got {type(debug_mode).__name__}")
    elif debug_mode not in (0, 1, 2):
        raise RuntimeError(f"invalid value of debug_mode, expected 0, 1, or 2, but got {debug_mode}")
    use_deterministic_algorithms(debug_mode != 0, warn_only=debug_mode == 1)


def get_deterministic_debug_mode():
    if not _state["deterministic"]:
        return 0
    return 1 if _state["warn_only"] else 2
