"""biject_to and transform_to: from a constraint to a transform that maps unconstrained reals onto it, as
torch.distributions.constraint_registry. What an optimiser or a sampler needs to work in unconstrained
space with a constrained parameter:

    unconstrained = md.zeros(3, requires_grad=True)
    scale = transform_to(constraints.positive)(unconstrained)   # > 0 for any value of unconstrained

``biject_to(c)`` is a bijection (so its log |det J| corrects densities: what HMC needs);
``transform_to(c)`` need only reach the whole of c (SoftmaxTransform for the simplex, cheaper and more
coordinate-wise than stick breaking, what optimisation prefers). Both look the transform up by the
constraint's type, so a registration serves every instance of it (``greater_than(2.0)`` as well as
``positive``, which is ``greater_than(0.0)``: both give exp followed by a shift, as in PyTorch).
Unregistered constraints raise NotImplementedError.
"""
import numbers

from . import constraints, transforms

__all__ = ["ConstraintRegistry", "biject_to", "transform_to"]


class ConstraintRegistry:
    """A table from Constraint subclass to a factory ``factory(constraint) -> Transform``."""

    def __init__(self):
        self._registry = {}
        super().__init__()

    def register(self, constraint, factory=None):
        """Register ``factory`` for a Constraint subclass or the type of a constraint instance (usable as a
        decorator when ``factory`` is omitted)."""
        if factory is None:
            return lambda factory: self.register(constraint, factory)
        if isinstance(constraint, constraints.Constraint):
            constraint = type(constraint)
        if not isinstance(constraint, type) or not issubclass(constraint, constraints.Constraint):
            raise TypeError(f"Expected constraint to be either a Constraint subclass or instance, but got "
                            f"{constraint}")
        self._registry[constraint] = factory
        return factory

    def __call__(self, constraint):
        """The transform onto ``constraint``; NotImplementedError when its type is not registered."""
        try:
            factory = self._registry[type(constraint)]
        except KeyError:
            raise NotImplementedError(f"Cannot transform {type(constraint).__name__} constraints") from None
        return factory(constraint)


biject_to = ConstraintRegistry()
transform_to = ConstraintRegistry()


@biject_to.register(constraints.real)
@transform_to.register(constraints.real)
def _transform_to_real(constraint):
    return transforms.identity_transform


def _register_in_both(constraint_type):
    """Register ``factory(constraint, registry)`` with biject_to and with transform_to, for constraints built
    of others: ``registry`` is the one to look their parts up in (a bijection's parts are bijections)."""
    def decorator(factory):
        for registry in (biject_to, transform_to):
            registry.register(constraint_type, lambda constraint, registry=registry: factory(constraint, registry))
        return factory
    return decorator


@_register_in_both(constraints.independent)
def _transform_to_independent(constraint, registry):
    return transforms.IndependentTransform(registry(constraint.base_constraint), constraint.reinterpreted_batch_ndims)


# positive and nonnegative are instances of greater_than and greater_than_eq, whose registration below
# replaces this one (as in PyTorch)
@biject_to.register(constraints.positive)
@biject_to.register(constraints.nonnegative)
@transform_to.register(constraints.positive)
@transform_to.register(constraints.nonnegative)
def _transform_to_positive(constraint):
    return transforms.ExpTransform()


@biject_to.register(constraints.greater_than)
@biject_to.register(constraints.greater_than_eq)
@transform_to.register(constraints.greater_than)
@transform_to.register(constraints.greater_than_eq)
def _transform_to_greater_than(constraint):
    """y = lower_bound + e**x."""
    return transforms.ComposeTransform([transforms.ExpTransform(),
                                        transforms.AffineTransform(constraint.lower_bound, 1)])


@biject_to.register(constraints.less_than)
@transform_to.register(constraints.less_than)
def _transform_to_less_than(constraint):
    """y = upper_bound - e**x."""
    return transforms.ComposeTransform([transforms.ExpTransform(),
                                        transforms.AffineTransform(constraint.upper_bound, -1)])


@biject_to.register(constraints.interval)
@biject_to.register(constraints.half_open_interval)
@transform_to.register(constraints.interval)
@transform_to.register(constraints.half_open_interval)
def _transform_to_interval(constraint):
    """y = lower + (upper - lower) sigmoid(x); sigmoid alone for the unit interval."""
    lower_is_0 = isinstance(constraint.lower_bound, numbers.Number) and constraint.lower_bound == 0
    upper_is_1 = isinstance(constraint.upper_bound, numbers.Number) and constraint.upper_bound == 1
    if lower_is_0 and upper_is_1:
        return transforms.SigmoidTransform()
    loc = constraint.lower_bound
    scale = constraint.upper_bound - constraint.lower_bound
    return transforms.ComposeTransform([transforms.SigmoidTransform(), transforms.AffineTransform(loc, scale)])


@biject_to.register(constraints.simplex)
def _biject_to_simplex(constraint):
    return transforms.StickBreakingTransform()


@transform_to.register(constraints.simplex)
def _transform_to_simplex(constraint):
    return transforms.SoftmaxTransform()


# lower_cholesky has no registered bijection (LowerCholeskyTransform drops the upper triangle), as in PyTorch
@transform_to.register(constraints.lower_cholesky)
def _transform_to_lower_cholesky(constraint):
    return transforms.LowerCholeskyTransform()


@transform_to.register(constraints.positive_definite)
@transform_to.register(constraints.positive_semidefinite)
def _transform_to_positive_definite(constraint):
    return transforms.PositiveDefiniteTransform()


@biject_to.register(constraints._CorrCholesky)
@transform_to.register(constraints._CorrCholesky)
def _transform_to_corr_cholesky(constraint):
    return transforms.CorrCholeskyTransform()


@_register_in_both(constraints._Cat)
def _transform_to_cat(constraint, registry):
    return transforms.CatTransform([registry(c) for c in constraint.cseq], constraint.dim, constraint.lengths)


@_register_in_both(constraints._Stack)
def _transform_to_stack(constraint, registry):
    return transforms.StackTransform([registry(c) for c in constraint.cseq], constraint.dim)
