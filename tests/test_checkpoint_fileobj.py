"""md.save / md.load with paths and binary file objects, and md.load's map_location and
weights_only, as torch.save / torch.load take them."""
import io
import pathlib

import numpy as np
import pytest

import minidl as md


def _state():
    return {"w": md.tensor(np.arange(6, dtype=np.float32).reshape(2, 3)), "step": 3,
            "names": np.array(["a", "bc"]), "count": np.int32(5)}


def _assert_state(out):
    np.testing.assert_array_equal(np.asarray(out["w"]), np.arange(6, dtype=np.float32).reshape(2, 3))
    assert out["step"] == 3 and out["count"] == 5 and isinstance(out["count"], np.int32)
    assert out["names"].tolist() == ["a", "bc"]


class _Stream:
    """A non-seekable binary stream (a pipe or socket): read or write, no seek/tell."""
    def __init__(self, data=b""):
        self._buf, self.written = io.BytesIO(data), bytearray()

    def read(self, n=-1):
        return self._buf.read(n)

    def write(self, b):
        self.written += bytes(b)
        return len(b)


def test_round_trip_through_bytesio():
    buf = io.BytesIO()
    md.save(_state(), buf)
    buf.seek(0)
    _assert_state(md.load(buf))
    assert not buf.closed


def test_round_trip_through_an_open_file_and_a_pathlib_path(tmp_path):
    path = tmp_path / "ck.pt"
    with open(path, "wb") as f:
        md.save(_state(), f)
    with open(path, "rb") as f:
        _assert_state(md.load(f))
    md.save(_state(), pathlib.Path(tmp_path / "p.pt"))
    _assert_state(md.load(pathlib.Path(tmp_path / "p.pt")))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck.pt", "p.pt"]   # no temporaries left


def test_a_non_seekable_stream_saves_and_loads_and_a_file_mid_way_loads_from_its_position():
    out = _Stream()
    md.save(_state(), out)
    _assert_state(md.load(_Stream(bytes(out.written))))
    buf = io.BytesIO()
    buf.write(b"header")
    md.save(_state(), buf)
    buf.seek(len(b"header"))
    _assert_state(md.load(buf))


def test_a_damaged_stream_is_a_checkpoint_error_naming_it():
    buf = io.BytesIO()
    md.save(_state(), buf)
    with pytest.raises(md.io.CheckpointError, match="BytesIO.*truncated or corrupt"):
        md.load(io.BytesIO(buf.getvalue()[:-30]))
    with pytest.raises(md.io.CheckpointError, match="empty"):
        md.load(io.BytesIO())


def test_a_text_mode_file_is_a_type_error_naming_binary_mode(tmp_path):
    with open(tmp_path / "t.txt", "w") as f:
        with pytest.raises(TypeError, match="binary mode.*got a text-mode TextIOWrapper"):
            md.save(_state(), f)
    with open(tmp_path / "t.txt") as f:
        with pytest.raises(TypeError, match="binary mode.*got a text-mode TextIOWrapper"):
            md.load(f)
    with pytest.raises(TypeError, match="binary mode"):
        md.save(_state(), io.StringIO())


def test_a_closed_file_or_one_open_the_wrong_way_is_a_value_error(tmp_path):
    buf = io.BytesIO()
    buf.close()
    with pytest.raises(ValueError, match="closed"):
        md.save(_state(), buf)
    with pytest.raises(ValueError, match="closed"):
        md.load(buf)
    with open(tmp_path / "r.bin", "wb") as f:
        with pytest.raises(ValueError, match="not open for reading"):
            md.load(f)
    (tmp_path / "w.bin").write_bytes(b"")
    with open(tmp_path / "w.bin", "rb") as f:
        with pytest.raises(ValueError, match="not open for writing"):
            md.save(_state(), f)


def test_neither_a_path_nor_a_file_is_a_type_error_naming_both():
    with pytest.raises(TypeError, match=r"path \(str or os.PathLike\) or a binary file object.*got int"):
        md.save(_state(), 3)
    with pytest.raises(TypeError, match=r"path \(str or os.PathLike\) or a binary file object.*got list"):
        md.load([b"PK"])


def _saved():
    buf = io.BytesIO()
    md.save(_state(), buf)
    return buf.getvalue()


@pytest.mark.parametrize("where", ["cpu", md.device("cpu"), {"cuda:0": "cpu"}, {"cpu": "cpu"}])
def test_map_location_to_the_cpu_gives_cpu_tensors(where):
    out = md.load(io.BytesIO(_saved()), map_location=where)
    assert isinstance(out["w"], md.Tensor) and out["w"].device == "cpu"
    _assert_state(out)
    assert isinstance(out["names"], np.ndarray)    # strings have no Tensor form


def test_without_map_location_tensors_come_back_as_cpu_tensors_and_arrays_as_numpy():
    out = md.load(io.BytesIO(_saved()))
    assert isinstance(out["w"], md.Tensor) and out["w"].device == "cpu"
    assert isinstance(out["names"], np.ndarray)


def test_a_map_location_callable_gets_a_cpu_tensor_and_the_location_cpu():
    calls = []

    def where(storage, loc):
        calls.append((type(storage), storage.device, loc))
        return storage * 2

    out = md.load(io.BytesIO(_saved()), map_location=where)
    assert calls == [(md.Tensor, "cpu", "cpu")]   # the one numeric array
    np.testing.assert_array_equal(out["w"].numpy(), 2 * np.arange(6, dtype=np.float32).reshape(2, 3))
    kept = md.load(io.BytesIO(_saved()), map_location=lambda storage, loc: None)
    assert isinstance(kept["w"], md.Tensor)
    with pytest.raises(TypeError, match="must return a Tensor, an array or None, got str"):
        md.load(io.BytesIO(_saved()), map_location=lambda storage, loc: "cpu")


def test_bad_map_locations_are_refused_before_reading():
    with pytest.raises(TypeError, match="map_location must be None, a device name.*got int"):
        md.load(io.BytesIO(b""), map_location=3)
    with pytest.raises(RuntimeError, match="device type"):
        md.load(io.BytesIO(b""), map_location="gpu")


def test_a_cuda_saved_checkpoint_loads_to_cpu_and_back_to_cuda():
    try:
        md.backends.get("cuda")
    except RuntimeError as exc:
        pytest.skip(f"cuda device unavailable: {exc}")
    lin = md.nn.Linear(3, 2).to("cuda")
    buf = io.BytesIO()
    md.save(lin.state_dict(), buf)
    on_cpu = md.load(io.BytesIO(buf.getvalue()), map_location="cpu")
    assert on_cpu["weight"].device == "cpu"
    np.testing.assert_array_equal(on_cpu["weight"].detach().cpu().numpy(), lin.weight.detach().cpu().numpy())
    on_cuda = md.load(io.BytesIO(buf.getvalue()), map_location=lambda storage, loc: storage.cuda())
    assert on_cuda["bias"].device == "cuda"
    fresh = md.nn.Linear(3, 2)
    fresh.load_state_dict(on_cuda)
    np.testing.assert_array_equal(fresh.bias.detach().cpu().numpy(), lin.bias.detach().cpu().numpy())


def test_weights_only_is_accepted_either_way_and_never_unpickles():
    out = md.load(io.BytesIO(_saved()), weights_only=False)
    _assert_state(out)
    with pytest.raises(md.io.CheckpointError, match="pickle"):
        md.load(io.BytesIO(b"\x80\x04K\x01."), weights_only=False)
    with pytest.raises(ValueError, match="pickle_module must be None"):
        md.load(io.BytesIO(_saved()), pickle_module=object())
    with pytest.raises(TypeError, match="weights_only must be a bool"):
        md.load(io.BytesIO(_saved()), weights_only="yes")


def test_an_optimizer_whose_state_lives_on_cuda_saves_and_resumes_exactly():
    try:
        md.backends.get("cuda")
    except RuntimeError as exc:
        pytest.skip(f"cuda device unavailable: {exc}")
    md.manual_seed(0)
    lin = md.nn.Linear(3, 2).to("cuda")
    opt = md.optim.Adam(lin.parameters(), lr=0.1)
    x = md.randn(4, 3).to("cuda")
    lin(x).square().sum().backward()
    opt.step()
    buf = io.BytesIO()
    md.save({"model": lin.state_dict(), "optimizer": opt.state_dict()}, buf)
    saved = md.load(io.BytesIO(buf.getvalue()))
    state = opt.state_dict()["state"][0]
    expected = state["exp_avg"]
    expected = expected.cpu().numpy() if isinstance(expected, md.Tensor) else expected.copy_to_host()
    np.testing.assert_array_equal(np.asarray(saved["optimizer"]["state"][0]["exp_avg"]), expected)
    resumed = md.optim.Adam(lin.parameters(), lr=0.1)
    resumed.load_state_dict(saved["optimizer"])
    assert resumed.state_dict()["state"][0]["step"] == state["step"]
