"""F.one_hot: class indices to one-hot rows, as ``torch.nn.functional.one_hot`` (not
differentiable: the input holds integers)."""
import numpy as np

from ..tensor.allocation import check_allocation
from ..tensor.tensor import Tensor


def one_hot(tensor, num_classes=-1):
    """An int64 tensor of shape (*tensor.shape, num_classes) with a 1 at each index;
    ``num_classes=-1`` takes one more than the largest index."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"one_hot: expected a Tensor, got {type(tensor).__name__}")
    if tensor.dtype != np.int64:
        raise RuntimeError(f"one_hot is only applicable to index tensor of type LongTensor (int64), got dtype "
                           f"{tensor.dtype}")
    idx = tensor.numpy(force=True)
    if idx.size == 0 and num_classes == -1:
        raise RuntimeError("Can not infer total number of classes from empty tensor; expected num_classes >= 0")
    if idx.size and idx.min() < 0:
        raise RuntimeError(f"Class values must be non-negative, got {int(idx.min())}")
    n = int(idx.max()) + 1 if num_classes == -1 else int(num_classes)
    if n < 0:
        raise RuntimeError(f"one_hot: expected num_classes >= 0 or -1, got {num_classes}")
    if idx.size and idx.max() >= n:
        raise RuntimeError(f"Class values must be smaller than num_classes ({n}), got {int(idx.max())}")
    check_allocation("one_hot", idx.shape + (n,), np.int64)
    out = np.zeros(idx.shape + (n,), dtype=np.int64)
    np.put_along_axis(out, idx[..., None], 1, axis=-1)
    result = Tensor._wrap(out, None, 0)
    return result if tensor.device == "cpu" else result.to(tensor.device)
