"""md.save / md.load of Tensors as torch.save / torch.load: Tensors come back as Tensors,
Parameters as Parameters (with requires_grad), one object saved twice as one object, and
tensors that shared memory as views of one buffer, so that in-place writes propagate.
Version-1 files (Tensors stored as plain arrays) still load as arrays, and forged tensor
descriptions are refused before any array is read."""
import io
import json

import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
from minidl.io import CheckpointError
from minidl.io import checkpoint as ckpt

BF16 = md.bfloat16


def roundtrip(obj, **load_kwargs):
    buf = io.BytesIO()
    md.save(obj, buf)
    buf.seek(0)
    return md.load(buf, **load_kwargs)


def members(obj):
    """The arrays md.save stores for ``obj`` (the manifest left out) and its manifest."""
    buf = io.BytesIO()
    md.save(obj, buf)
    buf.seek(0)
    with np.load(buf, allow_pickle=False) as npz:
        files = {k: npz[k] for k in npz.files}
    manifest = json.loads(files.pop(ckpt.MANIFEST_KEY).tobytes().decode())
    return files, manifest


def same_memory(a, b):
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


# round trips -------------------------------------------------------------------------------
DTYPES = [md.float32, md.float64, md.float16, md.int8, md.int64, md.uint8, md.bool] + ([BF16] if BF16 else [])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(2, 3), (), (0, 4)], ids=["2x3", "0-d", "empty"])
def test_a_tensor_comes_back_a_cpu_tensor_of_its_dtype_shape_and_values(dtype, shape):
    values = (np.arange(int(np.prod(shape))) % 3).reshape(shape)
    t = md.tensor(values).to(dtype)
    back = roundtrip({"t": t})["t"]
    assert type(back) is md.Tensor and back.device == "cpu"
    assert back.dtype is dtype and back.shape == t.shape and not back.requires_grad
    np.testing.assert_array_equal(back.float().numpy(), t.float().numpy())


@pytest.mark.parametrize("requires_grad", [True, False])
def test_a_parameter_comes_back_a_parameter_with_its_requires_grad(requires_grad):
    p = nn.Parameter(md.randn(3, 2), requires_grad=requires_grad)
    back = roundtrip([p])[0]
    assert isinstance(back, nn.Parameter) and back.requires_grad is requires_grad and back.is_leaf
    np.testing.assert_array_equal(back.detach().numpy(), p.detach().numpy())
    if BF16 is not None:
        b = roundtrip(nn.Parameter(md.ones(2, dtype=BF16)))
        assert isinstance(b, nn.Parameter) and b.dtype is BF16 and b.requires_grad


def test_requires_grad_is_kept_and_a_computed_tensor_comes_back_a_leaf():
    leaf = md.randn(3, requires_grad=True)
    out = roundtrip({"leaf": leaf, "computed": leaf * 2, "plain": md.ones(2)})
    assert out["leaf"].requires_grad and out["leaf"].is_leaf and type(out["leaf"]) is md.Tensor
    assert out["computed"].requires_grad and out["computed"].is_leaf and out["computed"].grad_fn is None
    assert not out["plain"].requires_grad
    np.testing.assert_allclose(out["computed"].detach().numpy(), 2 * leaf.detach().numpy())


def test_arrays_stay_arrays_beside_tensors():
    out = roundtrip({"a": np.arange(3.0), "t": md.arange(3.0), "s": np.float32(2)})
    assert type(out["a"]) is np.ndarray and type(out["t"]) is md.Tensor and type(out["s"]) is np.float32
    _, manifest = members({"a": np.arange(3.0), "t": md.arange(3.0)})
    assert manifest["version"] == 2
    assert [v[0] for _, v in manifest["root"][1]] == ["array", "tensor"]


def test_a_non_contiguous_tensor_alone_is_stored_compactly():
    x = md.arange(24.0).reshape(4, 6)
    t = x.t()[::2]                                   # 3 x 4, strided: shares memory with nothing saved
    files, _ = members({"t": t})
    assert [a.size for a in files.values()] == [12]
    back = roundtrip({"t": t})["t"]
    assert back.is_contiguous() and back.shape == (3, 4)
    np.testing.assert_array_equal(back.numpy(), t.numpy())


# sharing ---------------------------------------------------------------------------------------
def test_a_view_and_its_base_come_back_sharing_memory():
    x = md.arange(12.0).reshape(3, 4)
    v = x[1:, ::2]
    files, manifest = members({"x": x, "v": v})
    assert [a.size for a in files.values()] == [12]              # stored once
    out = roundtrip({"x": x, "v": v})
    x2, v2 = out["x"], out["v"]
    assert v2.stride() == (4, 2) and v2.storage_offset() == 4 and x2.stride() == (4, 1)
    assert same_memory(x2, v2)
    np.testing.assert_array_equal(v2.numpy(), v.numpy())
    v2.add_(100)                                                 # writes through the view ...
    assert x2[1].tolist() == [104.0, 5.0, 106.0, 7.0]
    x2[2, 0] = -1.0                                              # ... and through the base
    assert v2[1, 0].item() == -1.0
    assert x.numpy()[1, 0] == 4.0                                # the saved tensors are untouched


def test_two_overlapping_views_are_stored_as_the_span_covering_them():
    base = md.arange(16.0).reshape(4, 4)
    a, b = base[0:2], base[1:3]                                  # rows 0-1 and 1-2: row 1 in both
    files, _ = members([a, b])
    assert [x.size for x in files.values()] == [12]              # rows 0..2, not the whole base
    a2, b2 = roundtrip([a, b])
    assert same_memory(a2, b2) and b2.storage_offset() - a2.storage_offset() == 4
    a2[1].mul_(0).add_(7)
    assert b2[0].tolist() == [7.0] * 4
    np.testing.assert_array_equal(b2[1].numpy(), base[2].numpy())


def test_views_of_one_bfloat16_base_share_memory():
    if BF16 is None:
        pytest.skip("bfloat16 needs ml_dtypes")
    x = md.arange(6.0).to(BF16)
    lo, hi = roundtrip([x[:4], x[2:]])
    assert lo.dtype is BF16 and same_memory(lo, hi)
    lo[3] = 50.0
    assert hi[1].item() == 50.0


def test_one_object_saved_twice_comes_back_one_object():
    p = nn.Parameter(md.randn(2, 2))
    out = roundtrip({"a": p, "b": [p], "c": (p, p.detach())})
    assert out["a"] is out["b"][0] is out["c"][0] and isinstance(out["a"], nn.Parameter)
    assert out["c"][1] is not out["a"] and type(out["c"][1]) is md.Tensor and same_memory(out["c"][1], out["a"])


def tied_model():
    md.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 3))
    m[1].weight = m[0].weight
    return m


def test_a_state_dict_with_tied_weights():
    m = tied_model()
    sd = roundtrip(m.state_dict())
    assert sd["0.weight"] is not sd["1.weight"] and same_memory(sd["0.weight"], sd["1.weight"])
    sd["0.weight"][0, 0] = 42.0
    assert sd["1.weight"][0, 0].item() == 42.0
    other = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 3))
    other.load_state_dict(sd)
    assert other[1].weight[0, 0].item() == 42.0
    kept = roundtrip(m.state_dict(keep_vars=True))               # the Parameter itself under both keys
    assert kept["0.weight"] is kept["1.weight"] and isinstance(kept["0.weight"], nn.Parameter)
    assert kept["0.weight"].requires_grad and type(kept["0.bias"]) is nn.Parameter


def test_map_location_keeps_the_types_and_the_sharing_on_the_cpu():
    x = md.arange(6.0).reshape(2, 3)
    saved = {"x": x, "row": x[1], "p": nn.Parameter(md.ones(2), requires_grad=False), "a": np.ones(2)}
    calls = []

    def where(storage, loc):
        calls.append((tuple(storage.shape), loc))
        return storage

    for loc in ("cpu", md.device("cpu"), {"cuda:0": "cpu"}, where):
        out = roundtrip(saved, map_location=loc)
        assert same_memory(out["x"], out["row"]) and out["row"].storage_offset() == 3
        assert isinstance(out["p"], nn.Parameter) and not out["p"].requires_grad
        assert type(out["a"]) is md.Tensor                         # a map_location makes arrays Tensors
    assert sorted(calls) == [((2,), "cpu"), ((2,), "cpu"), ((6,), "cpu")]   # one call per stored buffer


def test_a_map_location_callable_that_shrinks_a_shared_storage_is_an_error():
    x = md.arange(6.0)
    with pytest.raises(ValueError, match="1-d storage of at least 6 elements"):
        roundtrip([x, x[2:]], map_location=lambda storage, loc: storage[:3])


# version 1 -------------------------------------------------------------------------------------
def write_v1(root, version=1, **arrays):
    manifest = json.dumps({"format": ckpt.FORMAT, "version": version, "root": root}).encode()
    buf = io.BytesIO()
    np.savez(buf, **{ckpt.MANIFEST_KEY: np.frombuffer(manifest, np.uint8)}, **arrays)
    buf.seek(0)
    return buf


def test_a_version_1_file_loads_its_arrays_as_arrays():
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    root = ["dict", [[["str", "w"], ["array", "a0"]], [["str", "step"], ["int", 3]],
                     [["str", "bf"], ["bfloat16", "a1"]]]]
    bits = np.array([0x3F80, 0x4040], np.uint16)                  # bfloat16 1.0 and 3.0
    if BF16 is None:
        root[1].pop()
    out = md.load(write_v1(root, a0=w, a1=bits))
    assert type(out["w"]) is np.ndarray and out["step"] == 3
    np.testing.assert_array_equal(out["w"], w)
    if BF16 is not None:
        assert type(out["bf"]) is np.ndarray and out["bf"].astype(np.float32).tolist() == [1.0, 3.0]
    tensors = md.load(write_v1(root, a0=w, a1=bits), map_location="cpu")
    assert type(tensors["w"]) is md.Tensor
    assert type(roundtrip({"w": md.from_numpy(w)})["w"]) is md.Tensor     # what is saved now loads as saved


def test_a_version_1_file_has_no_tensor_nodes():
    root = ["tensor", "a0", {"id": 0, "requires_grad": False, "parameter": False}]
    with pytest.raises(CheckpointError, match="unknown manifest entry 'tensor'"):
        md.load(write_v1(root, a0=np.ones(2, np.float32)))
    assert type(md.load(write_v1(root, version=2, a0=np.ones(2, np.float32)))) is md.Tensor


# forged tensor descriptions ----------------------------------------------------------------------
def forged(obj, change):
    """``obj`` saved, its manifest's root passed to ``change`` (which edits it in place, or
    returns a dict of the arrays to store instead), and written back."""
    files, manifest = members(obj)
    assert manifest["version"] == 2
    changed = change(manifest["root"], files)
    files = changed if isinstance(changed, dict) and all(isinstance(a, np.ndarray) for a in changed.values()) \
        else files
    raw = json.dumps(manifest).encode()
    buf = io.BytesIO()
    np.savez(buf, **{ckpt.MANIFEST_KEY: np.frombuffer(raw, np.uint8)}, **files)
    buf.seek(0)
    return buf


def _view_meta(root):
    return root[1][1][2]                                         # the view's meta in [base, view]


def _set_view(**kv):
    return lambda root, files: _view_meta(root)["view"].update(kv)


def _base_and_view():
    x = md.arange(12.0).reshape(3, 4)
    return [x, x[1:, 1:3]]


FORGERIES = {
    "offset past the end": (_set_view(offset=11), "outside its buffer"),
    "stride past the end": (_set_view(stride=[4, 4]), "outside its buffer"),
    "shape past the end": (_set_view(shape=[2, 9]), "outside its buffer"),
    "huge shape": (_set_view(shape=[2 ** 62, 1], stride=[0, 1]), "not an int in|more than any array"),
    "negative stride": (_set_view(stride=[-4, 1]), "not an int in"),
    "bool in shape": (_set_view(shape=[True, 2]), "not an int in"),
    "float offset": (_set_view(offset=1.0), "not an int in"),
    "shape/stride lengths": (_set_view(stride=[4]), "lists of one length"),
    "view keys": (lambda root, files: _view_meta(root)["view"].pop("stride"), "offset, shape and stride"),
    "unknown meta key": (lambda root, files: _view_meta(root).update(pickle=True), "description is not a dict"),
    "missing requires_grad": (lambda root, files: _view_meta(root).pop("requires_grad"), "description is not"),
    "id reused differently": (lambda root, files: _view_meta(root).update(id=0), "tensor id 0 twice"),
    "id not an int": (lambda root, files: _view_meta(root).update(id="0"), "id is not a non-negative int"),
    "requires_grad not a bool": (lambda root, files: _view_meta(root).update(requires_grad=1), "not a bool"),
    "view of a 2-d array": (lambda root, files: {"a0": np.zeros((3, 4), np.float32)}, "not 1-d"),
    "bfloat16 over float32": (lambda root, files: _view_meta(root).update(dtype="bfloat16"),
                              "only a bfloat16 entry over uint16"),
    "compact and view on one buffer": (lambda root, files: root[1][0][2].pop("view"), "cannot share it"),
    "missing buffer": (lambda root, files: root[1][1].__setitem__(1, "a7"), "does not hold"),
}


@pytest.mark.parametrize("name", list(FORGERIES))
def test_a_forged_tensor_description_is_refused_before_reading(name, monkeypatch):
    change, message = FORGERIES[name]
    buf = forged(_base_and_view(), change)
    read, original = [], ckpt.Archive.read
    monkeypatch.setattr(ckpt.Archive, "read", lambda self, n: read.append(n) or original(self, n))
    with pytest.raises(CheckpointError, match=message):
        md.load(buf)
    assert read == [ckpt.MANIFEST_KEY + ".npy"]                   # no array was read


def test_more_forgeries_of_compact_tensors():
    def two_ids_one_buffer(root, files):
        root[1][1][1] = root[1][0][1]

    buf = forged([md.ones(2), md.zeros(2)], two_ids_one_buffer)
    with pytest.raises(CheckpointError, match="cannot share it"):
        md.load(buf)
    buf = forged([md.ones(2, dtype=md.int64)], lambda root, files: root[1][0][2].update(requires_grad=True))
    with pytest.raises(CheckpointError, match="requires grad"):
        md.load(buf)
    buf = forged({"t": md.ones(2), "a": np.ones(2)}, lambda root, files: root[1][1][1].__setitem__(1, "a1"))
    with pytest.raises(CheckpointError, match="twice|both as a tensor and as an array"):
        md.load(buf)
    buf = forged([md.ones(2)], lambda root, files: {"a0": np.array(["ab", "c"])})
    with pytest.raises(CheckpointError, match="which no tensor has"):
        md.load(buf)


def test_a_forged_view_that_fits_loads_as_the_view_it_describes():
    buf = forged(_base_and_view(), _set_view(offset=0, shape=[3, 4], stride=[0, 3]))
    x, v = md.load(buf)
    np.testing.assert_array_equal(v.numpy(), np.tile(np.array([0.0, 3.0, 6.0, 9.0]), (3, 1)))
    assert same_memory(x, v)


# against torch ------------------------------------------------------------------------------------
def _program(lib, nn_):
    """The same objects built with torch or minidl."""
    lib.manual_seed(0)
    x = lib.arange(12.0).reshape(3, 4)
    model = nn_.Sequential(nn_.Linear(3, 3), nn_.Linear(3, 3))
    model[1].weight = model[0].weight
    frozen = nn_.Parameter(lib.ones(2), requires_grad=False)
    leaf = lib.ones(3, requires_grad=True)
    return {"x": x, "v": x[1:, ::2], "a": x[0:2], "b": x[1:3], "frozen": frozen, "frozen_again": frozen,
            "leaf": leaf, "computed": leaf * 2, "sd": model.state_dict(), "vars": model.state_dict(keep_vars=True)}


def _describe(out, storage_id):
    """What the load-side semantics make of a loaded program's objects, without the library."""
    flat = {k: v for k, v in out.items() if k not in ("sd", "vars")}
    flat.update({f"sd.{k}": v for k, v in out["sd"].items()})
    flat.update({f"vars.{k}": v for k, v in out["vars"].items()})
    names = sorted(flat)
    kinds = {k: (type(flat[k]).__name__, flat[k].requires_grad, flat[k].is_leaf, tuple(flat[k].shape)) for k in names}
    same_object = sorted((a, b) for i, a in enumerate(names) for b in names[i + 1:] if flat[a] is flat[b])
    sharing = sorted((a, b) for i, a in enumerate(names) for b in names[i + 1:]
                     if storage_id(flat[a]) == storage_id(flat[b]))
    return kinds, same_object, sharing


def test_load_side_semantics_match_torch(tmp_path):
    torch = pytest.importorskip("torch")
    t_path, m_path = tmp_path / "t.pt", tmp_path / "m.ckpt"
    torch.save(_program(torch, torch.nn), t_path)
    md.save(_program(md, nn), m_path)
    t_out, m_out = torch.load(t_path), md.load(m_path)
    t_kinds, t_same, t_sharing = _describe(t_out, lambda t: t.untyped_storage().data_ptr())
    m_kinds, m_same, m_sharing = _describe(m_out, lambda t: t.untyped_storage().data_ptr())
    assert m_same == t_same and m_sharing == t_sharing
    assert m_kinds == t_kinds
    for key in ("v", "a", "b"):
        assert m_out[key].stride() == t_out[key].stride()
        assert m_out[key].storage_offset() == t_out[key].storage_offset()
        np.testing.assert_array_equal(m_out[key].numpy(), t_out[key].numpy())
    for out in (t_out, m_out):                       # the same in-place writes, the same effects
        out["v"].add_(100)
        out["a"][1, 2] = -5.0
        out["sd"]["0.weight"].mul_(0)
    np.testing.assert_array_equal(m_out["x"].numpy(), t_out["x"].numpy())
    np.testing.assert_array_equal(m_out["b"].numpy(), t_out["b"].numpy())
    assert float(m_out["sd"]["1.weight"].abs().sum()) == float(t_out["sd"]["1.weight"].abs().sum()) == 0.0
