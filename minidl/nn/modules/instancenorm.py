"""InstanceNorm1d and InstanceNorm2d, with PyTorch's semantics, names and defaults
(``affine=False``, ``track_running_stats=False``).

Each (sample, channel) is normalized over its own spatial positions. With
``track_running_stats=True`` the running estimates are updated in training and used in eval.
Unbatched input ((C, L) for 1d, (C, H, W) for 2d) is accepted, as in PyTorch. The math is in
minidl.ops.normalization.instance_norm.
"""
import warnings

from ...tensor.tensor import Tensor
from .. import functional as F
from .batchnorm import _NormBase


class _InstanceNorm(_NormBase):
    _batched_dim = 3

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False, track_running_stats=False, device=None,
                 dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        """An unversioned state dict (written before PyTorch 0.4, when InstanceNorm tracked running
        statistics by default) may hold ``running_mean`` / ``running_var`` that a module with
        ``track_running_stats=False`` has no place for: as PyTorch, they are dropped and reported
        as an error that says why, rather than as plain unexpected keys."""
        if local_metadata.get("version") is None and not self.track_running_stats:
            stale = [prefix + name for name in ("running_mean", "running_var") if prefix + name in state_dict]
            if stale:
                klass, names = type(self).__name__, " and ".join(f'"{k}"' for k in stale)
                error_msgs.append(
                    f"Unexpected running stats buffer(s) {names} for {klass} with track_running_stats=False. "
                    f"If state_dict is a checkpoint saved before 0.4.0, this may be expected because {klass} does "
                    "not track running stats by default since 0.4.0. Please remove these keys from state_dict. If the "
                    f"running stats are actually needed, instead set track_running_stats=True in {klass} to enable "
                    f"them. See the documentation of {klass} for details.")
                for key in stale:
                    state_dict.pop(key)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    def forward(self, x):
        if not isinstance(x, Tensor):
            raise TypeError(f"{type(self).__name__}: expected a Tensor input, got {type(x).__name__}")
        d = self._batched_dim
        if x.ndim not in (d - 1, d):
            raise ValueError(f"{type(self).__name__}: expected {d - 1}D (unbatched) or {d}D (batched) input, "
                             f"got {x.ndim}D input of shape {tuple(x.shape)}")
        unbatched = x.ndim == d - 1
        if unbatched:
            x = x.unsqueeze(0)
        if x.shape[1] != self.num_features:
            if self.affine or self.track_running_stats:
                self._check_channels(x)
            # as PyTorch: without per-channel state, num_features is not used; say so
            warnings.warn(f"{type(self).__name__}: input has {x.shape[1]} channels (shape {tuple(x.shape)}) but "
                          f"num_features={self.num_features}; normalizing anyway, as affine=False and "
                          "track_running_stats=False", stacklevel=2)
        momentum = 0.0 if self.momentum is None else self.momentum
        y = F.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            self.training or not self.track_running_stats, momentum, self.eps)
        return y.squeeze(0) if unbatched else y


class InstanceNorm1d(_InstanceNorm):
    """InstanceNorm over (N, C, L) or unbatched (C, L)."""
    _batched_dim = 3


class InstanceNorm2d(_InstanceNorm):
    """InstanceNorm over (N, C, H, W) or unbatched (C, H, W)."""
    _batched_dim = 4


class InstanceNorm3d(_InstanceNorm):
    """InstanceNorm over (N, C, D, H, W) or unbatched (C, D, H, W)."""
    _batched_dim = 5
