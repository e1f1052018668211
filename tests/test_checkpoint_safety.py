"""md.load of untrusted files (zip bombs, forged sizes and headers, malformed manifests)
and md.save's temporaries (killed saves, concurrent saves, failed saves)."""
import errno
import io
import json
import os
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
import warnings
import zipfile
import zlib

import numpy as np
import pytest

import minidl as md
from minidl.io import CheckpointError, temporaries
from minidl.io import checkpoint as ckpt

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GIB = 1 << 30
MIB = 1 << 20


# building bad files ------------------------------------------------------------------------
def npy(descr, shape, data=b"", fortran=False, header_text=None):
    """A .npy (version 1.0) with any header, true or not."""
    text = header_text or repr({"descr": descr, "fortran_order": fortran, "shape": shape})
    header = text.encode("latin1")
    header += b" " * (-(len(header) + 11) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + data


def manifest_json(root):
    return json.dumps({"format": "minidl-checkpoint", "version": 1, "root": root}).encode()


def manifest_npy(root=None, raw=None):
    raw = manifest_json(root) if raw is None else raw
    return npy("|u1", (len(raw),), raw)


def write_npz(path, members):
    """An ordinary zip of (name, bytes) members, duplicates allowed."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")       # zipfile warns about duplicate names
        with zipfile.ZipFile(path, "w") as zf:
            for name, data in members:
                zf.writestr(name, data)
    return path


def raw_zip(path, members, aliases=()):
    """A zip written byte by byte, so that its declared sizes can lie. ``members`` are
    (name, bytes as stored, method, declared uncompressed size, crc); each alias
    (name, i) is one more directory entry pointing at member i's data."""
    body, offsets = b"", []
    for name, payload, method, size, crc in members:
        offsets.append(len(body))
        body += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0x21, crc, len(payload), size,
                            len(name), 0) + name.encode() + payload
    entries = [(m[0], m, offsets[i]) for i, m in enumerate(members)]
    entries += [(name, members[i], offsets[i]) for name, i in aliases]
    central = b""
    for name, (_, payload, method, size, crc), offset in entries:
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, method, 0, 0x21, crc, len(payload),
                               size, len(name), 0, 0, 0, 0, 0, offset) + name.encode()
    eocd = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(entries), len(entries), len(central), len(body), 0)
    path.write_bytes(body + central + eocd)
    return path


def stored(name, data):
    return (name, data, zipfile.ZIP_STORED, len(data), zlib.crc32(data))


@pytest.fixture(scope="module")
def deflated_gib():
    """(raw deflate stream, crc) of an .npy header followed by 1 GiB of zeros: about 1 MB.
    After a full flush deflate starts afresh, so every MiB of zeros compresses to the same
    bytes and the stream is built from one compressed MiB instead of compressing 1 GiB."""
    def build(header):
        c = zlib.compressobj(9, zlib.DEFLATED, -15)
        start = c.compress(header) + c.flush(zlib.Z_FULL_FLUSH)
        piece = c.compress(bytes(MIB)) + c.flush(zlib.Z_FULL_FLUSH)
        assert c.compress(bytes(MIB)) + c.flush(zlib.Z_FULL_FLUSH) == piece
        crc = zlib.crc32(header)
        for _ in range(GIB // MIB):
            crc = zlib.crc32(bytes(MIB), crc)
        return start + piece * (GIB // MIB) + c.flush(), crc
    return build


def refused(path, match):
    """md.load(path) raises CheckpointError naming the file and matching ``match``."""
    with pytest.raises(CheckpointError, match=match) as info:
        md.load(path)
    assert os.path.basename(path) in str(info.value)
    return info.value


def peak_bytes(fn):
    tracemalloc.start()
    try:
        fn()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


# zip bombs and lying sizes -----------------------------------------------------------------
def test_an_honest_zip_bomb_is_refused_before_anything_is_inflated(tmp_path, deflated_gib):
    header = npy("<f8", (GIB // 8,))
    stream, crc = deflated_gib(header)
    path = raw_zip(tmp_path / "bomb.npz", [stored("__minidl__.npy", manifest_npy(["array", "a0"])),
                                           ("a0.npy", stream, zipfile.ZIP_DEFLATED, len(header) + GIB, crc)])
    assert path.stat().st_size < 2 * MIB
    with zipfile.ZipFile(path) as zf, zf.open("a0.npy") as f:    # a genuine zip that inflates to 1 GiB
        first = f.read(MIB)
        assert first.startswith(header) and first.count(0) == MIB - len(header) + header.count(0)
    start = time.perf_counter()
    peak = peak_bytes(lambda: refused(path, r"bomb\.npz.*inflate to 10737\d{5} bytes.*zip bomb"))
    assert peak < 4 * MIB and time.perf_counter() - start < 2


def test_a_directory_declaring_more_than_the_file_could_hold_is_refused(tmp_path):
    path = raw_zip(tmp_path / "forged.npz", [stored("__minidl__.npy", manifest_npy(["array", "a0"])),
                                             ("a0.npy", b"\x03\x00", zipfile.ZIP_DEFLATED, GIB, 0)])
    refused(path, "zip bomb")


def test_a_lying_size_never_makes_load_inflate_past_it(tmp_path, deflated_gib):
    # the directory and the .npy header both say 8 MiB; the data would inflate to 1 GiB
    header = npy("<f8", (MIB,))
    stream, _ = deflated_gib(header)
    path = raw_zip(tmp_path / "liar.npz", [stored("__minidl__.npy", manifest_npy(["array", "a0"])),
                                           ("a0.npy", stream, zipfile.ZIP_DEFLATED, len(header) + 8 * MIB, 0)])
    start = time.perf_counter()
    peak = peak_bytes(lambda: refused(path, r"truncated or corrupt.*a0\.npy.*CRC"))
    assert peak < 8 * MIB + 16 * MIB and time.perf_counter() - start < 2


def test_overlapping_members_are_refused(tmp_path):
    data = npy("<f8", (1000,), bytes(8000))
    path = raw_zip(tmp_path / "overlap.npz", [stored("__minidl__.npy", manifest_npy(["array", "a0"])),
                                              stored("a0.npy", data)],
                   aliases=[(f"a{i}.npy", 1) for i in range(1, 5)])
    refused(path, "more than the whole file's .*overlapping")


def test_a_stored_member_whose_sizes_disagree_is_refused(tmp_path):
    data = npy("<f8", (4,), bytes(32))
    path = raw_zip(tmp_path / "sizes.npz", [stored("__minidl__.npy", manifest_npy(["array", "a0"])),
                                            ("a0.npy", data, zipfile.ZIP_STORED, len(data) + 100, 0)])
    refused(path, "stored uncompressed but declares")


def test_a_huge_declared_shape_is_refused_without_allocating_it(tmp_path):
    path = write_npz(tmp_path / "huge.npz", [("__minidl__.npy", manifest_npy(["array", "a0"])),
                                             ("a0.npy", npy("<f8", (1 << 40,), bytes(8)))])
    peak = peak_bytes(lambda: refused(path, r"declares shape \(1099511627776,\).*but holds 8 bytes"))
    assert peak < 4 * MIB


@pytest.mark.parametrize("member, match", [
    (npy("<f8", (-3,), bytes(24)), r"invalid shape \(-3,\)"),
    (npy("<f8", (3,), bytes(16)), r"declares shape \(3,\) of float64 \(24 bytes\) but holds 16"),
    (npy("<f8", (2, 3), bytes(40), fortran=True), "but holds 40"),
    (npy("<x9", (1,), bytes(9)), "not a valid .npy array"),
    (npy("<M8[s]", (1,), bytes(8)), "has dtype datetime64"),
    (npy([("a", "<f8"), ("b", "<i4")], (1,), bytes(12)), "has dtype"),
    (npy("|O", (1,), bytes(8)), "pickled Python objects"),
    (npy(None, None, bytes(8), header_text="{'descr': '<f8', 'shape': (1,)}"), "not a valid .npy array"),
    (npy(None, None, bytes(8), header_text="[1, 2, 3]"), "not a valid .npy array"),
    (npy(None, None, b"", header_text="{" + "(" * 5000), "not a valid .npy array"),
    (b"\x93NUMPY\x01\x00" + struct.pack("<H", 60000) + b" " * 60000, "header of 60000 bytes"),
    (b"\x93NUMPY\x09\x00" + bytes(100), "version this reader knows"),
    (b"\x93NUM", "version this reader knows"),
    (b"plain text, not an array", "not a .npy array"),
])
def test_a_malformed_npy_member_is_refused(tmp_path, member, match):
    path = write_npz(tmp_path / "member.npz", [("__minidl__.npy", manifest_npy(["array", "a0"])),
                                               ("a0.npy", member)])
    refused(path, match)


def test_duplicate_member_names_are_refused(tmp_path):
    a = npy("<f8", (1,), bytes(8))
    path = write_npz(tmp_path / "dup.npz", [("__minidl__.npy", manifest_npy(["array", "a0"])),
                                            ("a0.npy", a), ("a0.npy", a)])
    refused(path, "two members named 'a0.npy'")


def test_members_compressed_other_than_by_deflate_are_refused(tmp_path):
    path = tmp_path / "bz2.npz"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_BZIP2) as zf:
        zf.writestr("__minidl__.npy", manifest_npy(["none"]))
    refused(path, "compression method 12")


def test_deflated_checkpoints_load(tmp_path):
    # np.savez_compressed's files are honest deflate archives: within the ratio they load
    path = tmp_path / "small.npz"
    np.savez_compressed(path, **{ckpt.MANIFEST_KEY: np.frombuffer(manifest_json(["array", "a0"]), np.uint8),
                                 "a0": np.zeros((256, 1024))})
    assert path.stat().st_size < 16 * 1024     # over 100:1, but small
    np.testing.assert_array_equal(md.load(path), np.zeros((256, 1024)))


def test_corrupted_array_data_is_refused(tmp_path):
    path = tmp_path / "flip.ckpt"
    md.save({"w": np.arange(1000.0)}, path)
    data = bytearray(path.read_bytes())
    data[data.find(np.arange(1000.0)[500:].tobytes()[:16])] ^= 0xFF
    path.write_bytes(bytes(data))
    refused(path, r"truncated or corrupt.*a0\.npy.*CRC")


def test_arrays_come_back_exactly_whatever_their_layout(tmp_path):
    state = {"f": np.asfortranarray(np.arange(12.0).reshape(3, 4)), "be": np.arange(5, dtype=">i4"),
             "empty": np.zeros((0, 3), np.float32), "s": np.array(["ab", "c"]), "b": np.array([True, False]),
             "z": np.array(1 + 2j), "scalar": np.int16(-7)}
    md.save(state, tmp_path / "x")
    back = md.load(tmp_path / "x")
    for k, v in state.items():
        assert back[k].dtype == v.dtype and back[k].shape == np.shape(v)
        np.testing.assert_array_equal(back[k], v)
    assert back["f"].flags.f_contiguous and back["f"].flags.writeable and isinstance(back["scalar"], np.int16)


# malformed manifests -----------------------------------------------------------------------
def manifest_file(tmp_path, root=None, raw=None, arrays=(("a0", np.arange(3.0)),)):
    members = [("__minidl__.npy", manifest_npy(root, raw))]
    for name, a in arrays:
        buf = io.BytesIO()
        np.save(buf, a)
        members.append((name + ".npy", buf.getvalue()))
    return write_npz(tmp_path / "manifest.npz", members)


def nested(depth):
    return ["list", [nested(depth - 1)]] if depth else ["none"]


@pytest.mark.parametrize("raw, match", [
    (b"[1, 2]", "does not describe a minidl checkpoint"),
    (b'"just a string"', "does not describe a minidl checkpoint"),
    (b"\xff\xfe{}", "not valid JSON"),
    (b'{"format": "minidl-checkpoint", "version": 1, "root": ', "not valid JSON"),
    (b'{"format": "minidl-checkpoint", "version": "1", "root": ["none"]}', "invalid format version '1'"),
    (b'{"format": "minidl-checkpoint", "version": true, "root": ["none"]}', "invalid format version True"),
    (b'{"format": "minidl-checkpoint", "version": 7, "root": ["none"]}', "version 7 is newer"),
    pytest.param(b'{"format": "minidl-checkpoint", "version": 1, "root": ["int", ' + b"9" * 5000 + b"]}",
                 "not valid JSON", marks=pytest.mark.skipif(not hasattr(sys, "get_int_max_str_digits"),
                                                            reason="Python without the int digits limit")),
    (b'{"format": "minidl-checkpoint", "version": 1, "root": ' + b'["list", [' * 100000 + b'["none"]'
     + b"]]" * 100000 + b"}", "nested too deeply"),
])
def test_a_manifest_that_is_not_a_checkpoint_manifest_is_refused(tmp_path, raw, match):
    refused(manifest_file(tmp_path, raw=raw), match)


@pytest.mark.parametrize("root, match", [
    (5, "malformed entry"),
    ([], "malformed entry"),
    ([["int", 1]], "malformed entry"),
    (["bogus", 1], "unknown manifest entry 'bogus'"),
    (["none", 1], "with 1 values instead of 0"),
    (["int"], "with 0 values instead of 1"),
    (["int", "3"], "'int' entry holding a str"),
    (["int", 1.5], "'int' entry holding a float"),
    (["bool", 1], "'bool' entry holding a int"),
    (["str", None], "'str' entry holding a NoneType"),
    (["list", "abc"], "items are not a list"),
    (["dict", 5], "items are not a list"),
    (["list", [1, 2]], "malformed entry"),
    (["dict", [[["str", "k"]]]], "not a \\[key, value\\] pair"),
    (["dict", [[["list", []], ["none"]]]], "dict key that is not"),
    (["dict", [[[["str"]], ["none"]]]], "dict key that is not"),
    (["dict", [[["str", "k"], ["none"]], [["str", "k"], ["int", 1]]]], "key 'k' twice"),
    (["dict", [[["int", 1], ["none"]], [["bool", True], ["none"]]]], "key True twice"),
    (["array", "a7"], "inconsistent with its arrays: it refers to 'a7'"),
    (["array", 0], "does not name an array member"),
    (["array", "__minidl__"], "does not name an array member"),
    (["list", [["array", "a0"], ["array", "a0"]]], "refers to the array 'a0' twice"),
    (["scalar", "a0"], r"scalar entry whose array 'a0' has shape \(3,\)"),
    (nested(ckpt.MAX_DEPTH + 1), "nested more than 100 levels deep"),
])
def test_a_malformed_manifest_node_is_refused(tmp_path, root, match):
    refused(manifest_file(tmp_path, root), match)


def test_a_manifest_that_is_not_bytes_is_refused(tmp_path):
    buf = io.BytesIO()
    np.save(buf, np.zeros(4))
    path = write_npz(tmp_path / "floats.npz", [("__minidl__.npy", buf.getvalue())])
    refused(path, r"manifest is not a byte string \(dtype float64")


def test_a_manifest_too_large_is_refused_before_it_is_read(tmp_path, monkeypatch):
    md.save({"notes": "x" * 2000}, tmp_path / "big")
    monkeypatch.setattr(ckpt, "MAX_MANIFEST_BYTES", 1000)
    refused(tmp_path / "big", r"manifest is 20\d\d bytes, more than the 1000")


def test_nesting_up_to_max_depth_is_described_and_deeper_or_cyclic_is_pickled(tmp_path):
    obj = None
    for _ in range(ckpt.MAX_DEPTH):
        obj = [obj]
    md.save(obj, tmp_path / "deep")
    assert md.load(tmp_path / "deep") == obj
    md.save({"x": obj}, tmp_path / "deeper")       # as torch.save: pickled (lists need no global)
    assert md.load(tmp_path / "deeper") == {"x": obj}
    cycle = []
    cycle.append(cycle)
    md.save(cycle, tmp_path / "cycle")
    back = md.load(tmp_path / "cycle")
    assert back[0] is back
    assert sorted(os.listdir(tmp_path)) == ["cycle", "deep", "deeper"]


# temporaries of saves ----------------------------------------------------------------------
def temporaries_in(directory):
    return sorted(n for n in os.listdir(directory) if n.endswith(".tmp"))


def child(code, *args, **kw):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen([sys.executable, "-c", code, *map(str, args)], cwd=ROOT, env=env, text=True, **kw)


SAVE_FOREVER = """
import sys
import numpy as np
import minidl as md
big = np.ones(4 << 20)          # 32 MiB: each save takes a while to write
while True:
    md.save({"w": big}, sys.argv[1])
"""

SAVE_AND_WAIT = """
import sys
import numpy as np
import minidl as md
real_savez = np.savez
def savez_then_wait(f, *args, **kwargs):
    real_savez(f, *args, **kwargs)
    print("writing", flush=True)
    sys.stdin.readline()         # the save stays in progress until the test says go
np.savez = savez_then_wait
md.save({"who": "child"}, sys.argv[1])
print("saved", flush=True)
"""


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_a_save_killed_mid_write_leaves_the_old_checkpoint_and_the_next_save_removes_its_leftover(tmp_path):
    path = tmp_path / "run.ckpt"
    md.save({"w": np.arange(3.0)}, path)
    for _ in range(3):      # the kill lands mid-write unless that write ended in the same instant: retry then
        proc = child(SAVE_FOREVER, path)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and proc.poll() is None:
                sizes = []
                for name in temporaries_in(tmp_path):
                    try:
                        sizes.append(os.stat(tmp_path / name).st_size)
                    except FileNotFoundError:
                        pass
                if any(s > MIB for s in sizes):
                    break
                time.sleep(0.001)
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.kill()
            proc.wait()
        if temporaries_in(tmp_path):
            break
    leftovers = temporaries_in(tmp_path)
    assert len(leftovers) == 1 and leftovers[0].startswith(".run.ckpt.minidl-")
    old = md.load(path)["w"]                # the old checkpoint, or one the child completed: never a mix
    assert old.shape in ((3,), (4 << 20,))

    md.save({"w": np.arange(4.0)}, path)
    assert os.listdir(tmp_path) == ["run.ckpt"]
    np.testing.assert_array_equal(md.load(path)["w"], np.arange(4.0))


@pytest.mark.skipif(temporaries.fcntl is None, reason="needs flock")
def test_a_save_in_progress_in_another_process_keeps_its_temporary(tmp_path):
    path = tmp_path / "shared.ckpt"
    proc = child(SAVE_AND_WAIT, path, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == "writing\n"
        (theirs,) = temporaries_in(tmp_path)
        md.save({"who": "parent"}, path)
        assert temporaries_in(tmp_path) == [theirs]
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert proc.stdout.readline() == "saved\n" and proc.wait(timeout=60) == 0
    finally:
        proc.kill()
        proc.wait()
    assert os.listdir(tmp_path) == ["shared.ckpt"] and md.load(path) == {"who": "child"}


@pytest.mark.skipif(temporaries.fcntl is None, reason="needs flock")
def test_a_save_in_progress_in_another_thread_keeps_its_temporary(tmp_path, monkeypatch):
    path = tmp_path / "t.ckpt"
    writing, go, errors = threading.Event(), threading.Event(), []
    real_savez = np.savez

    def savez(f, *args, **kwargs):
        real_savez(f, *args, **kwargs)
        if threading.current_thread() is worker:
            writing.set()
            go.wait(30)

    def save_in_worker():
        try:
            md.save({"who": "worker"}, path)
        except BaseException as exc:
            errors.append(exc)

    monkeypatch.setattr(np, "savez", savez)
    worker = threading.Thread(target=save_in_worker)
    worker.start()
    try:
        assert writing.wait(30)
        (theirs,) = temporaries_in(tmp_path)
        md.save({"who": "main"}, path)
        assert temporaries_in(tmp_path) == [theirs]
    finally:
        go.set()
        worker.join(30)
    assert not errors and os.listdir(tmp_path) == ["t.ckpt"] and md.load(path) == {"who": "worker"}


@pytest.mark.skipif(temporaries.fcntl is None, reason="needs flock")
def test_a_save_removes_only_abandoned_temporaries_of_its_own_target(tmp_path):
    abandoned = [".ckpt.minidl-k3j4h5g6.tmp", ".ckpt.minidl-x.tmp"]
    others = [".other.minidl-k3j4h5g6.tmp",     # another checkpoint's
              ".ckpt.k3j4h5g6.tmp",              # not this pattern
              "ckpt.minidl-k3j4h5g6.tmp", ".ckpt.minidl-a.b.tmp", ".ckpt.minidl-k3j4h5g6.tmp.keep", "notes.tmp"]
    for name in abandoned + others:
        (tmp_path / name).write_bytes(b"partial")
    (tmp_path / ".ckpt.minidl-dir.tmp").mkdir()
    (tmp_path / "target").write_bytes(b"precious")
    os.symlink(tmp_path / "target", tmp_path / ".ckpt.minidl-link.tmp")
    md.save({"v": 1}, tmp_path / "ckpt")
    left = set(os.listdir(tmp_path))
    assert not left & set(abandoned)
    assert left == set(others) | {"ckpt", ".ckpt.minidl-dir.tmp", "target", ".ckpt.minidl-link.tmp"}
    assert (tmp_path / "target").read_bytes() == b"precious"


@pytest.mark.skipif(temporaries.fcntl is None, reason="needs flock")
def test_a_temporary_removed_before_its_writer_locked_it_is_replaced(tmp_path, monkeypatch):
    real_mkstemp, made = tempfile.mkstemp, []

    def mkstemp_then_lose_it(*args, **kwargs):
        fd, name = real_mkstemp(*args, **kwargs)
        made.append(name)
        if len(made) == 1:
            os.unlink(name)     # what a concurrent save's cleanup may do before the writer holds the lock
        return fd, name
    monkeypatch.setattr(tempfile, "mkstemp", mkstemp_then_lose_it)
    md.save({"v": 2}, tmp_path / "ckpt")
    assert len(made) == 2 and os.listdir(tmp_path) == ["ckpt"] and md.load(tmp_path / "ckpt") == {"v": 2}


def test_without_flock_saves_work_and_leave_other_temporaries_alone(tmp_path, monkeypatch):
    monkeypatch.setattr(temporaries, "fcntl", None)
    (tmp_path / ".ckpt.minidl-k3j4h5g6.tmp").write_bytes(b"unknown owner")
    md.save({"v": 3}, tmp_path / "ckpt")
    assert sorted(os.listdir(tmp_path)) == [".ckpt.minidl-k3j4h5g6.tmp", "ckpt"]
    assert md.load(tmp_path / "ckpt") == {"v": 3}


# failed saves ------------------------------------------------------------------------------
class FailingDisk(io.FileIO):
    """A file on which writing past ``budget`` bytes raises ``exc``."""
    budget, exc = 3000, OSError(errno.ENOSPC, "No space left on device")

    def write(self, data):
        if self.tell() + len(data) > self.budget:
            raise self.exc
        return super().write(data)


@pytest.mark.parametrize("exc", [OSError(errno.ENOSPC, "No space left on device"), KeyboardInterrupt()])
def test_a_save_failing_mid_write_keeps_the_previous_checkpoint(tmp_path, monkeypatch, exc):
    path = tmp_path / "ckpt"
    md.save({"epoch": 1, "w": np.arange(5.0)}, path)
    before = path.read_bytes()
    monkeypatch.setattr(FailingDisk, "exc", exc)
    monkeypatch.setattr(os, "fdopen", lambda fd, mode: FailingDisk(fd, mode))
    with pytest.raises(type(exc)):
        md.save({"epoch": 2, "w": np.arange(10000.0)}, path)
    monkeypatch.undo()
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["ckpt"]
    assert md.load(path)["epoch"] == 1


def test_a_save_whose_fsync_fails_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "ckpt"
    md.save({"epoch": 1}, path)

    def failing_fsync(fd):
        raise OSError(errno.EIO, "Input/output error")
    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="Input/output"):
        md.save({"epoch": 2}, path)
    monkeypatch.undo()
    assert os.listdir(tmp_path) == ["ckpt"] and md.load(path) == {"epoch": 1}
