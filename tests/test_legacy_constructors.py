"""PyTorch's legacy constructors in older scripts: md.Tensor(data) / md.Tensor(*sizes) and the
per-dtype types (md.FloatTensor, md.LongTensor...), without changing what a Tensor is."""
import copy

import pytest

import minidl as md


def test_tensor_from_data_is_default_float():
    x = md.Tensor([1, 2])
    assert x.dtype is md.float32 and x.tolist() == [1.0, 2.0] and isinstance(x, md.Tensor)


def test_tensor_from_sizes_is_zeros_of_that_shape():
    assert md.Tensor(2, 3).shape == (2, 3) and md.Tensor(2, 3).sum().item() == 0.0
    assert md.Tensor(md.Size([2, 1])).shape == (2, 1)
    assert md.Tensor().shape == (0,)


def test_tensor_from_tensor_shares_memory():
    x = md.ones(2)
    y = md.Tensor(x)
    y[0] = 5.0
    assert x.tolist() == [5.0, 1.0]


def test_bad_arguments():
    with pytest.raises(TypeError, match="data must be a sequence \\(got float\\)"):
        md.Tensor(2.5)
    with pytest.raises(TypeError, match="only device= as a keyword"):
        md.Tensor([1.0], dtype=md.float64)


def test_typed_constructors_and_isinstance():
    assert md.LongTensor([1.7, 2]).tolist() == [1, 2] and md.LongTensor(2).dtype is md.int64
    assert md.FloatTensor(2, 2).dtype is md.float32 and md.DoubleTensor([1]).dtype is md.float64
    assert isinstance(md.ones(2), md.FloatTensor) and not isinstance(md.ones(2), md.LongTensor)
    assert isinstance(md.arange(3), md.LongTensor) and isinstance(md.arange(3), md.Tensor)
    assert md.ones(2).type(md.LongTensor).dtype is md.int64
    with pytest.raises(TypeError, match="expected a tensor of dtype"):
        md.FloatTensor(md.arange(2))


def test_internal_construction_copy_and_pickle_unchanged():
    x = md.randn(3, requires_grad=True)
    y = copy.deepcopy(x)
    assert y.tolist() == x.tolist() and y.requires_grad and y is not x
    import minidl.nn as nn
    p = copy.deepcopy(nn.Parameter(md.ones(2)))
    assert isinstance(p, nn.Parameter) and p.requires_grad


def test_matches_torch():
    torch = pytest.importorskip("torch")
    assert md.Tensor([[1, 2]]).tolist() == torch.Tensor([[1, 2]]).tolist()
    assert tuple(md.Tensor(2, 3).shape) == tuple(torch.Tensor(2, 3).shape)
    assert md.LongTensor([1.7, -2.5]).tolist() == torch.LongTensor([1.7, -2.5]).tolist()
