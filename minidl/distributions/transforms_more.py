"""More of torch.distributions.transforms: maps onto positive numbers and the simplex; wrappers that
reinterpret, reshape, concatenate or stack transforms; and the CDF of a distribution as a transform (the
matrix ones are in transforms_matrix.py). Re-exported by ``minidl.distributions.transforms``.

Change of variables for the bijective ones (log p_Y(y) = log p_X(x) - log |det dy/dx|):

    PowerTransform          y = x**e                    log |dy/dx| = ln |e y / x|
    SoftplusTransform       y = ln(1 + e**x)            log |dy/dx| = ln sigmoid(x) = -softplus(-x)
    StickBreakingTransform  R**(K-1) -> K-simplex       log |det J| = sum_i ln((1 - z_i) y_i)  (see below)
    CumulativeDistributionTransform  y = F(x)           log |dy/dx| = log p(x)

SoftmaxTransform and AbsTransform are not bijections of their domains and, as in PyTorch, have no log |det J|.
"""
from ..tensor.dtype_info import finfo
from ..tensor.size import Size
from . import constraints
from .transforms import Transform, _at_least_dims, _ParameterFreeTransform
from .utils import _pad_last, _softplus, _sum_rightmost

__all__ = ["AbsTransform", "CatTransform", "CumulativeDistributionTransform", "IndependentTransform",
           "PowerTransform", "ReshapeTransform", "SoftmaxTransform", "SoftplusTransform", "StackTransform",
           "StickBreakingTransform"]


def _check_dim(name, dim, value, size, expected):
    if not -value.dim() <= dim < value.dim():
        raise AssertionError(f"dim {dim} out of range for {name} with {value.dim()} dimensions")
    if value.size(dim) != expected:
        raise AssertionError(f"{name}.size({dim}) = {value.size(dim)} must equal {size} {expected}")


# --------------------------------------------------------------------------------------------------
# wrappers


class IndependentTransform(Transform):
    """``base_transform`` with its ``reinterpreted_batch_ndims`` rightmost batch dims taken as event dims:
    the same map, its log |det J| summed over those dims."""

    def __init__(self, base_transform, reinterpreted_batch_ndims, cache_size=0):
        super().__init__(cache_size)
        self.base_transform = base_transform.with_cache(cache_size)
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return IndependentTransform(self.base_transform, self.reinterpreted_batch_ndims, cache_size=cache_size)

    @constraints.dependent_property(is_discrete=False)
    def domain(self):
        return constraints.independent(self.base_transform.domain, self.reinterpreted_batch_ndims)

    @constraints.dependent_property(is_discrete=False)
    def codomain(self):
        return constraints.independent(self.base_transform.codomain, self.reinterpreted_batch_ndims)

    @property
    def bijective(self):
        return self.base_transform.bijective

    @property
    def sign(self):
        return self.base_transform.sign

    def _call(self, x):
        if x.dim() < self.domain.event_dim:
            raise ValueError("Too few dimensions on input")
        return self.base_transform(x)

    def _inverse(self, y):
        if y.dim() < self.codomain.event_dim:
            raise ValueError("Too few dimensions on input")
        return self.base_transform.inv(y)

    def log_abs_det_jacobian(self, x, y):
        return _sum_rightmost(self.base_transform.log_abs_det_jacobian(x, y), self.reinterpreted_batch_ndims)

    def forward_shape(self, shape):
        return self.base_transform.forward_shape(shape)

    def inverse_shape(self, shape):
        return self.base_transform.inverse_shape(shape)

    def __repr__(self):
        return f"{type(self).__name__}({self.base_transform!r}, {self.reinterpreted_batch_ndims})"


class ReshapeTransform(Transform):
    """Reshape the rightmost ``in_shape`` dims to ``out_shape`` (same number of elements): a permutation of
    coordinates, so log |det J| = 0."""
    bijective = True

    def __init__(self, in_shape, out_shape, cache_size=0):
        self.in_shape, self.out_shape = Size(tuple(in_shape)), Size(tuple(out_shape))
        if self.in_shape.numel() != self.out_shape.numel():
            raise ValueError("in_shape, out_shape have different numbers of elements")
        super().__init__(cache_size)

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return ReshapeTransform(self.in_shape, self.out_shape, cache_size=cache_size)

    @constraints.dependent_property
    def domain(self):
        return constraints.independent(constraints.real, len(self.in_shape))

    @constraints.dependent_property
    def codomain(self):
        return constraints.independent(constraints.real, len(self.out_shape))

    def _call(self, x):
        return x.reshape(tuple(x.shape[:x.dim() - len(self.in_shape)]) + tuple(self.out_shape))

    def _inverse(self, y):
        return y.reshape(tuple(y.shape[:y.dim() - len(self.out_shape)]) + tuple(self.in_shape))

    def log_abs_det_jacobian(self, x, y):
        return x.new_zeros(tuple(x.shape[:x.dim() - len(self.in_shape)]))

    def _reshaped(self, shape, have, want):
        shape = tuple(shape)
        if len(shape) < len(have):
            raise ValueError("Too few dimensions on input")
        cut = len(shape) - len(have)
        if shape[cut:] != tuple(have):
            raise ValueError(f"Shape mismatch: expected {Size(shape[cut:])} but got {have}")
        return Size(shape[:cut] + tuple(want))

    def forward_shape(self, shape):
        return self._reshaped(shape, self.in_shape, self.out_shape)

    def inverse_shape(self, shape):
        return self._reshaped(shape, self.out_shape, self.in_shape)


class _JoinTransform(Transform):
    """What CatTransform and StackTransform share: the transforms ``tseq`` applied to the pieces of the
    input along ``dim`` (``_pieces``), their results joined back along ``dim`` (``_join``); the domain and
    codomain are theirs joined by the matching constraint (``_constraint``)."""

    def __init__(self, tseq, dim, cache_size):
        if not all(isinstance(t, Transform) for t in tseq):
            raise AssertionError("All elements of tseq must be Transform instances")
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size)
        self.transforms = list(tseq)
        self.dim = dim

    def _map(self, z, fns):
        return self._join([fn(piece) for fn, piece in zip(fns, self._pieces("x", z))])

    def _call(self, x):
        return self._map(x, self.transforms)

    def _inverse(self, y):
        return self._map(y, [t.inv for t in self.transforms])

    @property
    def bijective(self):
        return all(t.bijective for t in self.transforms)

    @constraints.dependent_property
    def domain(self):
        return self._constraint([t.domain for t in self.transforms])

    @constraints.dependent_property
    def codomain(self):
        return self._constraint([t.codomain for t in self.transforms])


class CatTransform(_JoinTransform):
    """The transforms ``tseq`` applied to consecutive slices of ``lengths`` along ``dim`` (as md.cat joins
    them). log |det J| is theirs, concatenated along ``dim`` when it is a batch dim, summed when it is an
    event dim."""

    def __init__(self, tseq, dim=0, lengths=None, cache_size=0):
        super().__init__(tseq, dim, cache_size)
        self.lengths = [1] * len(self.transforms) if lengths is None else list(lengths)
        if len(self.lengths) != len(self.transforms):
            raise AssertionError(f"lengths ({len(self.lengths)}) must match transforms ({len(self.transforms)})")

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return CatTransform(self.transforms, self.dim, self.lengths, cache_size)

    @property
    def event_dim(self):
        return max(t.event_dim for t in self.transforms)

    @property
    def length(self):
        return sum(self.lengths)

    def _pieces(self, name, z):
        _check_dim(name, self.dim, z, "length", self.length)
        pieces, start = [], 0
        for length in self.lengths:
            pieces.append(z.narrow(self.dim, start, length))
            start = start + length
        return pieces

    def _join(self, parts):
        import minidl as md
        return md.cat(parts, self.dim)

    def _constraint(self, cseq):
        return constraints.cat(cseq, self.dim, self.lengths)

    def log_abs_det_jacobian(self, x, y):
        import minidl as md
        terms = []
        for t, a, b in zip(self.transforms, self._pieces("x", x), self._pieces("y", y)):
            term = t.log_abs_det_jacobian(a, b)
            if t.event_dim < self.event_dim:
                term = _sum_rightmost(term, self.event_dim - t.event_dim)
            terms.append(term)
        dim = (self.dim - x.dim() if self.dim >= 0 else self.dim) + self.event_dim
        if dim < 0:
            return md.cat(terms, dim)
        return sum(terms)


class StackTransform(_JoinTransform):
    """The transforms ``tseq`` applied to the slices along ``dim`` (as md.stack joins them); log |det J| is
    theirs, stacked along ``dim``."""

    def __init__(self, tseq, dim=0, cache_size=0):
        super().__init__(tseq, dim, cache_size)

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return StackTransform(self.transforms, self.dim, cache_size)

    def _pieces(self, name, z):
        _check_dim(name, self.dim, z, "len(transforms)", len(self.transforms))
        return [z.select(self.dim, i) for i in range(z.size(self.dim))]

    def _join(self, parts):
        import minidl as md
        return md.stack(parts, self.dim)

    def _constraint(self, cseq):
        return constraints.stack(cseq, self.dim)

    def log_abs_det_jacobian(self, x, y):
        terms = [t.log_abs_det_jacobian(a, b)
                 for t, a, b in zip(self.transforms, self._pieces("x", x), self._pieces("y", y))]
        return self._join(terms)


class CumulativeDistributionTransform(Transform):
    """y = F(x), the CDF of ``distribution`` (x = F^-1(y) its icdf); dy/dx is the density, so
    log |dy/dx| = log p(x). Maps the distribution's support onto [0, 1] (a Gaussian copula, for one)."""
    bijective = True
    codomain = constraints.unit_interval
    sign = +1

    def __init__(self, distribution, cache_size=0):
        super().__init__(cache_size)
        self.distribution = distribution

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return CumulativeDistributionTransform(self.distribution, cache_size=cache_size)

    @property
    def domain(self):
        return self.distribution.support

    def _call(self, x):
        return self.distribution.cdf(x)

    def _inverse(self, y):
        return self.distribution.icdf(y)

    def log_abs_det_jacobian(self, x, y):
        return self.distribution.log_prob(x)


# --------------------------------------------------------------------------------------------------
# elementwise


class PowerTransform(Transform):
    """y = x**e on x > 0 (e a number or tensor, broadcast);  dy/dx = e x**(e-1) = e y / x."""
    domain = constraints.positive
    codomain = constraints.positive
    bijective = True

    def __init__(self, exponent, cache_size=0):
        from .utils import broadcast_all
        super().__init__(cache_size)
        (self.exponent,) = broadcast_all(exponent)

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return PowerTransform(self.exponent, cache_size=cache_size)

    @property
    def sign(self):
        return self.exponent.sign()

    def __eq__(self, other):
        return isinstance(other, PowerTransform) and bool(self.exponent.eq(other.exponent).all())

    __hash__ = object.__hash__

    def _exponent(self, x):
        # a number exponent is a CPU scalar tensor; like PyTorch's CPU scalars it follows x to its device
        e = self.exponent
        return e.to(x.device) if e.ndim == 0 and e.device != x.device else e

    def _call(self, x):
        return x.pow(self._exponent(x))

    def _inverse(self, y):
        return y.pow(1 / self._exponent(y))

    def log_abs_det_jacobian(self, x, y):
        return (self._exponent(x) * y / x).abs().log()

    def forward_shape(self, shape):
        import minidl as md
        return md.broadcast_shapes(tuple(shape), tuple(getattr(self.exponent, "shape", ())))

    inverse_shape = forward_shape


class SoftplusTransform(_ParameterFreeTransform):
    """y = softplus(x) = ln(1 + e**x);  x = y + ln(1 - e**-y) = y + ln(-expm1(-y));
    dy/dx = sigmoid(x), so log |dy/dx| = -softplus(-x)."""
    domain = constraints.real
    codomain = constraints.positive
    bijective = True
    sign = +1

    def _call(self, x):
        return _softplus(x)

    def _inverse(self, y):
        return (-y).expm1().neg().log() + y

    def log_abs_det_jacobian(self, x, y):
        return -_softplus(-x)


class AbsTransform(_ParameterFreeTransform):
    """y = |x| (not injective: ``inv`` returns the positive preimage)."""
    domain = constraints.real
    codomain = constraints.positive

    def _call(self, x):
        return x.abs()

    def _inverse(self, y):
        return y


# --------------------------------------------------------------------------------------------------
# onto the simplex


class SoftmaxTransform(_ParameterFreeTransform):
    """y = e**x / sum e**x over the last dim; ``inv`` is ln y (one of the preimages, as it is only
    determined up to an additive constant). Not bijective: use it to optimise, StickBreaking to sample."""
    domain = constraints.real_vector
    codomain = constraints.simplex

    def _call(self, x):
        return x.softmax(-1)

    def _inverse(self, y):
        return y.log()

    def forward_shape(self, shape):
        return _at_least_dims(shape, 1)

    inverse_shape = forward_shape


def _stick_offsets(x):
    # ln(K - i) for the i-th of K - 1 coordinates: x = 0 maps to the simplex centre
    k = x.shape[-1]
    return x.new_ones(k).cumsum(-1).neg().add(k + 1).log()


class StickBreakingTransform(_ParameterFreeTransform):
    """x in R**(K-1) to the K-simplex by breaking a unit stick: z_i = sigmoid(x_i - ln(K - i)) of what is
    left, y_i = z_i prod_{j<i} (1 - z_j), y_K = prod_j (1 - z_j). The Jacobian of the first K-1 outputs is
    triangular with diagonal dy_i/dx_i = z_i (1 - z_i) prod_{j<i}(1 - z_j) = (1 - z_i) y_i, so
    log |det J| = sum_i ln(1 - z_i) + ln y_i, where ln(1 - z) = -x' + ln sigmoid(x') for x' = x - offset."""
    domain = constraints.real_vector
    codomain = constraints.simplex
    bijective = True

    def _call(self, x):
        fi = finfo(x.dtype)
        z = (x - _stick_offsets(x)).sigmoid().clamp(min=fi.tiny, max=1.0 - fi.eps)
        z_cumprod = (1 - z).cumprod(-1)
        return _pad_last(z, 0, 1, 1.0) * _pad_last(z_cumprod, 1, 0, 1.0)

    def _inverse(self, y):
        y_crop = y[..., :-1]
        k = y.shape[-1]
        offset = y.new_ones(y_crop.shape[-1]).cumsum(-1).neg().add(k).log()
        sf = (1 - y_crop.cumsum(-1)).clamp(min=finfo(y.dtype).tiny)   # what is left of the stick
        return y_crop.log() - sf.log() + offset

    def log_abs_det_jacobian(self, x, y):
        from ..ops.activation_elementwise import logsigmoid
        x = x - _stick_offsets(x)
        return (-x + logsigmoid(x) + y[..., :-1].log()).sum(-1)

    def forward_shape(self, shape):
        return Size(tuple(shape[:-1]) + (_at_least_dims(shape, 1)[-1] + 1,))

    def inverse_shape(self, shape):
        return Size(tuple(shape[:-1]) + (_at_least_dims(shape, 1)[-1] - 1,))
