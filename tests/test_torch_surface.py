"""minidl's top-level PyTorch surface: dtypes, Size, Generator, devices, flags, printing,
and names minidl leaves out on purpose (the op list is walked in test_torch_functions.py)."""
import pickle

import numpy as np
import pytest

import minidl as md


def test_dtypes_print_as_minidl_names_and_compare_with_numpy():
    assert repr(md.float32) == str(md.float32) == "minidl.float32"
    for name in ("float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool"):
        assert str(getattr(md, name)) == f"minidl.{name}"
    x = md.zeros(2)
    assert x.dtype is md.float32
    assert x.dtype == np.float32 and x.dtype == np.dtype("float32") and np.dtype("float32") == x.dtype
    assert x.dtype != np.float64 and x.dtype != None  # noqa: E711
    assert {np.dtype("float32"): 1}[x.dtype] == 1
    assert np.zeros(2, md.float64).dtype == np.float64
    assert pickle.loads(pickle.dumps(md.int16)) is md.int16


def test_bfloat16_is_stored_and_converted():
    x = md.tensor([1.0, 2.5]).to(md.bfloat16)
    assert x.dtype is md.bfloat16 and x.element_size() == 2 and x.is_floating_point()
    assert x.float().tolist() == [1.0, 2.5]
    assert "dtype=minidl.bfloat16" in repr(x)


def test_finfo_iinfo_match_pytorch():
    torch = pytest.importorskip("torch")
    for name in ("float16", "bfloat16", "float32", "float64"):
        a, b = md.finfo(getattr(md, name)), torch.finfo(getattr(torch, name))
        assert (a.bits, a.eps, a.max, a.min, a.tiny, a.resolution) == (b.bits, b.eps, b.max, b.min, b.tiny,
                                                                     b.resolution)
    for name in ("int8", "int16", "int32", "int64", "uint8"):
        a, b = md.iinfo(getattr(md, name)), torch.iinfo(getattr(torch, name))
        assert (a.bits, a.min, a.max) == (b.bits, b.min, b.max)
    with pytest.raises(TypeError):
        md.finfo(md.int32)


def test_default_dtype_is_what_factories_make():
    try:
        md.set_default_dtype(md.float64)
        assert md.get_default_dtype() is md.float64
        assert md.zeros(2).dtype is md.float64 and md.tensor([1.5]).dtype is md.float64
        assert md.randn(2).dtype is md.float64 and md.arange(0.0, 1.0, 0.5).dtype is md.float64
        assert "dtype" not in repr(md.ones(1))
    finally:
        md.set_default_dtype(md.float32)
    assert md.zeros(2).dtype is md.float32
    with pytest.raises(TypeError, match="only floating-point types"):
        md.set_default_dtype(md.int64)


def test_type_and_floating_point_queries():
    x = md.ones(2)
    assert md.is_floating_point(x) and not md.is_floating_point(x.long())
    assert x.type() == "minidl.FloatTensor" and x.type(md.int64).dtype is md.int64
    assert x.element_size() == 4 and x.double().element_size() == 8


def test_size_is_a_tuple_printing_as_minidl_size():
    s = md.zeros(2, 3).shape
    assert isinstance(s, md.Size) and isinstance(s, tuple) and s == (2, 3)
    assert repr(s) == str(s) == "minidl.Size([2, 3])"
    assert md.zeros(2, 3).size() == s and md.zeros(2, 3).size(1) == 3
    assert isinstance(s[1:], md.Size) and s.numel() == 6


def test_math_constants():
    import math
    assert (md.pi, md.e, md.inf) == (math.pi, math.e, math.inf) and md.nan != md.nan


def test_generator_reproduces_draws_and_restores_state():
    g = md.Generator().manual_seed(7)
    assert g.initial_seed() == 7
    a = md.rand(3, generator=g)
    state = g.get_state()
    assert state.dtype is md.uint8
    b = md.randn(4, generator=g)
    g.set_state(state)
    assert np.array_equal(md.randn(4, generator=g).numpy(), b.numpy())
    g2 = md.Generator().manual_seed(7)
    assert np.array_equal(md.rand(3, generator=g2).numpy(), a.numpy())
    for draw in (lambda gen: md.randint(0, 10, (5,), generator=gen), lambda gen: md.randperm(6, generator=gen),
                 lambda gen: md.normal(0.0, 1.0, (3,), generator=gen),
                 lambda gen: md.bernoulli(md.full((4,), 0.5), generator=gen),
                 lambda gen: md.multinomial(md.tensor([0.2, 0.8]), 3, replacement=True, generator=gen)):
        assert np.array_equal(draw(md.Generator().manual_seed(1)).numpy(), draw(md.Generator().manual_seed(1)).numpy())
    with pytest.raises(RuntimeError, match="37 bytes"):
        g.set_state(md.zeros(3, dtype=md.uint8))


def test_global_seed_returns_the_default_generator():
    assert md.manual_seed(3) is md.default_generator and md.initial_seed() == 3
    a = md.rand(2)
    md.manual_seed(3)
    assert np.array_equal(md.rand(2).numpy(), a.numpy())


def test_data_loading_accepts_a_minidl_generator():
    from minidl.utils.data import DataLoader, RandomSampler, TensorDataset, random_split
    ds = TensorDataset(md.arange(10))
    orders = [list(RandomSampler(ds, generator=md.Generator().manual_seed(5))) for _ in range(2)]
    assert orders[0] == orders[1] and sorted(orders[0]) == list(range(10))
    parts = [random_split(ds, [4, 6], generator=md.Generator().manual_seed(2))[0].indices for _ in range(2)]
    assert parts[0] == parts[1]
    batches = [[b[0].tolist() for b in DataLoader(ds, batch_size=5, shuffle=True,
                                                  generator=md.Generator().manual_seed(9))] for _ in range(2)]
    assert batches[0] == batches[1]


def test_random_factories_check_their_arguments():
    with pytest.raises(RuntimeError, match="without replacement"):
        md.multinomial(md.tensor([0.5, 0.5]), 3)
    with pytest.raises(RuntimeError, match="sum of probabilities"):
        md.multinomial(md.zeros(3), 1)
    with pytest.raises(RuntimeError, match=r"\[0, 1\]"):
        md.bernoulli(md.tensor([1.5]))
    with pytest.raises(TypeError, match="generator must be"):
        md.rand(2, generator=3)


def test_num_threads_round_trip():
    n = md.get_num_threads()
    try:
        md.set_num_threads(1)
        assert md.get_num_threads() == 1
    finally:
        md.set_num_threads(n)
    with pytest.raises(RuntimeError, match="num_threads > 0"):
        md.set_num_threads(0)


def test_devices():
    assert md.device("cpu").type == "cpu" and md.device("cpu").index is None
    d = md.device("cuda", 1)
    assert (d.type, d.index, str(d), repr(d)) == ("cuda", 1, "cuda:1", "device(type='cuda', index=1)")
    assert md.device("cuda:0") == md.device("cuda", 0) != md.device("cuda", 1)
    assert md.device("cpu") == "cpu" and md.device("cpu") != "cuda"
    x = md.zeros(2, device=md.device("cpu"))
    assert isinstance(x.device, md.device) and x.device == "cpu" and not x.is_cuda
    assert x.to(md.device("cpu")).device == "cpu" and x.to(md.device("cpu"), md.float64).dtype is md.float64
    with pytest.raises(RuntimeError, match="device type"):
        md.device("tpu")


def test_cuda_and_backend_flag_namespaces():
    assert isinstance(md.cuda.is_available(), bool) and md.cuda.device_count() >= 0
    md.cuda.manual_seed(0)
    md.cuda.manual_seed_all(0)
    md.cuda.synchronize()
    md.backends.cudnn.benchmark = True
    md.backends.cudnn.deterministic = True
    md.backends.cudnn.enabled = True
    md.backends.cudnn.allow_tf32 = False
    md.backends.cuda.matmul.allow_tf32 = True
    assert md.backends.cudnn.benchmark and md.backends.cuda.matmul.allow_tf32
    md.backends.cudnn.benchmark = False
    md.backends.cuda.matmul.allow_tf32 = False
    with pytest.raises(AttributeError, match="no flag"):
        md.backends.cudnn.benchmarks = True
    assert md.backends.mps.is_available() is False
    assert md.accelerator.is_available() == md.cuda.is_available()
    assert (md.accelerator.current_accelerator() is None) == (not md.cuda.is_available())


def test_compile_wraps_the_model():
    model = md.nn.Linear(2, 2)
    assert md.compile(model)._orig_mod is model and md.compile(mode="max-autotune")(model)._orig_mod is model


def test_format_and_repr_follow_pytorch():
    loss = md.tensor(0.123456)
    assert f"{loss:.4f}" == "0.1235" and f"{md.tensor(3):d}" == "3"
    with pytest.raises(TypeError, match="0-d"):
        f"{md.zeros(2):.2f}"
    x = md.tensor([[1.0, 2.0]], requires_grad=True)
    assert repr(x) == "tensor([[1., 2.]], requires_grad=True)"
    assert repr(x * 2) == "tensor([[2., 4.]], grad_fn=<MulBackward0>)"
    assert repr(md.tensor([1, 2])) == "tensor([1, 2])"
    assert repr(md.tensor([0.5], dtype=md.float64)) == "tensor([0.5000], dtype=minidl.float64)"


@pytest.mark.parametrize("name", ["jit", "fx", "sparse_coo_tensor", "quantization", "complex64"])
def test_deliberately_missing_names_raise_not_implemented(name):
    with pytest.raises(NotImplementedError, match=f"minidl.{name} is not implemented"):
        getattr(md, name)


def test_unknown_names_are_still_attribute_errors():
    with pytest.raises(AttributeError):
        md.no_such_thing
