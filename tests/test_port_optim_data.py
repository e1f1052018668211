"""Optimizers, schedulers, data utilities and gradient clipping behave as PyTorch's: the
implementation switches PyTorch's constructors take, a Tensor lr, named parameters, streams
without a length, StackDataset/ChainDataset, collation errors, and clip_grad_norm_'s numbers
(-inf norm, promoted dtype, low-precision rounding). Comparisons with torch skip without it."""
import copy
import math

import numpy as np
import pytest

import minidl as md
import minidl.optim as optim
from minidl.nn.utils import clip_grad
from minidl.utils import data


def _param(values=(1.0, 2.0, 3.0)):
    return md.tensor(np.asarray(values, dtype=np.float64), requires_grad=True)


def _run(opt, p, grads):
    for g in grads:
        p.grad = md.tensor(g)
        opt.step()
    return p.detach().numpy().copy()


# optimizers: PyTorch's keyword arguments ---------------------------------------------------------
@pytest.mark.parametrize("name,kwargs", [
    ("SGD", dict(foreach=False)), ("SGD", dict(fused=True)), ("Adam", dict(foreach=True, capturable=False)),
    ("AdamW", dict(fused=False)), ("Adagrad", dict(foreach=None, fused=None)), ("Adadelta", dict(capturable=False)),
    ("Adamax", dict(foreach=False)), ("NAdam", dict(foreach=True)), ("RAdam", dict(capturable=False)),
    ("ASGD", dict(foreach=False)), ("Rprop", dict(foreach=True)), ("RMSprop", dict(foreach=False)),
])
def test_implementation_switches_are_accepted_kept_and_change_nothing(name, kwargs):
    grads = np.random.default_rng(0).standard_normal((5, 3))
    plain, p = _param(), _param()
    expected = _run(getattr(optim, name)([plain], lr=0.1), plain, grads)
    opt = getattr(optim, name)([p], lr=0.1, **kwargs)
    np.testing.assert_array_equal(_run(opt, p, grads), expected)
    saved = opt.state_dict()["param_groups"][0]
    assert all(saved[k] == v for k, v in kwargs.items())
    assert "differentiable" in saved and "foreach" in saved


def test_implementation_switch_conflicts_raise_as_pytorch():
    with pytest.raises(RuntimeError, match="`fused` and `foreach` cannot be `True` together"):
        optim.Adam([_param()], fused=True, foreach=True)
    with pytest.raises(RuntimeError, match="`fused` does not support `differentiable`"):
        optim.SGD([_param()], lr=0.1, fused=True, differentiable=True)
    with pytest.raises(NotImplementedError, match="differentiable=True"):
        optim.Adam([_param()], differentiable=True)


def test_adam_with_decoupled_weight_decay_is_adamw():
    grads = np.random.default_rng(1).standard_normal((6, 3))
    a, b = _param(), _param()
    got = _run(optim.Adam([a], lr=0.1, weight_decay=0.2, decoupled_weight_decay=True), a, grads)
    np.testing.assert_array_equal(got, _run(optim.AdamW([b], lr=0.1, weight_decay=0.2), b, grads))
    c = _param()
    assert not np.array_equal(got, _run(optim.Adam([c], lr=0.1, weight_decay=0.2), c, grads))
    assert optim.AdamW([_param()]).param_groups[0]["decoupled_weight_decay"] is True


# optimizers: a Tensor lr ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam", "ASGD",
                                  "Rprop", "RMSprop"])
def test_a_tensor_lr_steps_as_its_value(name):
    grads = np.random.default_rng(2).standard_normal((4, 3))
    p, q = _param(), _param()
    lr = md.tensor(0.01, dtype=md.float64)
    opt = getattr(optim, name)([p], lr=lr)
    np.testing.assert_allclose(_run(opt, p, grads), _run(getattr(optim, name)([q], lr=0.01), q, grads), rtol=0,
                               atol=1e-15)
    assert opt.param_groups[0]["lr"] is lr


def test_a_tensor_lr_must_have_one_element():
    with pytest.raises(ValueError, match="Tensor lr must be 1-element"):
        optim.SGD([_param()], lr=md.tensor([0.1, 0.2]))


def test_a_scheduler_fills_a_tensor_lr_in_place():
    lr = md.tensor(0.1, dtype=md.float64)
    opt = optim.SGD([_param()], lr=lr)
    sched = optim.lr_scheduler.StepLR(opt, 2, gamma=0.5)
    seen = []
    for _ in range(5):
        opt.step()
        sched.step()
        seen.append(float(sched.get_last_lr()[0]))
    assert opt.param_groups[0]["lr"] is lr and float(lr) == pytest.approx(0.025)
    assert seen == pytest.approx([0.1, 0.05, 0.05, 0.025, 0.025])
    assert float(opt.param_groups[0]["initial_lr"]) == pytest.approx(0.1)   # a copy, not the filled tensor
    last = sched.get_last_lr()[0]
    opt.step()
    sched.step()
    assert float(last) == pytest.approx(0.025)   # get_last_lr gave a copy


# optimizers: parameters ------------------------------------------------------------------------------
def test_named_parameters_keep_their_names_in_the_state_dict():
    model = md.nn.Linear(2, 3)
    opt = optim.SGD(model.named_parameters(), lr=0.1, momentum=0.9)
    assert opt.param_groups[0]["param_names"] == ["weight", "bias"]
    assert opt.param_groups[0]["params"][0] is model.weight
    model(md.ones(1, 2)).sum().backward()
    opt.step()
    saved = copy.deepcopy(opt.state_dict())
    assert saved["param_groups"][0]["param_names"] == ["weight", "bias"]
    other = md.nn.Linear(2, 3)
    fresh = optim.SGD(other.parameters(), lr=0.5, momentum=0.9)
    fresh.load_state_dict(saved)
    assert fresh.param_groups[0]["param_names"] == ["weight", "bias"] and fresh.param_groups[0]["lr"] == 0.1


def test_named_and_unnamed_parameters_do_not_mix():
    with pytest.raises(ValueError, match="Some param names are missing"):
        optim.SGD([("a", _param()), _param()], lr=0.1)
    opt = optim.SGD([("a", _param())], lr=0.1)
    with pytest.raises(ValueError, match="with/without names"):
        opt.add_param_group({"params": [_param()]})


def test_a_set_of_parameters_in_a_group_is_refused_as_unordered():
    with pytest.raises(TypeError, match="ordered collections"):
        optim.SGD([{"params": {_param()}}], lr=0.1)
    opt = optim.SGD([_param()], lr=0.1)
    with pytest.raises(TypeError, match="ordered collections"):
        opt.add_param_group({"params": {_param()}})


# comparisons with PyTorch ----------------------------------------------------------------------------
def _torch():
    torch = pytest.importorskip("torch")
    return torch


@pytest.mark.parametrize("name,kwargs", [
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.1, foreach=False)),
    ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.1, decoupled_weight_decay=True)),
    ("RMSprop", dict(lr=0.01, momentum=0.9, centered=True, foreach=False)),
    ("NAdam", dict(lr=0.01, decoupled_weight_decay=True, weight_decay=0.1, foreach=False)),
])
def test_trajectories_with_tensor_lr_and_switches_match_pytorch(name, kwargs):
    torch = _torch()
    rng = np.random.default_rng(3)
    init, grads = rng.standard_normal(5), rng.standard_normal((20, 5))
    result = []
    for lib, opt_module in ((torch, torch.optim), (md, optim)):
        p = lib.tensor(init.copy(), dtype=lib.float64, requires_grad=True)
        lr = lib.tensor(kwargs["lr"], dtype=lib.float64)
        opt = getattr(opt_module, name)([p], **{**kwargs, "lr": lr})
        sched = opt_module.lr_scheduler.ExponentialLR(opt, 0.9)
        for g in grads:
            p.grad = lib.tensor(g, dtype=lib.float64)
            opt.step()
            sched.step()
        result.append(p.detach().numpy())
    np.testing.assert_allclose(result[1], result[0], rtol=1e-9, atol=1e-12)


def test_list_of_an_unsized_stream_loader_works_as_pytorch():
    torch = _torch()

    def batches(lib, d):
        class Stream(d.IterableDataset):
            def __iter__(self):
                return iter(range(7))
        return [b.numpy().tolist() for b in list(d.DataLoader(Stream(), batch_size=3))]
    assert batches(md, data) == batches(torch, torch.utils.data) == [[0, 1, 2], [3, 4, 5], [6]]


@pytest.mark.parametrize("dtype,norm_type", [("float16", 2.0), ("bfloat16", 2.0), ("float32", -math.inf),
                                             ("float64", 2.0), ("float16", math.inf), ("float32", 1.0)])
def test_clip_grad_norm_numbers_match_pytorch(dtype, norm_type):
    torch = _torch()
    rng = np.random.default_rng(4)
    values = [rng.standard_normal((3, 4)) * 2, rng.standard_normal(5)]
    out = []
    for lib in (torch, md):
        ps = [lib.tensor(v, dtype=getattr(lib, dtype), requires_grad=True) for v in values]
        for p, v in zip(ps, values):
            p.grad = lib.tensor(v, dtype=getattr(lib, dtype))
        total = lib.nn.utils.clip_grad_norm_(ps, 0.7, norm_type=norm_type)
        out.append((float(total), [p.grad.float().numpy() for p in ps]))
    assert out[1][0] == pytest.approx(out[0][0], rel=1e-6)
    # float16 exactly; bfloat16 within an ulp (PyTorch's vectorised loop rounds the factor to bfloat16
    # for some elements and not for others)
    rtol = {"float16": 0, "bfloat16": 2 ** -7}.get(dtype, 1e-6)
    for a, b in zip(out[1][1], out[0][1]):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=0)


def test_clip_grad_norm_of_mixed_dtypes_matches_pytorch():
    torch = _torch()
    out = []
    for lib in (torch, md):
        p = lib.tensor([3.0, 4.0], dtype=lib.float64, requires_grad=True)
        q = lib.tensor([1.0], dtype=lib.float32, requires_grad=True)
        p.grad, q.grad = lib.tensor([3.0, 4.0], dtype=lib.float64), lib.tensor([12.0], dtype=lib.float32)
        total = lib.nn.utils.clip_grad_norm_([q, p], 1.0)
        out.append((str(total.dtype).split(".")[-1], float(total), p.grad.numpy().tolist(), q.grad.numpy().tolist()))
    assert out[0] == out[1]


# data --------------------------------------------------------------------------------------------------
class _Stream(data.IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))


class _SizedStream(_Stream):
    def __len__(self):
        return self.n


def test_a_stream_without_len_gives_a_type_error_and_lists():
    assert not hasattr(_Stream(3), "__len__")
    with pytest.raises(TypeError):
        len(data.DataLoader(_Stream(3), batch_size=2))
    assert [b.numpy().tolist() for b in list(data.DataLoader(_Stream(5), batch_size=2))] == [[0, 1], [2, 3], [4]]
    assert list(iter(data.DataLoader(_Stream(2), batch_size=None))) == [0, 1]


def test_a_map_dataset_without_len_works_with_a_sampler():
    class Doubles(data.Dataset):
        def __getitem__(self, i):
            return i * 2
    loader = data.DataLoader(Doubles(), sampler=[3, 1, 4], batch_size=2)
    assert [b.numpy().tolist() for b in loader] == [[6, 2], [8]]


def test_chain_dataset_and_adding_streams():
    chained = data.ChainDataset([_SizedStream(2), _SizedStream(3)])
    assert list(chained) == [0, 1, 0, 1, 2] and len(chained) == 5
    both = _SizedStream(1) + _SizedStream(2)
    assert isinstance(both, data.ChainDataset) and list(both) == [0, 0, 1]
    with pytest.raises(AssertionError, match="only supports IterableDataset"):
        list(data.ChainDataset([data.TensorDataset(md.arange(2))]))


def test_stack_dataset_as_tuples_and_dicts():
    a, b = data.TensorDataset(md.arange(4)), data.TensorDataset(md.arange(4) * 10)
    pairs = data.StackDataset(a, b)
    assert len(pairs) == 4 and [int(t[0]) for t in pairs[2]] == [2, 20]
    named = data.StackDataset(x=a, y=b)
    assert [int(named[1][k][0]) for k in ("x", "y")] == [1, 10]
    batch = next(iter(data.DataLoader(named, batch_size=3)))
    assert [t.numpy().tolist() for t in batch["y"]] == [[0, 10, 20]]
    assert [int(s[1][0]) for s in pairs.__getitems__([3, 0])] == [30, 0]
    with pytest.raises(ValueError, match="Size mismatch between datasets"):
        data.StackDataset(a, data.TensorDataset(md.arange(3)))
    with pytest.raises(ValueError, match="both types are given"):
        data.StackDataset(a, y=b)
    with pytest.raises(ValueError, match="At least one dataset"):
        data.StackDataset()


def test_collating_samples_of_unequal_shapes_is_a_runtime_error():
    with pytest.raises(RuntimeError, match=r"stack expects each tensor to be equal size, but got \[2\] at entry 0 "
                                           r"and \[3\] at entry 1"):
        data.default_collate([np.zeros(2), np.zeros(3)])
    with pytest.raises(RuntimeError, match="stack expects each tensor to be equal size"):
        data.default_collate([md.zeros(2), md.zeros(2), md.zeros(1)])


def test_tensor_dataset_size_mismatch_is_an_assertion_error_as_pytorch():
    with pytest.raises(AssertionError, match="Size mismatch between tensors"):
        data.TensorDataset(md.zeros(3), md.zeros(4))


# gradient clipping -------------------------------------------------------------------------------------
def _with_grads(values, dtype=md.float32):
    ps = [md.tensor(np.asarray(v, dtype=np.float64), dtype=dtype, requires_grad=True) for v in values]
    for p, v in zip(ps, values):
        p.grad = md.tensor(np.asarray(v, dtype=np.float64), dtype=dtype)
    return ps


def test_clip_grad_norm_minus_inf_is_the_smallest_magnitude():
    ps = _with_grads([[-3.0, 0.5], [2.0, -4.0]])
    total = md.nn.utils.clip_grad_norm_(ps, 0.25, norm_type=-math.inf)
    assert float(total) == 0.5
    np.testing.assert_allclose(ps[0].grad.numpy(), np.array([-3.0, 0.5]) * 0.25 / (0.5 + 1e-6), rtol=1e-6)
    ps = _with_grads([[-3.0, 0.5], [2.0, -4.0]])
    assert float(md.nn.utils.clip_grad_norm_(ps, 1.0, norm_type=-math.inf)) == 0.5
    np.testing.assert_array_equal(ps[1].grad.numpy(), [2.0, -4.0])   # under max_norm: unchanged


def test_clip_grad_norm_total_has_the_promoted_dtype():
    p, q = _with_grads([[3.0, 4.0]], md.float32)[0], _with_grads([[12.0]], md.float64)[0]
    total = md.nn.utils.clip_grad_norm_([p, q], 1.0)
    assert total.dtype == md.float64 and float(total) == 13.0


def test_clip_grad_norm_of_float16_scales_by_the_float16_norm():
    ps = _with_grads([np.arange(6.0) - 2, [3.0, -4.0]], md.float16)
    total = md.nn.utils.clip_grad_norm_(ps, 1.0)
    norm16 = np.float16(np.sqrt(np.sum((np.arange(6.0) - 2) ** 2) + 25.0))
    assert float(total) == float(norm16)
    coef = np.float16(1.0 / np.float64(np.float16(float(norm16) + 1e-6)))
    expected = (np.float32(np.float16(-2.0)) * np.float32(coef)).astype(np.float16)
    assert ps[0].grad.numpy()[0] == expected


def test_get_total_norm_and_clip_grads_with_norm_split_clip_grad_norm_():
    ps = _with_grads([[3.0, 4.0], [12.0]])
    total = clip_grad.get_total_norm([p.grad for p in ps])
    assert float(total) == 13.0
    clip_grad.clip_grads_with_norm_(ps, 1.0, total)
    ref = _with_grads([[3.0, 4.0], [12.0]])
    md.nn.utils.clip_grad_norm_(ref, 1.0)
    for a, b in zip(ps, ref):
        np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())
