"""md.save / md.load of whole objects, as torch.save / torch.load: a whole model, an optimizer,
a scheduler and any picklable object save (pickled, their tensors stored beside the pickle);
md.load's default weights_only=True refuses the globals it does not allow, with
pickle.UnpicklingError naming the global and the fix (weights_only=False, add_safe_globals,
safe_globals); loaded objects work fully. Also pickle.dumps / copy.deepcopy of Tensors,
Parameters, Modules, optimizers, schedulers and the zoo models."""
import argparse
import collections
import copy
import dataclasses
import io
import os
import pickle

import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.optim as optim
from minidl import serialization
from minidl.io import CheckpointError


@dataclasses.dataclass
class Config:
    lr: float = 0.1
    layers: tuple = (2, 3)


Point = collections.namedtuple("Point", "x y")
UNPICKLABLE = lambda x: x  # noqa: E731  (module-level: pickle.PicklingError, as from torch.save)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 6)
        self.norm = nn.BatchNorm1d(6)
        self.fc2 = nn.Linear(6, 3)
        self.head = self.fc2          # the same module (and Parameters) under two names

    def forward(self, x):
        return self.fc2(self.norm(self.fc1(x)).relu())


def saved(obj, **kw):
    buf = io.BytesIO()
    md.save(obj, buf, **kw)
    return buf.getvalue()


def loaded(data, **kw):
    return md.load(io.BytesIO(data), **kw)


def values(t):
    return t.detach().numpy().copy()


@pytest.fixture(autouse=True)
def _no_safe_globals_left():
    serialization.clear_safe_globals()
    yield
    serialization.clear_safe_globals()


# whole models ------------------------------------------------------------------------------------
def test_a_whole_model_needs_weights_only_false_and_then_works_fully(tmp_path):
    md.manual_seed(0)
    model = Net()
    model.fc1.bias.requires_grad_(False)
    model(md.randn(8, 4))                     # running stats move
    model.eval()
    path = tmp_path / "model.pt"
    md.save(model, path)
    before = path.read_bytes()

    with pytest.raises(pickle.UnpicklingError) as info:
        md.load(path)
    message = str(info.value)
    assert "Net" in message and "weights_only=False" in message and "add_safe_globals" in message
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["model.pt"]

    back = md.load(path, weights_only=False)
    assert type(back) is Net and not back.training and back.head is back.fc2
    x = md.randn(5, 4)
    np.testing.assert_allclose(values(back(x)), values(model(x)), rtol=1e-6)
    np.testing.assert_array_equal(back.norm.running_mean.numpy(), model.norm.running_mean.numpy())
    assert [type(p) for p in back.parameters()] == [nn.Parameter] * 6   # fc1, norm, fc2 (once, though named twice)
    assert [p.requires_grad for p in back.parameters()] == [p.requires_grad for p in model.parameters()]
    back.train()
    back(x).square().sum().backward()
    assert back.fc1.weight.grad is not None and back.fc1.bias.grad is None
    assert back.fc2.weight.grad is back.head.weight.grad
    # the loaded model trains: its parameters are the optimizer's
    opt = optim.SGD(back.parameters(), lr=0.1)
    w = values(back.fc1.weight)
    opt.step()
    assert not np.array_equal(values(back.fc1.weight), w)


def test_allowing_the_model_classes_loads_it_with_weights_only():
    model = nn.Sequential(nn.Linear(3, 2), nn.Tanh())
    data = saved(model)
    unsafe = serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(data))
    assert sorted(unsafe) == ["minidl.nn.modules.activation.Tanh", "minidl.nn.modules.container.Sequential",
                              "minidl.nn.modules.linear.Linear"]
    with serialization.safe_globals([nn.Sequential, nn.Linear, nn.Tanh]):
        back = loaded(data)
    x = md.randn(2, 3)
    np.testing.assert_allclose(values(back(x)), values(model(x)), rtol=1e-6)
    with pytest.raises(pickle.UnpicklingError, match="Sequential"):
        loaded(data)                                   # only inside the with block
    serialization.add_safe_globals([nn.Sequential, nn.Linear, nn.Tanh])
    assert type(loaded(data)) is nn.Sequential
    assert serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(data)) == []


def test_tensors_sharing_memory_in_a_pickled_object_stay_shared():
    base = md.arange(12.0)
    holder = argparse.Namespace(base=base, view=base[4:].view(2, 4), again=base)
    back = loaded(saved(holder), weights_only=False)
    assert back.again is back.base
    back.base[5] = -1.0
    assert back.view[0, 1].item() == -1.0
    assert base[5].item() == 5.0


def test_a_model_compiled_with_md_compile_saves_either_way():
    model = nn.Linear(3, 2)
    compiled = md.compile(model)
    x = md.randn(4, 3)
    back = loaded(saved(model), weights_only=False)
    np.testing.assert_allclose(values(back(x)), values(model(x)), rtol=1e-6)
    back_compiled = loaded(saved(compiled), weights_only=False)
    assert type(back_compiled).__name__ == "OptimizedModule"
    assert type(back_compiled._orig_mod) is nn.Linear
    assert list(back_compiled.state_dict()) == ["_orig_mod.weight", "_orig_mod.bias"]
    np.testing.assert_allclose(values(back_compiled(x)), values(model(x)), rtol=1e-6)


# optimizers and schedulers --------------------------------------------------------------------
def _trained():
    md.manual_seed(1)
    model = nn.Linear(3, 2)
    opt = optim.AdamW(model.parameters(), lr=0.05)
    sched = optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    for _ in range(2):
        model(md.randn(4, 3)).square().sum().backward()
        opt.step()
        opt.zero_grad()
        sched.step()
    return model, opt, sched


def _step(model, opt, sched, x):
    model(x).square().sum().backward()
    opt.step()
    opt.zero_grad()
    sched.step()
    return values(model.weight)


def test_model_optimizer_and_scheduler_saved_together_resume_exactly():
    model, opt, sched = _trained()
    back = loaded(saved({"model": model, "opt": opt, "sched": sched, "epoch": 2}), weights_only=False)
    m2, o2, s2 = back["model"], back["opt"], back["sched"]
    assert back["epoch"] == 2 and s2.optimizer is o2
    assert o2.param_groups[0]["params"][0] is m2.weight and o2.param_groups[0]["params"][1] is m2.bias
    assert set(map(id, o2.state)) == {id(m2.weight), id(m2.bias)}
    assert s2.get_last_lr() == sched.get_last_lr()
    x = md.randn(4, 3)
    np.testing.assert_allclose(_step(m2, o2, s2, x), _step(model, opt, sched, x), rtol=1e-6)
    assert s2.get_last_lr() == sched.get_last_lr()


@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
def test_optimizer_and_scheduler_copies_step_as_the_originals(how):
    model, opt, sched = _trained()
    clone = (lambda o: pickle.loads(pickle.dumps(o))) if how == "pickle" else copy.deepcopy
    m2, o2, s2 = clone((model, opt, sched))
    assert o2.param_groups[0]["params"][0] is m2.weight and s2.optimizer is o2
    assert o2.state[m2.weight]["exp_avg"] is not opt.state[model.weight]["exp_avg"]
    np.testing.assert_array_equal(o2.state[m2.weight]["exp_avg"].numpy(), opt.state[model.weight]["exp_avg"].numpy())
    x = md.randn(4, 3)
    np.testing.assert_allclose(_step(m2, o2, s2, x), _step(model, opt, sched, x), rtol=1e-6)
    assert len(o2.state) == 2


def test_a_scheduler_holding_a_lambda_fails_with_pickles_error():
    _, opt, _ = _trained()
    sched = optim.lr_scheduler.LambdaLR(opt, UNPICKLABLE)
    with pytest.raises(pickle.PicklingError):
        md.save(sched, io.BytesIO())


# arbitrary objects ----------------------------------------------------------------------------
def test_arbitrary_python_objects_round_trip_with_weights_only_false():
    obj = {"args": argparse.Namespace(lr=0.1, name="run"), "cfg": Config(), "arr": np.arange(6.0).reshape(2, 3),
           "ints": np.array([1, 2], dtype=np.int16), "objs": np.array([None, "a"], dtype=object),
           "set": {1, 2}, "frozen": frozenset({3}), "bytes": b"\x00\x01", "complex": 1 + 2j,
           "od": collections.OrderedDict(b=1, a=2), "dd": collections.defaultdict(list, a=[1]),
           "point": Point(1, md.ones(2)), "key": {(1, 2): "tuple key"}, "scalar": np.float32(2.5)}
    back = loaded(saved(obj), weights_only=False)
    assert back["args"] == obj["args"] and back["cfg"] == obj["cfg"]
    np.testing.assert_array_equal(back["arr"], obj["arr"])
    assert back["ints"].dtype == np.int16 and list(back["objs"]) == [None, "a"]
    assert back["set"] == {1, 2} and back["frozen"] == frozenset({3}) and back["bytes"] == b"\x00\x01"
    assert back["complex"] == 1 + 2j and list(back["od"]) == ["b", "a"] and type(back["od"]) is collections.OrderedDict
    assert type(back["dd"]) is collections.defaultdict and back["dd"]["new"] == []
    assert type(back["point"]) is Point and back["point"].y.tolist() == [1.0, 1.0]
    assert back["key"] == {(1, 2): "tuple key"} and type(back["scalar"]) is np.float32


def test_weights_only_allows_what_torch_allows_by_default_and_refuses_the_rest():
    plain = {"set": {1, 2}, "bytes": b"ab", "complex": 2j, "od": collections.OrderedDict(a=md.ones(1)),
             "counter": collections.Counter("aab"), "size": md.Size([2, 3]), "dtype": md.float16,
             "arr": np.ones(2)}
    back = loaded(saved(plain))
    assert back["set"] == {1, 2} and back["bytes"] == b"ab" and back["counter"]["a"] == 2
    assert back["size"] == md.Size([2, 3]) and back["dtype"] is md.float16
    data = saved({"args": argparse.Namespace(lr=0.1), "cfg": Config()})
    with pytest.raises(pickle.UnpicklingError, match=r"argparse\.Namespace.*weights_only=False.*add_safe_globals"):
        loaded(data)
    assert serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(data)) == [
        "argparse.Namespace", f"{__name__}.Config"]
    serialization.add_safe_globals([argparse.Namespace, (Config, f"{__name__}.Config")])
    assert len(serialization.get_safe_globals()) == 2
    assert loaded(data)["cfg"] == Config()
    with pytest.raises(TypeError, match="class or function"):
        serialization.add_safe_globals([42])


def test_weights_only_never_runs_what_a_pickle_names(tmp_path):
    marker = tmp_path / "ran"

    class Boom:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))
    data = saved({"w": md.ones(2), "boom": Boom()})
    with pytest.raises(pickle.UnpicklingError, match="system"):
        loaded(data)
    assert not marker.exists()


def test_state_dicts_stay_pickle_free():
    model, opt, _ = _trained()
    data = saved({"model": model.state_dict(), "opt": opt.state_dict()})
    with np.load(io.BytesIO(data), allow_pickle=False) as npz:
        assert "__minidl__" in npz.files
    assert serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(data)) == []


def test_unpicklable_objects_fail_as_pickle_fails_and_leave_the_old_file(tmp_path):
    path = tmp_path / "ckpt"
    md.save({"epoch": 1}, path)
    before = path.read_bytes()

    def local():
        pass
    with pytest.raises(pickle.PicklingError):
        md.save({"epoch": 2, "fn": UNPICKLABLE}, path)
    with pytest.raises(AttributeError, match="local object"):
        md.save({"epoch": 2, "fn": local}, path)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["ckpt"]


def test_pickle_module_and_weights_only_as_torch_load():
    data = saved(argparse.Namespace(a=1))
    assert loaded(data, pickle_module=pickle).a == 1          # an explicit pickle_module means weights_only=False
    with pytest.raises(RuntimeError, match="explicit pickle_module"):
        loaded(data, pickle_module=pickle, weights_only=True)


def test_a_damaged_pickle_is_a_checkpoint_error(tmp_path):
    import json
    import zipfile
    good = saved(argparse.Namespace(t=md.ones(3)))
    with zipfile.ZipFile(io.BytesIO(good)) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    manifest = json.loads(np.load(io.BytesIO(members["__minidl__.npy"])).tobytes())
    name = manifest["root"][1] + ".npy"

    def rewritten(**changes):
        path = tmp_path / "bad"
        with zipfile.ZipFile(path, "w") as zf:
            for n, b in {**members, **changes}.items():
                zf.writestr(n, b)
        return path

    pkl = np.load(io.BytesIO(members[name]))
    buf = io.BytesIO()
    np.save(buf, pkl[: len(pkl) // 2])
    with pytest.raises(CheckpointError, match="truncated or corrupt"):
        md.load(rewritten(**{name: buf.getvalue()}), weights_only=False)
    manifest["root"][2] = []                       # the pickle refers to a tensor the file no longer lists
    buf = io.BytesIO()
    np.save(buf, np.frombuffer(json.dumps(manifest).encode(), dtype=np.uint8))
    with pytest.raises(CheckpointError, match="does not hold"):
        md.load(rewritten(**{"__minidl__.npy": buf.getvalue()}), weights_only=False)


def test_map_location_applies_to_a_pickled_models_tensors():
    model = nn.Linear(2, 2)
    back = loaded(saved(model), weights_only=False, map_location="cpu")
    assert back.weight.device == "cpu" and type(back.weight) is nn.Parameter


# pickle.dumps / copy.deepcopy ------------------------------------------------------------------
def test_tensor_pickle_and_deepcopy_follow_pytorch():
    t = md.randn(3, requires_grad=True)
    t.grad = md.ones(3)
    p = pickle.loads(pickle.dumps(t))
    assert p.requires_grad and p.is_leaf and p.grad is None
    d = copy.deepcopy(t)
    assert d.requires_grad and d.grad.tolist() == [1.0, 1.0, 1.0] and d.grad is not t.grad
    y = t * 2
    from_graph = pickle.loads(pickle.dumps(y))
    assert from_graph.requires_grad and from_graph.is_leaf
    with pytest.raises(RuntimeError, match="graph leaves"):
        copy.deepcopy(y)
    shallow = copy.copy(t)
    assert np.shares_memory(shallow._data, t._data)
    base = md.arange(6.0)
    for b2, v2 in (pickle.loads(pickle.dumps((base, base[2:]))), copy.deepcopy((base, base[2:]))):
        b2[3] = 100.0
        assert v2.tolist() == [2.0, 100.0, 4.0, 5.0]
    assert base[3].item() == 3.0
    param = nn.Parameter(md.ones(2), requires_grad=False)
    assert type(pickle.loads(pickle.dumps(param))) is nn.Parameter
    assert not pickle.loads(pickle.dumps(param)).requires_grad


def test_tensor_copies_match_pytorch():
    torch = pytest.importorskip("torch")
    for lib in (torch, md):
        t = lib.ones(3, requires_grad=True)
        t.grad = lib.ones(3)
        assert pickle.loads(pickle.dumps(t)).grad is None
        assert copy.deepcopy(t).grad is not None
        base = lib.arange(6.0)
        b2, v2 = copy.deepcopy((base, base[2:]))
        b2[3] = 100.0
        assert v2.tolist() == [2.0, 100.0, 4.0, 5.0]
        with pytest.raises(RuntimeError):
            copy.deepcopy(t * 2)


def _zoo_models():
    from minidl import zoo
    return {
        "lenet": lambda: zoo.LeNet(in_channels=1, num_classes=3, input_size=8),
        "resnet8": lambda: zoo.resnet8(in_channels=1, num_classes=3),
        "vgg_small": lambda: zoo.vgg_small(in_channels=1, num_classes=3),
        "vit": lambda: zoo.ViT(image_size=8, patch_size=4, d_model=16, n_layer=1, n_head=2, num_classes=3),
        "gpt": lambda: zoo.GPT(vocab_size=11, block_size=6, n_layer=1, n_head=2, d_model=16, tie_weights=True),
        "encoder": lambda: zoo.TransformerEncoderClassifier(vocab_size=11, num_classes=3, max_len=6, d_model=16,
                                                            n_head=2, n_layer=1),
        "char_lstm": lambda: zoo.CharLSTM(vocab_size=11, embed_dim=8, hidden_size=8, num_layers=1),
    }


_ZOO_INPUTS = {"lenet": "image", "resnet8": "image", "vgg_small": "image", "vit": "image", "gpt": "tokens",
               "encoder": "tokens", "char_lstm": "tokens"}


@pytest.mark.parametrize("name", sorted(_ZOO_INPUTS))
def test_zoo_models_pickle_deepcopy_and_save(name):
    md.manual_seed(0)
    model = _zoo_models()[name]().eval()
    x = md.randn(2, 1, 8, 8) if _ZOO_INPUTS[name] == "image" else md.randint(1, 11, (2, 6))

    def out(m):
        y = m(x)
        return values(y[0] if isinstance(y, tuple) else y)
    expected = out(model)
    for copy_ in (pickle.loads(pickle.dumps(model)), copy.deepcopy(model), loaded(saved(model), weights_only=False)):
        assert type(copy_) is type(model)
        np.testing.assert_allclose(out(copy_), expected, rtol=1e-5, atol=1e-6)
        assert len(list(copy_.parameters())) == len(list(model.parameters()))
        assert not any(np.shares_memory(p._data, q._data) for p, q in zip(copy_.parameters(), model.parameters()))


def test_whole_model_checkpoints_behave_as_torchs():
    torch = pytest.importorskip("torch")
    buf = io.BytesIO()
    torch.save({"model": torch.nn.Linear(2, 2), "args": argparse.Namespace(a=1), "s": {1}}, buf)
    with pytest.raises(pickle.UnpicklingError) as torch_error:
        torch.load(io.BytesIO(buf.getvalue()))
    with pytest.raises(pickle.UnpicklingError) as md_error:
        loaded(saved({"model": nn.Linear(2, 2), "args": argparse.Namespace(a=1), "s": {1}}))
    for info in (torch_error, md_error):
        assert "weights_only" in str(info.value) and "add_safe_globals" in str(info.value)
    torch_unsafe = torch.serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(buf.getvalue()))
    md_unsafe = serialization.get_unsafe_globals_in_checkpoint(
        io.BytesIO(saved({"model": nn.Linear(2, 2), "args": argparse.Namespace(a=1), "s": {1}})))
    assert "argparse.Namespace" in torch_unsafe and "argparse.Namespace" in md_unsafe
    assert "builtins.set" not in torch_unsafe and "builtins.set" not in md_unsafe
    for lib_save in (torch.save, md.save):
        with pytest.raises(pickle.PicklingError):
            lib_save({"f": UNPICKLABLE}, io.BytesIO())
