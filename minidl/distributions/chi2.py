"""Chi2(df): the sum of df squared standard normals, as torch.distributions.Chi2: the
Gamma(df / 2, 1 / 2), so it inherits the Gamma's density, moments, entropy and rsample."""
from . import constraints
from .gamma import Gamma
from .utils import broadcast_all

__all__ = ["Chi2"]


class Chi2(Gamma):
    arg_constraints = {"df": constraints.positive}

    def __init__(self, df, validate_args=None):
        (df,) = broadcast_all(df)
        super().__init__(0.5 * df, 0.5, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return super().expand(batch_shape, self._get_checked_instance(Chi2, _instance))

    @property
    def df(self):
        return self.concentration * 2
