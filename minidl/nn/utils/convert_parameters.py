"""Parameters as one flat vector and back, as ``torch.nn.utils.parameters_to_vector`` /
``vector_to_parameters`` (used by second-order methods, evolution strategies, weight
averaging): the vector is the concatenation of every parameter flattened, in order."""
from ... import ops
from ...tensor.tensor import Tensor


def _iterable(parameters, op):
    if isinstance(parameters, Tensor):
        raise TypeError(f"{op}: expected an iterable of Tensors (such as model.parameters()), got a single Tensor")
    params = list(parameters)
    for p in params:
        if not isinstance(p, Tensor):
            raise TypeError(f"{op}: expected an iterable of Tensors, got an element of type {type(p).__name__}")
    devices = {p.device for p in params}
    if len(devices) > 1:
        raise TypeError(f"{op}: found two parameters on different devices, expected one device, got "
                        f"{sorted(devices)}")
    return params


def parameters_to_vector(parameters):
    """One 1-D tensor of every parameter, flattened and concatenated. It is built from the
    parameters with differentiable ops (reshape, cat), so a loss on it reaches their .grad."""
    params = _iterable(parameters, "parameters_to_vector")
    if not params:
        raise RuntimeError("parameters_to_vector: expected a non-empty iterable of Tensors, got none")
    return ops.cat([p.reshape(-1) for p in params])


def vector_to_parameters(vec, parameters):
    """Copy consecutive slices of the 1-D ``vec`` into the parameters (their ``.data``, so
    no graph is recorded), each slice reshaped to its parameter's shape."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected Tensor, but got: {type(vec).__name__}")
    params = _iterable(parameters, "vector_to_parameters")
    needed = sum(p.numel() for p in params)
    if vec.ndim != 1 or vec.numel() < needed:
        raise RuntimeError(f"vector_to_parameters: expected a 1-D vector of at least {needed} elements (the "
                           f"parameters' total), got shape {list(vec.shape)}")
    pointer = 0
    for p in params:
        n = p.numel()
        p.data = vec.detach()[pointer:pointer + n].reshape(tuple(p.shape))
        pointer += n
