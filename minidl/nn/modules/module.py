"""Module: the base class of layers and models, with PyTorch's interface.

A Module keeps three ordered registries, filled by plain attribute assignment:
parameters (``Parameter``), buffers (tensors that are state but not learned, such as
BatchNorm's running mean, added with ``register_buffer``) and child modules. Everything
else (``parameters()``, ``state_dict()``, ``to()``, ``train()``) walks these.
"""
from collections import OrderedDict

import numpy as np

from ...tensor import dtype as dtypes
from ...tensor.tensor import Tensor
from ..parameter import Parameter


class Module:
    def __init__(self):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "training", True)

    # registration ----------------------------------------------------------------
    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            raise AttributeError("call Module.__init__() before assigning attributes in a Module subclass")
        registries = (self._parameters, self._buffers, self._modules)
        if isinstance(value, Parameter):
            target = self._parameters
        elif isinstance(value, Module):
            target = self._modules
        elif name in self._buffers or (value is None and any(name in r for r in registries)):
            target = next((r for r in registries if name in r), self._buffers)
        else:
            target = None
        for r in registries:
            if r is not target:
                r.pop(name, None)
        if target is not None:
            target[name] = value
        object.__setattr__(self, name, value)

    def register_parameter(self, name, param):
        """Register a Parameter, or None to declare an optional one (such as a disabled bias)."""
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"register_parameter: {name!r} must be a Parameter or None, got {type(param).__name__}")
        self._parameters[name] = param
        object.__setattr__(self, name, param)

    def register_buffer(self, name, tensor, persistent=True):
        """Register state that is saved in state_dict and moved by ``to`` but not trained."""
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"register_buffer: buffer {name!r} must be a Tensor or None, got {type(tensor).__name__}")
        if not persistent:
            self._non_persistent.add(name)
        self._buffers[name] = tensor
        object.__setattr__(self, name, tensor)

    def add_module(self, name, module):
        setattr(self, name, module)

    # traversal -------------------------------------------------------------------
    def named_modules(self, prefix=""):
        seen = set()
        stack = [(prefix, self)]
        while stack:
            name, m = stack.pop()
            if id(m) in seen:
                continue
            seen.add(id(m))
            yield name, m
            children = [(f"{name}.{n}" if name else n, c) for n, c in m._modules.items() if c is not None]
            stack.extend(reversed(children))

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        for n, m in self._modules.items():
            if m is not None:
                yield n, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def named_parameters(self, prefix="", recurse=True):
        seen = set()
        mods = self.named_modules(prefix) if recurse else [(prefix, self)]
        for mname, m in mods:
            for n, p in m._parameters.items():
                if p is not None and id(p) not in seen:
                    seen.add(id(p))
                    yield (f"{mname}.{n}" if mname else n), p

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix=""):
        for mname, m in self.named_modules(prefix):
            for n, b in m._buffers.items():
                if b is not None:
                    yield (f"{mname}.{n}" if mname else n), b

    def buffers(self):
        for _, b in self.named_buffers():
            yield b

    # modes -----------------------------------------------------------------------
    def train(self, mode=True):
        for m in self.modules():
            object.__setattr__(m, "training", bool(mode))
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, flag=True):
        for p in self.parameters():
            p.requires_grad_(flag)
        return self

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad._data[...] = 0

    def apply(self, fn):
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # state -------------------------------------------------------------------------
    def state_dict(self, prefix=""):
        """An ordered dict name -> Tensor of every parameter and persistent buffer (shared
        memory, detached), named as PyTorch names them (``layer.0.weight``)."""
        out = OrderedDict()
        for mname, m in self.named_modules(prefix.rstrip(".")):
            pre = f"{mname}." if mname else ""
            for n, p in m._parameters.items():
                if p is not None:
                    out[pre + n] = p.detach()
            for n, b in m._buffers.items():
                if b is not None and n not in m._non_persistent:
                    out[pre + n] = b.detach()
        return out

    def load_state_dict(self, state_dict, strict=True):
        """Copy values into this module's parameters and buffers. With ``strict``, missing or
        unexpected keys are an error; a shape mismatch always is. Every problem is listed."""
        own = OrderedDict()
        for mname, m in self.named_modules():
            pre = f"{mname}." if mname else ""
            for n, p in m._parameters.items():
                if p is not None:
                    own[pre + n] = p
            for n, b in m._buffers.items():
                if b is not None and n not in m._non_persistent:
                    own[pre + n] = b
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        mismatched = []
        for k, target in own.items():
            if k in state_dict:
                src = state_dict[k]
                src = src.numpy() if isinstance(src, Tensor) else np.asarray(src)
                if src.shape != target.shape:
                    mismatched.append(f"{k}: expected shape {tuple(target.shape)}, got {tuple(src.shape)}")
        problems = []
        if strict and missing:
            problems.append("missing keys: " + ", ".join(missing))
        if strict and unexpected:
            problems.append("unexpected keys: " + ", ".join(unexpected))
        if mismatched:
            problems.append("shape mismatch: " + "; ".join(mismatched))
        if problems:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n  " + "\n  ".join(problems))
        for k, target in own.items():
            if k in state_dict:
                src = state_dict[k]
                src = src.numpy() if isinstance(src, Tensor) else np.asarray(src)
                target._data[...] = src.astype(target.dtype, copy=False)
        return missing, unexpected

    # dtype / device ----------------------------------------------------------------
    def _convert(self, fn):
        for m in self.modules():
            for n, p in list(m._parameters.items()):
                if p is not None:
                    new = Parameter(fn(p.detach()), requires_grad=p.requires_grad)
                    m._parameters[n] = new
                    object.__setattr__(m, n, new)
            for n, b in list(m._buffers.items()):
                if b is not None:
                    nb = fn(b.detach())
                    m._buffers[n] = nb
                    object.__setattr__(m, n, nb)
        return self

    def to(self, *args, **kwargs):
        """``to(device)`` or ``to(dtype)``: floating parameters and buffers take the dtype;
        everything moves to the device."""
        from ...tensor.tensor import _parse_to_args
        device, dtype = _parse_to_args(args, kwargs)

        def move(t):
            if dtype is not None and t.dtype.kind == "f":
                t = t.to(dtype)
            if device is not None:
                t = t.to(device)
            return t
        return self._convert(move)

    def float(self):
        return self.to(dtypes.float32)

    def double(self):
        return self.to(dtypes.float64)

    def half(self):
        return self.to(dtypes.float16)

    def cuda(self):
        return self.to("cuda")

    def cpu(self):
        return self.to("cpu")

    # calling -----------------------------------------------------------------------
    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    # printing ----------------------------------------------------------------------
    def extra_repr(self):
        return ""

    def __repr__(self):
        lines = [f"({n}): " + repr(m).replace("\n", "\n  ") for n, m in self._modules.items()]
        head = f"{type(self).__name__}({self.extra_repr()}"
        if not lines:
            return head + ")"
        return head + "\n  " + "\n  ".join(lines) + "\n)"
