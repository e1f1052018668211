"""One registry of implementation switches, and the one rule that picks an op's implementation.

Every op with a kernel has two or more implementations of the same math behind one array-level
signature: the readable reference (array-namespace code in ``minidl/ops``, which runs on every
device) and, per device, a kernel module (``minidl/kernels/cpu``, ``minidl/kernels/cuda``) that
holds functions of the same names and arguments. A *family* of ops shares one switch:

    norm       the normalization Functions                            MINIDL_NORM_IMPL
    layer      conv2d, pooling, gelu, embedding, linear's bias,       MINIDL_LAYER_IMPL
               cross-entropy
    attention  scaled_dot_product_attention                            MINIDL_ATTENTION_IMPL
    optim      the optimizers' fused updates                           MINIDL_OPTIM_IMPL
    rnn        the recurrent layers' gate kernels                      MINIDL_RNN_IMPL

    with minidl.implementation(norm="reference"):           # for the block only
        y = F.layer_norm(x, (768,))
    minidl.set_implementation(layer="reference")              # returns the previous settings
    minidl.get_implementation("norm")

The environment variable sets a family's default at import. The rule is the same for every family
and every device: "reference" runs the reference; any other setting runs the kernel of the
array's device where the op has one, and the reference where it has none. One exception: Numba
cannot type float16 or bfloat16 arrays, so a CPU array of either runs the reference (NumPy in
that dtype) unless the family's CPU kernels convert such inputs themselves (the norms, which
compute in float32 and round the result once: ``reads_low_precision``).

An op selects once per node, in forward (``ctx.impl = KERNELS.select(x)``), and backward calls the
same implementation: the two halves share what forward saved (statistics, layouts), so a setting
changed in between must not pair one implementation's forward with another's backward.
"""
import importlib
import os
from contextlib import contextmanager

from ..backends import device_of

_REGISTRY = {}
# families whose switch lives with their ops and registers on import (imported on first lookup)
_HOMES = {"rnn": "minidl.ops.rnn._loop"}


class ImplementationSwitch:
    """The setting of one family of ops; registered under ``family`` when made."""

    def __init__(self, family, env_var, choices=("numba", "reference"), default="numba", reads_low_precision=False):
        if family in _REGISTRY:
            raise ValueError(f"implementation family {family!r} is already registered")
        self.family, self.env_var, self.choices = family, env_var, tuple(choices)
        self.reads_low_precision = reads_low_precision   # its CPU kernels take float16/bfloat16 arrays
        self.current = os.environ.get(env_var, default)
        if self.current not in self.choices:
            raise ValueError(f"{env_var}: expected one of {self.choices}, got {self.current!r}")
        _REGISTRY[family] = self

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

    @property
    def reference(self):
        """True when the family runs its references on every device."""
        return self.current == "reference"

    def use_kernel(self, array):
        """For an op whose only kernel is the CPU's: True when that kernel should handle ``array``
        (the rule of ``Kernels.select`` for such an op)."""
        return not self.reference and type(array).__module__ == "numpy" and (
            self.reads_low_precision or not _low_precision(array))

    def kernels(self, names, reference, fallback=(), **devices):
        """The implementations of one op of this family (see ``Kernels``)."""
        return Kernels(self, names, reference, devices, fallback)


class Implementation:
    """One implementation of an op: ``name`` ("reference" or a device), and the op's functions as
    attributes (``impl.layer_norm_forward(...)``), looked up in their module at each call (so a
    test may patch a kernel module's function)."""

    def __init__(self, name, functions):
        self.name, self._functions = name, functions   # attribute name -> (module, name in it)

    def __getattr__(self, attr):
        try:
            module, name = self.__dict__["_functions"][attr]
        except KeyError:
            raise AttributeError(f"the {self.__dict__.get('name')} implementation has no {attr!r}") from None
        return getattr(module, name)

    def __repr__(self):
        return f"<{self.name} implementation of {', '.join(self._functions)}>"


class Kernels:
    """An op's implementations: the functions ``names``, looked up as ``<name>_reference`` in the
    module ``reference`` and as ``<name>`` in each device's module (``cpu="minidl.kernels.cpu.x"``);
    a device module may leave the names in ``fallback`` to the reference's. Modules are imported
    on first selection (Numba compiles the CPU kernels on import)."""

    def __init__(self, switch, names, reference, devices, fallback=()):
        self.switch, self.names, self.fallback = switch, tuple(names), frozenset(fallback)
        self._modules = {"reference": reference, **devices}
        self._loaded = {}

    def _load(self, key):
        impl = self._loaded.get(key)
        if impl is None:
            impl = self._loaded[key] = Implementation(key, {name: self._function(key, name) for name in self.names})
        return impl

    def _function(self, key, name):
        if key != "reference":
            module = importlib.import_module(self._modules[key])
            if name not in self.fallback or hasattr(module, name):
                getattr(module, name)    # a missing kernel fails here, at first selection
                return module, name
        module = importlib.import_module(self._modules["reference"])
        getattr(module, name + "_reference")
        return module, name + "_reference"

    def select(self, array):
        """The implementation for ``array`` under the family's setting (the rule in the module docstring)."""
        if not self.switch.reference:
            device = device_of(array)
            if device in self._modules and (device != "cpu" or self.switch.reads_low_precision
                                            or not _low_precision(array)):
                return self._load(device)
        return self._load("reference")

    @property
    def devices(self):
        return tuple(k for k in self._modules if k != "reference")


def _low_precision(array):
    """float16 or bfloat16 (NumPy files bfloat16 under kind "V"): what Numba cannot type."""
    dt = array.dtype
    return dt.itemsize == 2 and dt.kind in "fV"


def family(name):
    """The switch of family ``name``."""
    switch = _REGISTRY.get(name)
    if switch is None and name in _HOMES:
        importlib.import_module(_HOMES[name])
        switch = _REGISTRY.get(name)
    if switch is None:
        raise ValueError(f"implementation: unknown family {name!r}; expected one of {families()}")
    return switch


def families():
    return sorted(set(_REGISTRY) | set(_HOMES))


def set_implementation(**settings):
    """``set_implementation(norm="reference", layer="numba")``: returns the previous settings (a dict
    that ``set_implementation(**previous)`` restores). Nothing changes if any setting is invalid."""
    switches = {name: family(name) for name in settings}
    for name, value in settings.items():
        if value not in switches[name].choices:
            raise ValueError(f"set_implementation ({name} ops): expected one of {switches[name].choices}, "
                             f"got {value!r}")
    return {name: switches[name].set(value) for name, value in settings.items()}


def get_implementation(name=None):
    """The setting of family ``name``, or of every family as a dict."""
    if name is not None:
        return family(name).get()
    return {n: family(n).get() for n in families()}


@contextmanager
def implementation(**settings):
    """``with implementation(norm="reference", attention="numba"): ...`` for the block only."""
    previous = set_implementation(**settings)
    try:
        yield
    finally:
        set_implementation(**previous)


NORM = ImplementationSwitch("norm", "MINIDL_NORM_IMPL", reads_low_precision=True)
LAYER = ImplementationSwitch("layer", "MINIDL_LAYER_IMPL")
ATTENTION = ImplementationSwitch("attention", "MINIDL_ATTENTION_IMPL", ("auto", "numba", "fused-softmax", "reference"),
                                 "auto")
OPTIM = ImplementationSwitch("optim", "MINIDL_OPTIM_IMPL")


def into(out, y):
    """``y`` written into ``out`` when one is given, else ``y``: a reference's side of the kernels'
    ``out=`` convention (a kernel writes its result straight into the caller's buffer)."""
    if out is None:
        return y
    out[...] = y
    return out
