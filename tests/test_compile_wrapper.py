"""md.compile as torch.compile: a module comes back as an OptimizedModule wrapping it
(``_orig_mod``; state_dict keys prefixed ``_orig_mod.``; the same parameters; train/eval and
attributes reach the module), a function as a function; options are checked as torch checks
them. The torch comparisons use backend="eager", which needs no compiler toolchain."""
import copy
import io
import pickle
import warnings

import numpy as np
import pytest

import minidl as md
import minidl.nn as nn


def _pair(lib):
    lib.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.ReLU(), lib.nn.Linear(4, 2))


def test_a_module_is_wrapped_and_shares_everything_with_it():
    model = _pair(md)
    compiled = md.compile(model)
    assert type(compiled).__name__ == "OptimizedModule" and isinstance(compiled, nn.Module)
    assert compiled._orig_mod is model
    assert list(compiled.state_dict()) == ["_orig_mod.0.weight", "_orig_mod.0.bias", "_orig_mod.2.weight",
                                           "_orig_mod.2.bias"]
    assert all(a is b for a, b in zip(compiled.parameters(), model.parameters()))
    assert [n for n, _ in compiled.named_modules()] == ["", "_orig_mod", "_orig_mod.0", "_orig_mod.1", "_orig_mod.2"]
    x = md.randn(5, 3)
    np.testing.assert_array_equal(compiled(x).detach().numpy(), model(x).detach().numpy())
    compiled(x).sum().backward()
    assert model[0].weight.grad is not None
    assert repr(compiled).startswith("OptimizedModule(\n  (_orig_mod): Sequential(")
    assert len(compiled) == 3


def test_train_eval_and_attributes_reach_the_module():
    model = _pair(md)
    compiled = md.compile(model)
    compiled.eval()
    assert not model.training and not compiled.training and not model[0].training
    model.train()
    assert compiled.training
    compiled.training = False
    assert not model.training
    compiled.train()
    assert model[2].training
    compiled.note = "x"
    assert model.note == "x" and "note" not in compiled.__dict__
    del compiled.note
    assert not hasattr(model, "note")
    with pytest.raises(TypeError, match="not subscriptable"):    # as torch's: indexing is the class's, not forwarded
        compiled[0]
    assert compiled.get_submodule("_orig_mod.0") is model[0]
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        compiled.nothing
    with pytest.raises(TypeError, match="does not support len"):
        len(md.compile(nn.Linear(2, 2)))


def test_hooks_of_the_module_run_and_to_converts_it():
    model = nn.Linear(2, 2)
    seen = []
    model.register_forward_hook(lambda m, args, out: seen.append(m))
    compiled = md.compile(model)
    compiled(md.ones(1, 2))
    assert seen == [model]
    assert compiled.to(md.float64) is compiled and model.weight.dtype == md.float64


def test_state_dict_round_trips_with_the_prefix_and_stripped_as_nanogpt_does():
    compiled = md.compile(_pair(md))
    fresh = md.compile(nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)))
    assert not fresh.load_state_dict(compiled.state_dict()).missing_keys
    plain = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    with pytest.raises(RuntimeError, match="_orig_mod"):
        plain.load_state_dict(compiled.state_dict())
    state = compiled.state_dict()
    prefix = "_orig_mod."
    for k in list(state):
        if k.startswith(prefix):
            state[k[len(prefix):]] = state.pop(k)
    plain.load_state_dict(state)
    x = md.randn(2, 3)
    np.testing.assert_array_equal(plain(x).detach().numpy(), compiled(x).detach().numpy())


def test_functions_and_decorators():
    def double(x):
        return x * 2
    fn = md.compile(double)
    assert callable(fn) and fn.__wrapped__ is double and fn.__name__ == "double"
    assert fn(md.ones(2)).tolist() == [2.0, 2.0]

    @md.compile
    def inc(x):
        return x + 1

    @md.compile(mode="max-autotune", fullgraph=True)
    def dec(x):
        return x - 1
    assert inc(md.ones(1)).item() == 2.0 and dec(md.ones(1)).item() == 0.0
    model = nn.Linear(2, 2)
    assert md.compile(model, disable=True) is model
    assert md.compile(backend="eager")(model)._orig_mod is model


@pytest.mark.parametrize("kwargs, error, match", [
    ({"mode": "fastest"}, RuntimeError, "Unrecognized mode=fastest"),
    ({"mode": "default", "options": {}}, RuntimeError, "Either mode or options"),
    ({"backend": "no-such-backend"}, RuntimeError, "Invalid backend"),
    ({"speed": 3}, TypeError, "unexpected keyword argument 'speed'"),
])
def test_options_are_checked_as_torch_checks_them(kwargs, error, match):
    with pytest.raises(error, match=match):
        md.compile(nn.Linear(2, 2), **kwargs)


def test_a_non_callable_is_refused():
    with pytest.raises(AssertionError, match="A callable function is expected"):
        md.compile(3)


def test_the_wrapper_pickles_deep_copies_and_saves():
    model = _pair(md)
    compiled = md.compile(model)
    x = md.randn(2, 3)
    for clone in (pickle.loads(pickle.dumps(compiled)), copy.deepcopy(compiled)):
        assert type(clone) is type(compiled) and clone._orig_mod is not model
        np.testing.assert_array_equal(clone(x).detach().numpy(), model(x).detach().numpy())
        clone.eval()
        assert not clone._orig_mod.training and model.training
    buf = io.BytesIO()
    md.save(compiled, buf)
    back = md.load(io.BytesIO(buf.getvalue()), weights_only=False)
    assert list(back.state_dict()) == list(compiled.state_dict())


def test_behaviour_matches_torch_compile():
    torch = pytest.importorskip("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t_model = _pair(torch)
        t_compiled = torch.compile(t_model, backend="eager")
        m_model = _pair(md)
        m_compiled = md.compile(m_model, backend="eager")
        assert type(t_compiled).__name__ == type(m_compiled).__name__
        assert list(t_compiled.state_dict()) == list(m_compiled.state_dict())
        assert [n for n, _ in t_compiled.named_modules()] == [n for n, _ in m_compiled.named_modules()]
        for compiled, model in ((t_compiled, t_model), (m_compiled, m_model)):
            compiled.eval()
            assert not model.training
            compiled.flag = 1
            assert model.flag == 1 and "flag" not in compiled.__dict__
            assert all(a is b for a, b in zip(compiled.parameters(), model.parameters()))
        t_fn = torch.compile(lambda x: x * 2, backend="eager")
        m_fn = md.compile(lambda x: x * 2, backend="eager")
        assert type(t_fn) is type(m_fn)
        assert torch.compile(t_model, disable=True) is t_model and md.compile(m_model, disable=True) is m_model
        for lib, model in ((torch, t_model), (md, m_model)):
            with pytest.raises(RuntimeError, match="Unrecognized mode"):
                lib.compile(model, mode="fastest")
            with pytest.raises(RuntimeError, match="Either mode or options"):
                lib.compile(model, mode="default", options={})
            with pytest.raises(TypeError):
                lib.compile(model, speed=3)
            with pytest.raises(AssertionError):
                lib.compile(3)
