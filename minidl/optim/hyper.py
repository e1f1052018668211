"""What the optimizers share about hyper-parameters: their range checks, with PyTorch's
messages ("Invalid learning rate: -1"), and the common start of an update: the gradient,
negated with ``maximize`` and with the L2 penalty ``weight_decay * p`` added.

The checks run on the constructor's arguments and again on a loaded state dict's groups
(``Optimizer._check_group``), so a checkpoint cannot bring in a value the constructor refuses.
"""
import numbers

from ..tensor.tensor import Tensor


def check_real(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r} ({type(value).__name__})")
    return value


def check_lr(lr):
    """``lr`` >= 0: a number or, as PyTorch allows, a 1-element Tensor (kept in the group as it is,
    so that schedulers fill it in place; the updates read its value with ``scalar``)."""
    if isinstance(lr, Tensor):
        if lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not float(lr.item()) >= 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        return
    if not check_real("lr", lr) >= 0.0:
        raise ValueError(f"Invalid learning rate: {lr}")


def scalar(value):
    """A hyper-parameter as a Python number: the value of a 1-element Tensor (a Tensor lr)."""
    return value.item() if isinstance(value, Tensor) else value


def with_scalar_lr(group):
    """``group`` itself, or a copy whose Tensor ``lr`` is replaced by its value, for the update."""
    return {**group, "lr": float(group["lr"].item())} if isinstance(group.get("lr"), Tensor) else group


def implementation_flags(cls_name, foreach=None, fused=None, capturable=False, differentiable=False):
    """PyTorch's switches between implementations of one update, checked as PyTorch checks them and
    kept in the groups (so a script passing them runs, and state dicts carry PyTorch's keys). They
    change nothing here: ``foreach`` (multi-tensor kernels) and ``fused`` select kernels that
    compute the same update, and minidl picks its own (``optim.implementation``); ``capturable``
    prepares the state for CUDA-graph capture, which minidl does not do. ``differentiable``
    (autograd through ``step()``) is not supported: the update runs on raw arrays."""
    if fused and foreach:
        raise RuntimeError("`fused` and `foreach` cannot be `True` together.")
    if fused and differentiable:
        raise RuntimeError("`fused` does not support `differentiable`")
    if differentiable:
        raise NotImplementedError(f"{cls_name}(differentiable=True) is not supported: minidl's optimizers update "
                                  "the parameters outside autograd")


def check_nonnegative(name, value):
    """``name`` >= 0, else PyTorch's "Invalid {name} value: {value}"."""
    if not check_real(name, value) >= 0.0:
        raise ValueError(f"Invalid {name} value: {value}")


def check_betas(betas):
    """Two coefficients in [0, 1)."""
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:
        raise TypeError(f"betas must be a pair of numbers, got {betas!r}")
    for i, beta in enumerate(betas):
        if not 0.0 <= check_real(f"betas[{i}]", beta) < 1.0:
            raise ValueError(f"Invalid beta parameter at index {i}: {beta}")


def check_pair(name, pair):
    if not isinstance(pair, (tuple, list)) or len(pair) != 2:
        raise TypeError(f"{name} must be a pair of numbers, got {pair!r}")
    for i, v in enumerate(pair):
        check_real(f"{name}[{i}]", v)


def prepared_grad(w, g, maximize, weight_decay):
    """The gradient the update uses: -g with ``maximize``, plus ``weight_decay * w``. A new
    array whenever it differs from ``g``, so the ``.grad`` the user sees is left alone."""
    if maximize:
        g = -g
    if weight_decay != 0:
        g = g + weight_decay * w
    return g


def check_common(group):
    """The checks the optimizers share, with PyTorch's messages: ``lr``, then ``eps``,
    ``betas`` and ``weight_decay`` where the group has them."""
    check_lr(group["lr"])
    if "eps" in group:
        check_nonnegative("epsilon", group["eps"])
    if "betas" in group:
        check_betas(group["betas"])
    if "weight_decay" in group:
        check_nonnegative("weight_decay", group["weight_decay"])
