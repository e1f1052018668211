"""LazyInstanceNorm1d/2d/3d: InstanceNorm layers whose num_features is read from the first
input, as PyTorch's (whose lazy forms default to ``affine=True, track_running_stats=True``,
unlike the eager layers). The first forward builds the real layer and this module becomes it
(``LazyModuleMixin`` in lazy.py, through the lazy batch norm's constructor). The channels are
dim 1 of a batched input and dim 0 of an unbatched one ((C, L) for 1d, (C, H, W) for 2d,
(C, D, H, W) for 3d)."""
from .instancenorm import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
from .lazy import _LazyBatchNorm


class _LazyInstanceNorm(_LazyBatchNorm):
    """The lazy batch norm's constructor, arguments and repr; only where num_features is read differs."""

    def _in_size(self, input):
        batched = self.cls_to_become._batched_dim
        if not hasattr(input, "shape") or input.ndim not in (batched - 1, batched):
            raise ValueError(f"{type(self).__name__}: expected {batched - 1}D (unbatched) or {batched}D (batched) "
                             f"input to infer num_features from, got "
                             f"{list(getattr(input, 'shape', [])) or type(input).__name__}")
        return input.shape[0] if input.ndim == batched - 1 else input.shape[1]


class LazyInstanceNorm1d(_LazyInstanceNorm):
    cls_to_become = InstanceNorm1d


class LazyInstanceNorm2d(_LazyInstanceNorm):
    cls_to_become = InstanceNorm2d


class LazyInstanceNorm3d(_LazyInstanceNorm):
    cls_to_become = InstanceNorm3d
