"""Loading state into models, optimizers and schedulers: a state dict that does not fit is
refused at load time with an error naming what does not fit, and a refused load changes
nothing."""
import copy
import re

import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.optim as optim
from minidl.nn import Parameter
from minidl.optim import lr_scheduler


class Model(nn.Module):
    def __init__(self, n=4):
        super().__init__()
        self.fc = nn.Linear(4, n)
        self.bn = nn.BatchNorm1d(n)


def values(module):
    return {k: v.numpy().copy() for k, v in module.state_dict().items()}


def assert_values(module, expected):
    got = values(module)
    assert list(got) == list(expected)
    for k in got:
        assert got[k].dtype == expected[k].dtype
        np.testing.assert_array_equal(got[k], expected[k])


def trained_state(n=4, seed=1):
    md.manual_seed(seed)
    m = Model(n)
    m.bn(m.fc(md.randn(5, 4)))      # training mode: moves the running stats and num_batches_tracked
    return {k: v.numpy().copy() for k, v in m.state_dict().items()}


# modules ---------------------------------------------------------------------------------
def test_a_load_failing_on_the_last_entry_changes_nothing_and_names_it():
    m = Model()
    before = values(m)
    sd = trained_state()
    sd["bn.num_batches_tracked"] = np.array("seven")
    with pytest.raises(RuntimeError, match=r'(?s)for Model:.*"bn\.num_batches_tracked".*expected a Tensor or array '
                                           r"of numbers from checkpoint but received ndarray of dtype <U5"):
        m.load_state_dict(sd)
    assert_values(m, before)


def test_every_problem_is_listed_as_pytorch_lists_it():
    sd = trained_state(n=3)
    sd["extra"] = np.zeros(1)
    del sd["bn.running_mean"]
    with pytest.raises(RuntimeError) as info:
        Model().load_state_dict(sd)
    assert str(info.value) == (
        "Error(s) in loading state_dict for Model:\n"
        '\tMissing key(s) in state_dict: "bn.running_mean". \n'
        '\tUnexpected key(s) in state_dict: "extra". \n'
        "\tsize mismatch for fc.weight: copying a param with shape (3, 4) from checkpoint, the shape in current "
        "model is (4, 4).\n"
        "\tsize mismatch for fc.bias: copying a param with shape (3,) from checkpoint, the shape in current model "
        "is (4,).\n"
        "\tsize mismatch for bn.weight: copying a param with shape (3,) from checkpoint, the shape in current model "
        "is (4,).\n"
        "\tsize mismatch for bn.bias: copying a param with shape (3,) from checkpoint, the shape in current model "
        "is (4,).\n"
        "\tsize mismatch for bn.running_var: copying a param with shape (3,) from checkpoint, the shape in current "
        "model is (4,).")


def test_the_message_matches_pytorchs():
    torch = pytest.importorskip("torch")

    class TorchModel(torch.nn.Module):
        def __init__(self, n=4):
            super().__init__()
            self.fc = torch.nn.Linear(4, n)
            self.bn = torch.nn.BatchNorm1d(n)
    TorchModel.__name__ = "Model"
    sd = TorchModel(3).state_dict()
    sd["extra"] = torch.zeros(1)
    del sd["bn.running_var"]
    with pytest.raises(RuntimeError) as theirs:
        TorchModel().load_state_dict(sd)
    with pytest.raises(RuntimeError) as ours:
        Model().load_state_dict({k: v.numpy() for k, v in sd.items()})

    def as_tuple(match):
        dims = match.group(1).split(", ") if match.group(1) else []
        return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"
    assert str(ours.value) == re.sub(r"torch\.Size\(\[([^\]]*)\]\)", as_tuple, str(theirs.value))


def test_strict_false_loads_what_matches_and_returns_the_incompatible_keys():
    m = Model()
    sd = trained_state()
    result = m.load_state_dict({"fc.weight": sd["fc.weight"], "stray": np.ones(2)}, strict=False)
    # as PyTorch, a batch norm's counter missing from a dict without version metadata is not reported
    missing = [k for k in list(sd)[1:] if not k.endswith("num_batches_tracked")]
    assert result == (missing, ["stray"])
    assert result.missing_keys == missing and result.unexpected_keys == ["stray"]
    np.testing.assert_array_equal(m.fc.weight.detach().numpy(), sd["fc.weight"])
    assert repr(m.load_state_dict(sd)) == "<All keys matched successfully>"
    assert_values(m, sd)
    with pytest.raises(RuntimeError, match="size mismatch for fc.bias"):    # shapes are checked even so
        m.load_state_dict({"fc.bias": np.zeros(3)}, strict=False)


def test_buffers_are_loaded_and_checked():
    m = Model()
    sd = trained_state()
    assert sd["bn.num_batches_tracked"] == 1 and not np.all(sd["bn.running_mean"] == 0)
    m.load_state_dict(sd)
    np.testing.assert_array_equal(m.bn.running_mean.numpy(), sd["bn.running_mean"])
    assert m.bn.num_batches_tracked.numpy() == 1 and m.bn.num_batches_tracked.dtype == np.int64
    bad = dict(sd, **{"bn.running_mean": np.zeros(5, np.float32)})
    with pytest.raises(RuntimeError, match=r"size mismatch for bn\.running_mean: copying a param with shape \(5,\)"):
        Model().load_state_dict(bad)


@pytest.mark.parametrize("key, value", [
    ("fc.bias", np.arange(4, dtype=np.float64)),          # float64 into float32: rounding only
    ("fc.bias", np.arange(4, dtype=np.int64)),
    ("fc.bias", [0.5, 1.5, 2.5, 3.5]),
    ("bn.num_batches_tracked", np.array(7.0)),            # a whole float into an int buffer
    ("bn.num_batches_tracked", 7),
    ("bn.num_batches_tracked", np.array(True)),
    ("bn.num_batches_tracked", md.tensor(np.array(7, np.int32))),
    ("fc.bias", np.arange(4, dtype=">f4")),               # big-endian: stored in the machine's byte order
    ("bn.num_batches_tracked", np.array(7, dtype=">i8")),
])
def test_values_that_convert_exactly_are_loaded(key, value):
    m = Model()
    sd = dict(values(m), **{key: value})
    m.load_state_dict(sd)
    got = m.state_dict()[key].numpy()
    np.testing.assert_array_equal(got, np.asarray(value.numpy() if isinstance(value, md.Tensor) else value,
                                                  dtype=got.dtype))
    assert got.dtype.isnative


@pytest.mark.parametrize("key, value, match", [
    ("fc.bias", np.ones(4, np.complex64), r"dtype mismatch for fc\.bias: .*complex64.*float32.*complex"),
    ("fc.bias", np.array(["a", "b", "c", "d"]), r'"fc\.bias", expected a Tensor or array of numbers'),
    ("fc.bias", None, r'"fc\.bias".*received NoneType of dtype object'),
    ("fc.bias", {"a": 1}, r"received dict"),
    ("fc.bias", [[1.0], [1.0, 2.0]], r"received list \(.*inhomogeneous"),
    ("bn.num_batches_tracked", np.array(2.5), r"num_batches_tracked.*not whole numbers"),
    ("bn.num_batches_tracked", np.array(np.nan), r"inf or nan"),
    ("bn.num_batches_tracked", np.array(2.0 ** 70), r"outside \[-9223372036854775808, 9223372036854775807\]"),
    ("bn.num_batches_tracked", np.uint64(2 ** 64 - 1), r"outside"),
])
def test_values_that_cannot_take_the_entrys_dtype_are_refused(key, value, match):
    m = Model()
    before = values(m)
    sd = dict(trained_state(), **{key: value})
    with pytest.raises(RuntimeError, match=match):
        m.load_state_dict(sd)
    assert_values(m, before)


def test_a_state_dict_must_be_a_mapping():
    with pytest.raises(TypeError, match="Expected state_dict to be dict-like, got <class 'list'>"):
        Model().load_state_dict([("fc.weight", np.zeros((4, 4)))])


# optimizers --------------------------------------------------------------------------------
def adam_setup(amsgrad=False, steps=2):
    params = [Parameter(np.ones((2, 3), np.float32)), Parameter(np.ones(3, np.float32))]
    opt = optim.Adam(params, lr=0.1, amsgrad=amsgrad)
    for _ in range(steps):
        for p in params:
            p.grad = md.ones(*p.shape)
        opt.step()
    return params, opt


def snapshot(opt):
    """Everything an optimizer holds, as plain values."""
    groups = [{k: (v if k != "params" else [id(p) for p in v]) for k, v in g.items()} for g in opt.param_groups]
    state = {pid: {k: (np.array(v) if isinstance(v, np.ndarray) else v) for k, v in s.items()}
             for pid, s in dict.items(opt.state)}
    return copy.deepcopy(groups), state


def assert_unchanged(opt, before):
    groups, state = snapshot(opt)
    assert groups == before[0] and list(state) == list(before[1])
    for pid in state:
        assert list(state[pid]) == list(before[1][pid])
        for k, v in state[pid].items():
            np.testing.assert_array_equal(v, before[1][pid][k])


def refused_by(opt, sd, match):
    before = snapshot(opt)
    with pytest.raises(ValueError, match=match):
        opt.load_state_dict(sd)
    assert_unchanged(opt, before)
    for p in opt.param_groups[0]["params"]:     # and it still works
        p.grad = md.ones(*p.shape)
    opt.step()


def test_wrong_number_of_param_groups_is_refused():
    params, opt = adam_setup()
    sd = optim.Adam([{"params": [params[0]]}, {"params": [params[1]]}], lr=0.5).state_dict()
    refused_by(opt, sd, r"loaded state dict has a different number of parameter groups: 2 .* 1 in the optimizer")


def test_a_param_group_of_another_size_is_refused():
    params, opt = adam_setup()
    sd = optim.Adam([params[0]], lr=0.5).state_dict()
    refused_by(opt, sd, r"parameter group that doesn't match the size of optimizer's group: group sizes \[1\] in "
                        r"the state dict, \[2\] in the optimizer")


def test_state_of_another_shape_is_refused_naming_parameter_key_and_shapes():
    params, opt = adam_setup()
    sd = copy.deepcopy(opt.state_dict())
    sd["param_groups"][0]["lr"] = 0.5                    # would change too, if the load went ahead
    sd["state"][1]["exp_avg"] = np.zeros(4, np.float32)  # the last entry of the last parameter
    refused_by(opt, sd, r"parameter 1, 'exp_avg': expected shape \(3,\) \(the parameter's\), got \(4,\)")
    assert opt.param_groups[0]["lr"] == 0.1


def adam_state(**changes):
    params, opt = adam_setup()
    sd = copy.deepcopy(opt.state_dict())
    for path, value in changes.items():
        where, key = path.rsplit("__", 1)
        target = sd["state"][0] if where == "s0" else sd["param_groups"][0] if where == "g0" else sd
        if value is KeyError:
            del target[key]
        else:
            target[key] = value
    return opt, sd


@pytest.mark.parametrize("changes, match", [
    (dict(s0__exp_avg_sq=KeyError), r"parameter 0 lacks 'exp_avg_sq'"),
    (dict(s0__step=KeyError), r"parameter 0 lacks 'step'"),
    (dict(s0__step=-1), r"parameter 0, 'step': expected a step count"),
    (dict(s0__step=1.5), r"'step': expected a step count"),
    (dict(s0__step="2"), r"'step': expected a step count"),
    (dict(s0__step=np.array([2])), r"'step': expected a step count"),
    (dict(s0__exp_avg=np.array([["a", "b", "c"]] * 2)), r"'exp_avg': expected an array of numbers of shape \(2, 3\)"),
    (dict(s0__exp_avg=None), r"'exp_avg': expected an array of numbers"),
    (dict(s0__exp_avg=np.zeros((3, 2), np.float32)), r"'exp_avg': expected shape \(2, 3\) .*got \(3, 2\)"),
    (dict(g0__amsgrad=True), r"parameter 0 lacks 'max_exp_avg_sq'"),
    (dict(g0__amsgrad="yes"), r"param_groups\[0\]\['amsgrad'\]: expected a bool"),
    (dict(g0__lr="0.1"), r"param_groups\[0\]\['lr'\]: expected a number"),
    (dict(g0__lr=-1.0), r"param_groups\[0\]: Invalid learning rate: -1.0"),
    (dict(g0__betas=(0.9,)), r"\['betas'\]: expected a sequence of 2 values"),
    (dict(g0__betas=(0.9, 1.5)), r"Invalid beta parameters"),
    (dict(g0__initial_lr=None), r"\['initial_lr'\]: expected a number"),
    (dict(g0__params=[0, 0]), r"parameter index 0 more than once"),
    (dict(g0__params=[0, "1"]), r"\['params'\] must be a list of parameter indices"),
    (dict(g0__params=None), r"\['params'\] must be a list of parameter indices"),
    (dict(__state=[1, 2]), r"'state' must be a dict"),
    (dict(__param_groups={"params": [0, 1]}), r"'param_groups' must be a list of dicts"),
])
def test_corrupted_adam_state_is_refused(changes, match):
    opt, sd = adam_state(**changes)
    refused_by(opt, sd, match)


@pytest.mark.parametrize("key, match", [
    (5, r"refers to parameter index 5, but the loaded param_groups hold only 2 parameters \(indices 0\.\.1\)"),
    ("0", r"refers to parameter index '0'"),
])
def test_state_for_an_unknown_parameter_is_refused(key, match):
    params, opt = adam_setup()
    sd = copy.deepcopy(opt.state_dict())
    sd["state"][key] = sd["state"][0]
    refused_by(opt, sd, match)


def test_state_pytorch_would_save_loads():
    # PyTorch keeps step as a 0-d float tensor; a fresh parameter's state may be empty
    params, opt = adam_setup()
    sd = copy.deepcopy(opt.state_dict())
    sd["state"][0]["step"] = np.array(2.0, np.float32)
    sd["state"][1] = {}
    sd["param_groups"][0]["betas"] = [0.8, 0.9]
    sd["param_groups"][0]["foreach"] = None              # PyTorch's own keys are kept
    fresh = optim.Adam([Parameter(np.ones((2, 3), np.float32)), Parameter(np.ones(3, np.float32))], lr=0.3)
    fresh.load_state_dict(sd)
    p0, p1 = fresh.param_groups[0]["params"]
    step = fresh.state[p0]["step"]                       # PyTorch's form: a 0-d float32 Tensor
    assert isinstance(step, md.Tensor) and step.shape == () and step.dtype == md.float32 and step.item() == 2
    assert fresh.state[p0]["exp_avg"].dtype == np.float32 and fresh.state[p1] == {}
    assert fresh.param_groups[0]["betas"] == (0.8, 0.9) and fresh.param_groups[0]["foreach"] is None
    assert fresh.param_groups[0]["lr"] == 0.1


def test_sgd_momentum_buffer_is_checked():
    params = [Parameter(np.ones(3, np.float32))]
    opt = optim.SGD(params, lr=0.1, momentum=0.9)
    params[0].grad = md.ones(3)
    opt.step()
    sd = copy.deepcopy(opt.state_dict())
    sd["state"][0]["momentum_buffer"] = np.ones(4)
    refused_by(opt, sd, r"parameter 0, 'momentum_buffer': expected shape \(3,\) \(the parameter's\), got \(4,\)")
    sd["state"][0]["momentum_buffer"] = None             # no buffer yet: the next step starts one
    opt.load_state_dict(sd)
    params[0].grad = md.ones(3)
    opt.step()
    sd["state"][0]["momentum_buffer"] = np.full(3, 2.0)  # float64 becomes the parameter's float32
    opt.load_state_dict(sd)
    assert opt.state[params[0]]["momentum_buffer"].dtype == np.float32
    sd["param_groups"][0]["nesterov"] = True
    sd["param_groups"][0]["dampening"] = 0.5
    refused_by(opt, sd, r"param_groups\[0\]: Nesterov momentum requires")


# schedulers --------------------------------------------------------------------------------
def step_lr(**kw):
    opt = optim.SGD([Parameter(np.ones(3, np.float32))], lr=0.1)
    sched = lr_scheduler.StepLR(opt, step_size=2, gamma=0.5, **kw)
    for _ in range(3):
        opt.step()
        sched.step()
    return opt, sched


@pytest.mark.parametrize("key, value, match", [
    ("base_lrs", [0.1, 0.2], r"'base_lrs': expected a sequence of 1 values"),
    ("base_lrs", ["0.1"], r"'base_lrs'\[0\]: expected a number"),
    ("_last_lr", None, r"'_last_lr': expected a sequence"),
    ("last_epoch", "3", r"'last_epoch': expected a number"),
    ("last_epoch", 2.5, r"'last_epoch': expected an int >= -1, got 2.5"),
    ("last_epoch", -5, r"'last_epoch': expected an int >= -1"),
    ("step_size", 0, r"step_size must be a positive integer, got 0"),
    ("step_size", float("inf"), r"step_size must be a positive integer"),
    ("gamma", None, r"'gamma': expected a number"),
    ("optimizer", None, r"key 'optimizer' would replace"),
    ("step", 3, r"key 'step' would replace"),
    (7, 3, r"key 7 that is not a string"),
])
def test_a_corrupted_scheduler_state_is_refused_and_changes_nothing(key, value, match):
    opt, sched = step_lr()
    before = copy.deepcopy(sched.state_dict())
    sd = dict(sched.state_dict(), **{key: value}) if isinstance(key, str) else {**sched.state_dict(), key: value}
    with pytest.raises(ValueError, match=match):
        sched.load_state_dict(sd)
    assert sched.state_dict() == before and sched.optimizer is opt
    sched.step()


def test_cosine_t_max_is_checked():
    opt = optim.SGD([Parameter(np.ones(3, np.float32))], lr=0.1)
    sched = lr_scheduler.CosineAnnealingLR(opt, T_max=10)
    with pytest.raises(ValueError, match="T_max must be positive, got -1"):
        sched.load_state_dict(dict(sched.state_dict(), T_max=-1))
    assert sched.T_max == 10


def test_a_lambda_schedulers_functions_are_kept():
    opt = optim.SGD([Parameter(np.ones(3, np.float32))], lr=1.0)
    sched = lr_scheduler.LambdaLR(opt, lambda t: 0.5 ** t)
    for _ in range(2):
        opt.step()
        sched.step()
    other = lr_scheduler.LambdaLR(optim.SGD([Parameter(np.ones(3, np.float32))], lr=1.0), lambda t: 0.5 ** t)
    other.load_state_dict(dict(sched.state_dict(), lr_lambdas=[None]))
    other.step()
    assert other.get_last_lr() == [0.125] and callable(other.lr_lambdas[0])


def test_states_round_trip_through_a_checkpoint(tmp_path):
    params, opt = adam_setup(amsgrad=True)
    sched = lr_scheduler.StepLR(opt, step_size=2)
    m = Model()
    md.save({"m": m.state_dict(), "o": opt.state_dict(), "s": sched.state_dict()}, tmp_path / "c")
    ck = md.load(tmp_path / "c")
    m2, (_, opt2) = Model(), adam_setup(amsgrad=True, steps=0)
    sched2 = lr_scheduler.StepLR(opt2, step_size=2)
    m2.load_state_dict(ck["m"])
    opt2.load_state_dict(ck["o"])
    sched2.load_state_dict(ck["s"])
    assert_values(m2, values(m))
    assert sched2.state_dict() == sched.state_dict()
    for p, p2 in zip(opt.param_groups[0]["params"], opt2.param_groups[0]["params"]):
        for k, v in opt.state[p].items():
            np.testing.assert_array_equal(opt2.state[p2][k], v)
