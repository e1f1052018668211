"""``md.compile``: torch.compile's interface, without a graph compiler.

minidl's speed comes from the kernels every op already runs, so compiling changes no
computation; what ``md.compile`` keeps is what code written for torch.compile relies on. A
module comes back wrapped in an ``OptimizedModule`` (torch's class of that name), which

- holds the module as its one child, ``_orig_mod``, so that its ``state_dict()`` keys start
  with ``_orig_mod.`` (the prefix training scripts strip on resume) and its
  ``load_state_dict`` takes them;
- calls the module (its hooks included) when called, and shares its parameters (the same
  objects), its mode (``training`` is the module's; ``train()``/``eval()`` reach it) and its
  attributes: reading, setting and deleting any name not the wrapper's own goes to the module;
- pickles and deep-copies as a wrapper of a copy of the module.

A function comes back as a function that calls it (``__wrapped__`` is the function); with
``disable=True`` the model comes back unchanged, as from torch.compile.
"""
import functools

from .nn.modules.module import Module

_MODES = ("default", "lite", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune")
_BACKENDS = ("inductor", "eager", "aot_eager", "cudagraphs", "openxla", "tvm", "ts", "aot_ts")


class OptimizedModule(Module):
    """A compiled module: ``_orig_mod`` called through this wrapper (see the module docstring)."""

    _own_attributes = frozenset({"_orig_mod", "forward", "__dict__"})

    def __init__(self, mod):
        super().__init__()
        Module.__setattr__(self, "_orig_mod", mod)   # registers it as the child "_orig_mod"

    def forward(self, *args, **kwargs):
        return self._orig_mod(*args, **kwargs)

    @property
    def training(self):
        mod = self.__dict__.get("_modules", {}).get("_orig_mod")
        return True if mod is None else mod.training

    @training.setter
    def training(self, value):
        mod = self.__dict__.get("_modules", {}).get("_orig_mod")
        if mod is not None:      # Module.__init__'s default, before the module is there, is not kept
            mod.training = value

    def __getattr__(self, name):
        modules = self.__dict__.get("_modules")
        # not forwarded: before initialisation (while unpickled or copied), and the protocols'
        # special names, which must describe the wrapper (copy looks up __deepcopy__ so)
        if modules is None or "_orig_mod" not in modules or (name.startswith("__") and name.endswith("__")):
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        if name == "_orig_mod":
            return modules["_orig_mod"]
        return getattr(modules["_orig_mod"], name)

    def __setattr__(self, name, value):
        if hasattr(type(self), name) or name in self._own_attributes:
            Module.__setattr__(self, name, value)
        else:
            setattr(self._orig_mod, name, value)

    def __delattr__(self, name):
        if hasattr(type(self), name) or name in self._own_attributes:
            Module.__delattr__(self, name)
        else:
            delattr(self._orig_mod, name)

    def __len__(self):
        mod = self._orig_mod
        if not hasattr(type(mod), "__len__"):
            raise TypeError(f"{type(mod).__name__} does not support len()")
        return len(mod)

    def __dir__(self):
        own = self._orig_mod.__dir__()
        return own + [name for name in super().__dir__() if name not in own]


def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None,  # noqa: A001
            options=None, disable=False, **unused):
    """torch.compile: a Module as an ``OptimizedModule``, a function as a function calling it;
    with no model, a decorator doing so. The options are checked as torch checks them and
    change nothing else."""
    for name in unused:
        if name not in ("name", "recompile_limit", "isolate_recompiles", "shapes_spec"):
            raise TypeError(f"compile() got an unexpected keyword argument '{name}'")
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be specified at the same time.")
    if mode is not None and mode not in _MODES:
        raise RuntimeError(f"Unrecognized mode={mode}, should be one of: {', '.join(_MODES)}")
    if isinstance(backend, str) and backend not in _BACKENDS:
        raise RuntimeError(f"Invalid backend: {backend!r}; the backends are {', '.join(_BACKENDS)} (minidl runs "
                           "every one as eager execution)")
    if model is None:
        def decorate(fn):
            return compile(fn, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode, options=options,
                           disable=disable, **unused)
        return decorate
    if not callable(model):
        raise AssertionError(f"A callable function is expected, but {type(model)} is provided.")
    if disable:
        return model
    if isinstance(model, Module):
        return OptimizedModule(model)

    @functools.wraps(model)
    def compiled(*args, **kwargs):
        return model(*args, **kwargs)
    return compiled
