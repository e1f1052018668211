"""Spectral normalization (Miyato et al., 2018), PyTorch's classic hook-based API
(``torch.nn.utils.spectral_norm``; the parametrization is ``parametrizations.spectral_norm``).

``spectral_norm(module, name)`` trains ``<name>_orig`` in place of the parameter ``W`` and
makes ``module.<name>`` a plain attribute recomputed by a forward pre-hook before every call:

    W_SN = W / sigma,    sigma = u^T W v

with ``W`` seen as a matrix (dim ``dim`` first, the rest flattened) and ``u``, ``v`` estimates of
its first left and right singular vectors, kept as the buffers ``<name>_u`` and ``<name>_v``. In
training mode each call first refines them by ``n_power_iterations`` steps of the power method

    v = normalize(W^T u),    u = normalize(W v)

(in place, outside the graph); in eval mode they are used as they are. The gradient flows to
``W`` through both ``W`` and sigma. State_dict keys are PyTorch's: ``<name>_orig``,
``<name>_u``, ``<name>_v``. ``remove_spectral_norm`` folds W / sigma back into one Parameter.
"""
import numpy as np

from ... import dot, mv
from ...autograd import grad_mode
from ...tensor.tensor import Tensor
from .. import functional as F
from ..modules.conv_nd import _ConvTransposeNd
from ..parameter import Parameter

__all__ = ["SpectralNorm", "SpectralNormLoadStateDictPreHook", "SpectralNormStateDictHook", "spectral_norm",
           "remove_spectral_norm"]


class SpectralNorm:
    """The forward pre-hook that sets ``module.<name>`` to ``<name>_orig / sigma``."""

    # version 1: W is not a buffer, v is one, and eval mode computes u^T W_orig v rather than
    # using a stored W (a state_dict without the version is converted on load)
    _version = 1

    def __init__(self, name="weight", n_power_iterations=1, dim=0, eps=1e-12):
        self.name = name
        self.dim = dim
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.n_power_iterations = n_power_iterations
        self.eps = eps

    def reshape_weight_to_matrix(self, weight):
        weight_mat = weight
        if self.dim != 0:
            weight_mat = weight_mat.permute(self.dim, *[d for d in range(weight_mat.ndim) if d != self.dim])
        return weight_mat.reshape(weight_mat.shape[0], -1)

    def compute_weight(self, module, do_power_iteration):
        """W / (u^T W v), after refining u and v in place when ``do_power_iteration``; u and v
        are then cloned, so a graph built by an earlier call (the two forwards of a GAN's
        discriminator loss) keeps the values it saw."""
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        weight_mat = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            with grad_mode.no_grad():
                for _ in range(self.n_power_iterations):
                    v.copy_(F.normalize(mv(weight_mat.t(), u), dim=0, eps=self.eps))
                    u.copy_(F.normalize(mv(weight_mat, v), dim=0, eps=self.eps))
                u = u.clone()
                v = v.clone()
        sigma = dot(u, mv(weight_mat, v))
        return weight / sigma

    def remove(self, module):
        with grad_mode.no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        delattr(module, self.name)
        delattr(module, self.name + "_u")
        delattr(module, self.name + "_v")
        delattr(module, self.name + "_orig")
        module.register_parameter(self.name, Parameter(weight.detach()))
        for handle in self.handles:
            handle.remove()

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module, do_power_iteration=module.training))

    def _solve_v_and_rescale(self, weight_mat, u, target_sigma):
        """A v with u = normalize(W v) and u^T W v = sigma: v = (W^T W)^+ W^T u, rescaled."""
        w = weight_mat.numpy(force=True).astype(np.float64)
        v = np.linalg.pinv(w.T @ w) @ w.T @ u.numpy(force=True).astype(np.float64)
        v *= float(target_sigma) / float(u.numpy(force=True) @ (w @ v))
        return Tensor._wrap(v.astype(weight_mat.numpy(force=True).dtype), None, 0)

    @staticmethod
    def apply(module, name, n_power_iterations, dim, eps):
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, SpectralNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two spectral_norm hooks on the same parameter {name}")
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        if name not in module._parameters:
            raise ValueError(f"spectral_norm: expected {type(module).__name__} to have a parameter named {name!r}, "
                             f"but its parameters are {list(module._parameters)}")
        weight = module._parameters[name]
        if weight is None:
            raise ValueError(f"`SpectralNorm` cannot be applied as parameter `{name}` is None")
        if type(weight).__name__ == "UninitializedParameter":
            raise ValueError("The module passed to `SpectralNorm` can't have uninitialized parameters. Make sure to "
                             "run the dummy forward before applying spectral normalization")
        with grad_mode.no_grad():
            weight_mat = fn.reshape_weight_to_matrix(weight)
            h, w = weight_mat.shape
            u = F.normalize(weight.new_empty(h).normal_(0, 1), dim=0, eps=fn.eps)
            v = F.normalize(weight.new_empty(w).normal_(0, 1), dim=0, eps=fn.eps)
        delattr(module, fn.name)
        module.register_parameter(fn.name + "_orig", weight)
        # code may expect module.<name> to exist before the first forward (an initializer):
        # a plain attribute over the same memory, outside the graph
        setattr(module, fn.name, weight.data)
        module.register_buffer(fn.name + "_u", u)
        module.register_buffer(fn.name + "_v", v)
        fn.handles = [module.register_forward_pre_hook(fn),
                      module._register_state_dict_hook(SpectralNormStateDictHook(fn)),
                      module._register_load_state_dict_pre_hook(SpectralNormLoadStateDictPreHook(fn))]
        return fn


class SpectralNormLoadStateDictPreHook:
    """Loads a state_dict saved before version 1 (which stored W = W_orig / sigma and no v):
    sigma = mean(W_orig / W), and v solves u = normalize(W_orig v), u^T W_orig v = sigma."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs):
        fn = self.fn
        version = local_metadata.get("spectral_norm", {}).get(fn.name + ".version", None)
        if version is None or version < 1:
            weight_key = prefix + fn.name
            if (version is None and all(weight_key + s in state_dict for s in ("_orig", "_u", "_v"))
                    and weight_key not in state_dict):
                return    # a current state_dict without the metadata
            has_missing_keys = False
            for suffix in ("_orig", "", "_u"):
                key = weight_key + suffix
                if key not in state_dict:
                    has_missing_keys = True
                    if strict:
                        missing_keys.append(key)
            if has_missing_keys:
                return
            with grad_mode.no_grad():
                weight_orig = _as_tensor(state_dict[weight_key + "_orig"])
                weight = _as_tensor(state_dict.pop(weight_key))
                sigma = (weight_orig / weight).mean()
                weight_mat = fn.reshape_weight_to_matrix(weight_orig)
                u = _as_tensor(state_dict[weight_key + "_u"])
                state_dict[weight_key + "_v"] = fn._solve_v_and_rescale(weight_mat, u, sigma.item())


def _as_tensor(value):
    return value if isinstance(value, Tensor) else Tensor._wrap(np.asarray(value), None, 0)


class SpectralNormStateDictHook:
    """Records the format's version in the state_dict's metadata."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, module, state_dict, prefix, local_metadata):
        if "spectral_norm" not in local_metadata:
            local_metadata["spectral_norm"] = {}
        key = self.fn.name + ".version"
        if key in local_metadata["spectral_norm"]:
            raise RuntimeError(f"Unexpected key in metadata['spectral_norm']: {key}")
        local_metadata["spectral_norm"][key] = self.fn._version


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Apply spectral normalization to ``module.<name>`` (see the module docstring); ``dim`` (the
    output dim) defaults to 0, or 1 for a ConvTranspose. Returns the module."""
    if dim is None:
        dim = 1 if isinstance(module, _ConvTransposeNd) else 0
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


def remove_spectral_norm(module, name="weight"):
    """Undo ``spectral_norm``: ``module.<name>`` becomes a Parameter again holding the current
    W / sigma (no power iteration); returns the module."""
    for hook in module._forward_pre_hooks.values():
        if isinstance(hook, SpectralNorm) and hook.name == name:
            hook.remove(module)
            return module
    raise ValueError(f"spectral_norm of '{name}' not found in {module}")
