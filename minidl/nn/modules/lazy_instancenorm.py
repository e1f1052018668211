"""LazyInstanceNorm1d/2d/3d: InstanceNorm layers whose num_features is read from the first
input, as PyTorch's (whose lazy forms default to ``affine=True, track_running_stats=True``,
unlike the eager layers). The first forward builds the real layer and this module becomes it
(``LazyModuleMixin`` in lazy.py). The channels are dim 1 of a batched input and dim 0 of an
unbatched one ((C, L) for 1d, (C, H, W) for 2d, (C, D, H, W) for 3d)."""
from .instancenorm import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
from .lazy import LazyModuleMixin


class _LazyInstanceNorm(LazyModuleMixin):
    _lazy_params = ("weight", "bias")

    def __init__(self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None, dtype=None):
        super().__init__(eps, momentum, affine, track_running_stats, device=device, dtype=dtype)
        if not affine:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        object.__setattr__(self, "num_features", 0)

    def _bias_arg(self):
        return ()   # (the bias follows ``affine``, not a ``bias`` argument)

    def _in_size(self, input):
        batched = self.cls_to_become._batched_dim
        if not hasattr(input, "shape") or input.ndim not in (batched - 1, batched):
            raise ValueError(f"{type(self).__name__}: expected {batched - 1}D (unbatched) or {batched}D (batched) "
                             f"input to infer num_features from, got "
                             f"{list(getattr(input, 'shape', [])) or type(input).__name__}")
        return input.shape[0] if input.ndim == batched - 1 else input.shape[1]

    def extra_repr(self):
        eps, momentum, affine, track = self._lazy_args[0]
        return f"0, eps={eps}, momentum={momentum}, affine={affine}, track_running_stats={track}"


class LazyInstanceNorm1d(_LazyInstanceNorm):
    cls_to_become = InstanceNorm1d


class LazyInstanceNorm2d(_LazyInstanceNorm):
    cls_to_become = InstanceNorm2d


class LazyInstanceNorm3d(_LazyInstanceNorm):
    cls_to_become = InstanceNorm3d
