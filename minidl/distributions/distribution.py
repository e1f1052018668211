"""Distribution: the base class of every probability distribution, as torch.distributions.Distribution.

A distribution has a ``batch_shape`` (independent distributions with their own parameters,
batched) and an ``event_shape`` (the shape of one draw). ``sample(sample_shape)`` returns a tensor
of ``sample_shape + batch_shape + event_shape`` drawn under no_grad; ``rsample`` (where
``has_rsample``) draws it as a differentiable function of the parameters and parameter-free
noise (the reparameterisation trick: x = loc + scale * eps for a Normal), so a loss of the samples
back-propagates into the parameters. The noise comes from minidl's global generator, so
``md.manual_seed`` makes draws reproducible.

With ``validate_args`` (on by default, like Python's ``assert``; ``set_default_validate_args``
switches it) the parameters are checked against ``arg_constraints`` at construction and the
values given to ``log_prob``/``cdf`` against ``support``, raising ValueError as PyTorch does.
"""
import warnings

from .. import autograd
from ..tensor import Tensor
from ..tensor.size import Size
from . import constraints
from .utils import _attr_property, _probs_or_logits, broadcast_all, lazy_property

__all__ = ["Distribution"]


class Distribution:
    """The abstract base class for probability distributions."""
    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__

    @staticmethod
    def set_default_validate_args(value):
        """Whether distributions check their arguments by default (True unless Python runs with -O)."""
        if value not in [True, False]:
            raise ValueError(f"set_default_validate_args expects True or False, got {value!r}")
        Distribution._validate_args = value

    def __init__(self, batch_shape=Size(), event_shape=Size(), validate_args=None):
        self._batch_shape = Size(tuple(batch_shape))
        self._event_shape = Size(tuple(event_shape))
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            try:
                arg_constraints = self.arg_constraints
            except NotImplementedError:
                arg_constraints = {}
                warnings.warn(f"{self.__class__} does not define `arg_constraints`. Please set "
                              "`arg_constraints = {}` or initialize the distribution with `validate_args=False` "
                              "to turn off validation.", stacklevel=2)
            for param, constraint in arg_constraints.items():
                if constraints.is_dependent(constraint):
                    continue   # not checkable on its own
                if param not in self.__dict__ and isinstance(getattr(type(self), param, None), lazy_property):
                    continue   # a parameterisation the caller did not give
                value = getattr(self, param)
                if not bool(constraint.check(value).all()):
                    raise ValueError(f"Expected parameter {param} ({type(value).__name__} of shape "
                                     f"{tuple(value.shape)}) of distribution {self!r} to satisfy the constraint "
                                     f"{constraint!r}, but found invalid values:\n{value}")

    def expand(self, batch_shape, _instance=None):
        """A new distribution with its batch dims expanded to ``batch_shape`` (parameters expanded,
        not copied; arguments are not checked again)."""
        raise NotImplementedError

    @property
    def batch_shape(self):
        return self._batch_shape

    @property
    def event_shape(self):
        return self._event_shape

    @property
    def arg_constraints(self):
        """A dict from parameter names to the Constraint each must satisfy."""
        raise NotImplementedError

    @property
    def support(self):
        """The Constraint the samples satisfy."""
        raise NotImplementedError

    @property
    def mean(self):
        raise NotImplementedError

    @property
    def mode(self):
        raise NotImplementedError(f"{self.__class__} does not implement mode")

    @property
    def variance(self):
        raise NotImplementedError

    @property
    def stddev(self):
        return self.variance.sqrt()

    def sample(self, sample_shape=Size()):
        """A draw of ``sample_shape + batch_shape + event_shape``, outside the graph."""
        with autograd.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=Size()):
        """A reparameterised draw: differentiable with respect to the parameters."""
        raise NotImplementedError

    def sample_n(self, n):
        warnings.warn("`sample_n(n)` will be deprecated. Use `sample((n,))` instead.", FutureWarning, stacklevel=2)
        return self.sample(Size((n,)))

    def log_prob(self, value):
        """The log of the density (or mass) at ``value``."""
        raise NotImplementedError

    def cdf(self, value):
        raise NotImplementedError

    def icdf(self, value):
        raise NotImplementedError

    def enumerate_support(self, expand=True):
        """Every value of a discrete distribution along dim 0: shape (cardinality,) + batch_shape +
        event_shape, or with ``expand=False`` singleton batch dims."""
        raise NotImplementedError

    def entropy(self):
        raise NotImplementedError

    def perplexity(self):
        return self.entropy().exp()

    def _extended_shape(self, sample_shape=Size()):
        return Size(tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def _validate_sample(self, value):
        """Check that ``value`` broadcasts with batch_shape + event_shape and lies in the support."""
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        start = value.ndim - len(self._event_shape)
        if tuple(value.shape[start:]) != tuple(self._event_shape):
            raise ValueError(f"The right-most size of value must match event_shape: {value.shape} vs "
                             f"{self._event_shape}.")
        actual, expected = tuple(value.shape), tuple(self._batch_shape) + tuple(self._event_shape)
        for i, j in zip(reversed(actual), reversed(expected)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: {Size(actual)} vs "
                                 f"{Size(expected)}.")
        try:
            support = self.support
        except NotImplementedError:
            warnings.warn(f"{self.__class__} does not define `support` to enable sample validation. Please "
                          "initialize the distribution with `validate_args=False` to turn off validation.",
                          stacklevel=2)
            return
        if not bool(support.check(value).all()):
            raise ValueError(f"Expected value argument ({type(value).__name__} of shape {tuple(value.shape)}) to be "
                             f"within the support ({support!r}) of the distribution {self!r}, but found invalid "
                             f"values:\n{value}")

    def _broadcast_params(self, **params):
        """Set each parameter (a number or a tensor) as an attribute, all broadcast together with
        ``broadcast_all``, and return their common shape: the batch shape of a distribution whose
        parameters hold one number per draw (``()`` when they are all numbers)."""
        values = broadcast_all(*params.values())
        for name, value in zip(params, values):
            setattr(self, name, value)
        return values[0].size()

    def _broadcast_probs_or_logits(self, probs, logits, **others):
        """Set ``probs`` or ``logits`` (exactly one must be given; ValueError otherwise) and the other
        parameters ``others`` broadcast together (``_broadcast_params``), with ``_param`` the one of
        probs and logits given; return the batch shape."""
        name, param = _probs_or_logits(probs, logits)
        batch_shape = self._broadcast_params(**others, **{name: param})
        self._param = getattr(self, name)
        return batch_shape

    def _expand_params(self, cls, batch_shape, _instance=None, share=(), **attrs):
        """The body of ``cls.expand`` for a distribution that holds its parameters: each parameter of
        ``cls`` it holds (a name of ``cls.arg_constraints`` in its ``__dict__``, a lazily computed one
        included) expanded from its batch dims to ``batch_shape``, its trailing (event) dims kept; the
        attributes named in ``share`` (derived state with no batch dims to expand) shared as they are;
        ``_param`` (the parameterisation given) pointing at its expanded self; ``attrs`` set as given."""
        batch_shape = Size(tuple(batch_shape))
        attrs.update({name: getattr(self, name) for name in share})
        for name in cls.arg_constraints:
            if name in self.__dict__:
                value = self.__dict__[name]
                attrs[name] = value.expand(tuple(batch_shape) + tuple(value.shape[len(self._batch_shape):]))
                if value is self.__dict__.get("_param"):
                    attrs["_param"] = attrs[name]
        return self._new_expanded(cls, batch_shape, _instance, **attrs)

    def _new_expanded(self, cls, batch_shape, _instance=None, **attrs):
        """The end of every ``cls.expand``: a new instance (``_get_checked_instance``) holding ``attrs``,
        of batch shape ``batch_shape`` and this event shape, whose arguments are not checked again (only
        the base __init__ runs) but which validates its samples as this one does."""
        new = self._get_checked_instance(cls, _instance)
        for name, value in attrs.items():
            setattr(new, name, value)
        Distribution.__init__(new, Size(tuple(batch_shape)), self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _get_checked_instance(self, cls, _instance=None):
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(f"Subclass {type(self).__name__} of {cls.__name__} that defines a custom "
                                      "__init__ method must also define a custom .expand() method.")
        return self.__new__(type(self)) if _instance is None else _instance

    def __repr__(self):
        names = [k for k in self.arg_constraints if k in self.__dict__]
        args = ", ".join(f"{p}: {self.__dict__[p] if self.__dict__[p].numel() == 1 else self.__dict__[p].size()}"
                         for p in names)
        return f"{type(self).__name__}({args})"


class _LocScale(Distribution):
    """A family on the real line with a location ``loc`` and a positive ``scale``, broadcast together
    (Normal, Laplace, Gumbel, Cauchy): the parameters, support and mode they share. Each family
    defines its own ``expand`` (calling ``_expand_params`` with itself), so that a subclass with a
    custom __init__ must define one too."""
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        super().__init__(self._broadcast_params(loc=loc, scale=scale), validate_args=validate_args)

    mode = _attr_property("loc")
