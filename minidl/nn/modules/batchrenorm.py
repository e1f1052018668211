"""BatchRenorm1d and BatchRenorm2d: Batch Renormalization (Ioffe 2017), BatchNorm whose training
output uses the running statistics through the per-channel correction (r, d) (the math is in
minidl.ops.normalization.batch_renorm). PyTorch has no such layer; the arguments follow
BatchNorm's, plus the correction's limits and their schedule.

Ioffe starts as plain BatchNorm (r_max = 1, d_max = 0) while the running estimates settle, then
relaxes the limits gradually. Here the step is the number of training batches seen
(``num_batches_tracked``): for the first ``warmup_steps`` steps the layer is BatchNorm, then over
``ramp_steps`` steps r_max rises linearly from 1 and d_max from 0 to their final values
(the paper: BatchNorm for 5k steps, r_max reaching 3 at 40k and d_max 5 at 25k). ``momentum``
defaults to 0.01, the paper's slower update of the estimates the correction leans on.
"""
import numbers

from .. import functional as F
from .batchnorm import _BatchNorm


class _BatchRenorm(_BatchNorm):
    def __init__(self, num_features, eps=1e-5, momentum=0.01, affine=True, r_max=3.0, d_max=5.0, warmup_steps=0,
                 ramp_steps=0):
        super().__init__(num_features, eps, momentum, affine, track_running_stats=True)
        if isinstance(r_max, bool) or not isinstance(r_max, numbers.Real) or r_max < 1:
            raise ValueError(f"{type(self).__name__}: r_max must be a number >= 1, got {r_max!r}")
        if isinstance(d_max, bool) or not isinstance(d_max, numbers.Real) or d_max < 0:
            raise ValueError(f"{type(self).__name__}: d_max must be a number >= 0, got {d_max!r}")
        for name, v in (("warmup_steps", warmup_steps), ("ramp_steps", ramp_steps)):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 0:
                raise ValueError(f"{type(self).__name__}: {name} must be a non-negative int, got {v!r}")
        self.r_max, self.d_max = float(r_max), float(d_max)
        self.warmup_steps, self.ramp_steps = int(warmup_steps), int(ramp_steps)

    def limits(self, step=None):
        """(r_max, d_max) in force at training step ``step`` (0-based; default: the next one)."""
        step = int(self.num_batches_tracked.item()) if step is None else int(step)
        if step < self.warmup_steps:
            return 1.0, 0.0
        done = 1.0 if self.ramp_steps == 0 else min(1.0, (step - self.warmup_steps + 1) / self.ramp_steps)
        return 1.0 + (self.r_max - 1.0) * done, self.d_max * done

    def forward(self, x):
        self._check_input_dim(x)
        if not self.training:
            return F.batch_renorm(x, self.running_mean, self.running_var, self.weight, self.bias, False)
        r_max, d_max = self.limits()
        factor, _ = self._factor_and_mode(x, None)       # counts this batch
        return F.batch_renorm(x, self.running_mean, self.running_var, self.weight, self.bias, True, factor,
                              self.eps, r_max, d_max)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"r_max={self.r_max:g}, d_max={self.d_max:g}, warmup_steps={self.warmup_steps}, "
                f"ramp_steps={self.ramp_steps}")


class BatchRenorm1d(_BatchRenorm):
    """Batch Renormalization over (N, C) or (N, C, L): statistics per channel over N (and L)."""
    _dims = (2, 3)


class BatchRenorm2d(_BatchRenorm):
    """Batch Renormalization over (N, C, H, W): statistics per channel over N, H and W."""
    _dims = (4,)
