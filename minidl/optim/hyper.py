"""What the optimizers share about hyper-parameters: their range checks, with PyTorch's
messages ("Invalid learning rate: -1"), and the common start of an update: the gradient,
negated with ``maximize`` and with the L2 penalty ``weight_decay * p`` added.

The checks run on the constructor's arguments and again on a loaded state dict's groups
(``Optimizer._check_group``), so a checkpoint cannot bring in a value the constructor refuses.
"""
import numbers


def check_real(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r} ({type(value).__name__})")
    return value


def check_lr(lr):
    if not check_real("lr", lr) >= 0.0:
        raise ValueError(f"Invalid learning rate: {lr}")


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
