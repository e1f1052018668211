"""md.save / md.load: round trips, atomic writes, refusal of pickles and broken files, and
exact resumption of training from a checkpoint."""
import io
import os
import pickle
import zipfile

import numpy as np
import pytest

import minidl as md
import minidl.optim as optim
from minidl.data import DataLoader, TensorDataset
from minidl.io import CheckpointError
from minidl.io import checkpoint as ckpt
from minidl.nn import Module, Parameter


def nested_state():
    return {
        "model": {"layer.weight": md.randn(3, 4), "layer.bias": np.arange(3, dtype=np.float64),
                  "bn.num_batches_tracked": np.array(7, dtype=np.int64), "mask": np.array([True, False])},
        "optimizer": {"state": {0: {"step": 3, "exp_avg": np.ones((2, 2), np.float32)}, 1: {"step": 3}},
                      "param_groups": [{"lr": 0.01, "betas": (0.9, 0.999), "params": [0, 1], "amsgrad": False}]},
        "epoch": 12,
        "rng": md.get_rng_state(),
        "history": [1.5, float("inf"), -0.0],
        "name": "résumé ✓",
        "nothing": None,
        "np_scalar": np.float32(0.25),
        "huge": 2 ** 100,
        "empty": {},
    }


def assert_same(a, b):
    if isinstance(a, md.Tensor):
        assert isinstance(b, md.Tensor) and b.device == "cpu"
        a, b = a.numpy(), b.numpy()
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and b.dtype == a.dtype and b.shape == a.shape
        np.testing.assert_array_equal(a, b)
    elif isinstance(a, dict):
        assert type(b) is dict and list(a) == list(b)
        assert [type(k) for k in a] == [type(k) for k in b]
        for k in a:
            assert_same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            assert_same(x, y)
    else:
        assert type(a) is type(b) and (a == b or (a != a and b != b)), (a, b)


def test_round_trip_nested_state(tmp_path):
    state = nested_state()
    path = tmp_path / "run.ckpt"
    md.save(state, path)
    assert os.listdir(tmp_path) == ["run.ckpt"]            # exactly that name, no temp files left
    back = md.load(path)
    assert_same(state, back)
    assert back["rng"]["state"]["state"] == state["rng"]["state"]["state"]   # 128-bit ints survive
    assert np.isinf(back["history"][1]) and np.signbit(back["history"][2])
    # it is a plain .npz that NumPy reads without pickle
    with np.load(path, allow_pickle=False) as npz:
        assert ckpt.MANIFEST_KEY in npz.files


def test_model_state_dict_round_trip(tmp_path):
    m = TinyNet()
    md.save(m.state_dict(), tmp_path / "m.npz")
    m2 = TinyNet(seed=99)
    m2.load_state_dict(md.load(tmp_path / "m.npz"))
    for (n, p), (n2, p2) in zip(m.named_parameters(), m2.named_parameters()):
        assert n == n2
        np.testing.assert_array_equal(p.detach().numpy(), p2.detach().numpy())


UNPICKLABLE = lambda: 0  # noqa: E731  (a module-level lambda: pickle.PicklingError, as torch.save gives)


def test_unpicklable_objects_raise_pickles_error_and_write_nothing(tmp_path):
    with pytest.raises(pickle.PicklingError):
        md.save({"a": [1, UNPICKLABLE]}, tmp_path / "x")
    assert os.listdir(tmp_path) == []


# atomicity ---------------------------------------------------------------------------------
def test_failed_save_leaves_old_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "ckpt"
    md.save({"epoch": 1, "w": np.arange(5.0)}, path)
    before = path.read_bytes()

    # 1. the object cannot be serialised: fails before any file is touched
    with pytest.raises(pickle.PicklingError):
        md.save({"epoch": 2, "w": np.arange(5.0), "bad": UNPICKLABLE}, path)

    # 2. writing dies halfway through the archive
    real_savez = np.savez

    def dying_savez(f, *args, **kw):
        f.write(b"PK\x03\x04 half a zip")
        raise OSError("disk full")
    monkeypatch.setattr(np, "savez", dying_savez)
    with pytest.raises(OSError, match="disk full"):
        md.save({"epoch": 2, "w": np.arange(6.0)}, path)
    monkeypatch.setattr(np, "savez", real_savez)

    # 3. the rename fails (e.g. interrupted): the complete temp file must not replace the old one
    def failing_replace(src, dst):
        raise KeyboardInterrupt
    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(KeyboardInterrupt):
        md.save({"epoch": 3, "w": np.arange(7.0)}, path)
    monkeypatch.undo()

    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["ckpt"]                 # temp files cleaned up
    back = md.load(path)
    assert back["epoch"] == 1
    np.testing.assert_array_equal(back["w"], np.arange(5.0))


def test_save_replaces_and_keeps_permissions(tmp_path):
    path = tmp_path / "c"
    md.save({"v": 1}, path)
    os.chmod(path, 0o640)
    md.save({"v": 2}, path)
    assert md.load(path)["v"] == 2
    assert os.stat(path).st_mode & 0o777 == 0o640


# refusal -----------------------------------------------------------------------------------
class Boom:
    def __reduce__(self):
        return (os.system, ("echo pwned > /dev/null",))


def test_refuses_pickle_file(tmp_path):
    path = tmp_path / "model.pt"
    path.write_bytes(pickle.dumps({"w": Boom()}))
    with pytest.raises(CheckpointError, match=r"model\.pt.*pickle.*refused"):
        md.load(path)


def test_refuses_npz_with_pickled_object_array(tmp_path, monkeypatch):
    # a real checkpoint, plus a member that needs pickle: the whole file is refused
    path = tmp_path / "evil.npz"
    md.save({"w": np.ones(3)}, path)
    buf = io.BytesIO()
    np.save(buf, np.array([Boom()], dtype=object), allow_pickle=True)
    with zipfile.ZipFile(path, "a") as zf:
        zf.writestr("a1.npy", buf.getvalue())
    called = []
    monkeypatch.setattr(pickle, "loads", lambda *a, **k: called.append(1))
    monkeypatch.setattr(pickle, "load", lambda *a, **k: called.append(1))
    with pytest.raises(CheckpointError, match=r"evil\.npz.*a1\.npy.*pickled Python objects"):
        md.load(path)
    assert not called


def test_refuses_torch_style_zip(tmp_path):
    path = tmp_path / "t.pt"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("archive/data.pkl", pickle.dumps({"a": 1}))
    with pytest.raises(CheckpointError, match="pickle"):
        md.load(path)


def test_refuses_truncated_file(tmp_path):
    path = tmp_path / "full.ckpt"
    md.save(nested_state(), path)
    data = path.read_bytes()
    for cut in (len(data) // 2, len(data) - 10, 5):
        (tmp_path / "cut.ckpt").write_bytes(data[:cut])
        with pytest.raises(CheckpointError, match=r"cut\.ckpt.*truncated or corrupt"):
            md.load(tmp_path / "cut.ckpt")
    (tmp_path / "empty").write_bytes(b"")
    with pytest.raises(CheckpointError, match="empty"):
        md.load(tmp_path / "empty")


def test_refuses_foreign_files(tmp_path):
    plain = tmp_path / "plain.npz"
    np.savez(plain, weights=np.ones(3))
    with pytest.raises(CheckpointError, match=r"plain\.npz.*not a minidl checkpoint.*weights\.npy"):
        md.load(plain)
    text = tmp_path / "notes.txt"
    text.write_text("hello world")
    with pytest.raises(CheckpointError, match=r"notes\.txt.*zip"):
        md.load(text)
    npy = tmp_path / "a.npy"
    np.save(npy, np.ones(2))
    with pytest.raises(CheckpointError, match="single .npy"):
        md.load(npy)
    with pytest.raises(FileNotFoundError):
        md.load(tmp_path / "missing")


def test_refuses_forged_manifest(tmp_path):
    path = tmp_path / "forged.npz"
    np.savez(path, **{ckpt.MANIFEST_KEY: np.frombuffer(b'{"format": "other"}', np.uint8)})
    with pytest.raises(CheckpointError, match="does not describe a minidl checkpoint"):
        md.load(path)
    bad = b'{"format": "minidl-checkpoint", "version": 1, "root": ["array", "a7"]}'
    np.savez(path, **{ckpt.MANIFEST_KEY: np.frombuffer(bad, np.uint8)})
    with pytest.raises(CheckpointError, match="inconsistent"):
        md.load(path)


# exact resumption --------------------------------------------------------------------------
class TinyNet(Module):
    """tanh MLP from core ops only (4 -> 8 -> 1)."""

    def __init__(self, seed=0):
        super().__init__()
        rng = np.random.default_rng(seed)
        self.w1 = Parameter(rng.standard_normal((4, 8)).astype(np.float32) * 0.5)
        self.b1 = Parameter(np.zeros(8, np.float32))
        self.w2 = Parameter(rng.standard_normal((8, 1)).astype(np.float32) * 0.5)

    def forward(self, x):
        return (x @ self.w1 + self.b1).tanh() @ self.w2


def _data():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((24, 4)).astype(np.float32)
    y = np.sin(x.sum(1, keepdims=True)).astype(np.float32)
    return TensorDataset(md.from_numpy(x), md.from_numpy(y))


def _train(model, opt, sched, loader, epochs):
    losses = []
    for _ in range(epochs):
        for x, y in loader:
            noise = md.randn(*x.shape) * 0.05             # draws from the global RNG every step
            loss = ((model(x + noise) - y) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            losses.append(float(loss.item()))
    return losses


def _fresh():
    model = TinyNet()
    opt = optim.AdamW(model.parameters(), lr=0.05)
    sched = optim.lr_scheduler.StepLR(opt, step_size=4, gamma=0.7)
    loader = DataLoader(_data(), batch_size=5, shuffle=True)   # order from the global RNG
    return model, opt, sched, loader


def test_resume_from_checkpoint_is_exact(tmp_path):
    md.manual_seed(123)
    straight = _train(*_fresh(), epochs=6)

    md.manual_seed(123)
    model, opt, sched, loader = _fresh()
    first = _train(model, opt, sched, loader, epochs=2)
    md.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
             "rng": md.get_rng_state(), "epoch": 2}, tmp_path / "resume.ckpt")
    _train(model, opt, sched, loader, epochs=1)     # the interrupted run goes on a bit and is lost
    md.manual_seed(999)                             # and whatever happened to the RNG since

    ck = md.load(tmp_path / "resume.ckpt")
    model, opt, sched, loader = _fresh()
    model.load_state_dict(ck["model"])
    opt.load_state_dict(ck["optimizer"])
    sched.load_state_dict(ck["scheduler"])
    md.set_rng_state(ck["rng"])
    rest = _train(model, opt, sched, loader, epochs=6 - ck["epoch"])
    assert first + rest == straight
    assert straight[-1] < straight[0]
