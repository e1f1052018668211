"""PyTorch's deprecated positional overloads that older scripts still call: ``x.add(alpha, other)``
and ``x.sub(alpha, other)`` (the in-place ``add_(alpha, other)`` is read in tensor/inplace.py),
``addcmul(input, value, tensor1, tensor2)`` and ``addcdiv``'s, and their in-place forms. Each is
read as the current signature, with PyTorch's deprecation warning.
"""
import numbers
import warnings

from ..autograd import op_function


def alpha_first(name, other, rest, alpha):
    """(other, alpha) of an out-of-place ``add(other, *, alpha=1)`` called as PyTorch's deprecated
    ``add(Number alpha, Tensor other)`` (``rest`` holds the positional arguments after the first),
    with PyTorch's warning; a TypeError for any other extra positional argument."""
    if not rest:
        return other, alpha
    if len(rest) == 1 and alpha == 1 and isinstance(other, numbers.Number) and isinstance(rest[0], op_function.Tensor):
        warnings.warn(f"This overload of {name} is deprecated:\n\t{name}(Number alpha, Tensor other)\n"
                      f"Consider using one of the following signatures instead:\n"
                      f"\t{name}(Tensor other, *, Number alpha = 1)", UserWarning, stacklevel=3)
        return rest[0], other
    raise TypeError(f"{name}() received an invalid combination of arguments: expected (Tensor other, *, Number "
                    f"alpha) or the deprecated (Number alpha, Tensor other), got {len(rest) + 1} positional arguments "
                    f"of types {[type(a).__name__ for a in (other, *rest)]}")


def value_first(name, signature, tensor1, tensor2, rest, value):
    """(tensor1, tensor2, value) of ``addcmul(..., tensor1, tensor2, *, value=1)`` (or addcdiv) called as
    PyTorch's deprecated ``addcmul(..., Number value, Tensor tensor1, Tensor tensor2)``, with its warning;
    a TypeError for any other extra positional argument."""
    if not rest:
        return tensor1, tensor2, value
    if len(rest) == 1 and value == 1 and isinstance(tensor1, numbers.Number) and \
            isinstance(tensor2, op_function.Tensor) and isinstance(rest[0], op_function.Tensor):
        warnings.warn(f"This overload of {name} is deprecated:\n\t{name}({signature}Number value, Tensor tensor1, "
                      f"Tensor tensor2)\nConsider using one of the following signatures instead:\n\t{name}("
                      f"{signature}Tensor tensor1, Tensor tensor2, *, Number value = 1)", UserWarning, stacklevel=3)
        return tensor2, rest[0], tensor1
    raise TypeError(f"{name}() received an invalid combination of arguments: expected ({signature}Tensor tensor1, "
                    f"Tensor tensor2, *, Number value) or the deprecated ({signature}Number value, Tensor tensor1, "
                    f"Tensor tensor2)")
