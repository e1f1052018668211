"""Where streaming stores start: a thirty-second of the last-level cache, never under 4 MB, read from
Linux's description of cpu0's caches (``minidl.kernels.cpu._stream``)."""
import pytest

from minidl.kernels.cpu import _stream


def _cache(root, index, level, kind, size):
    d = root / f"index{index}"
    d.mkdir(parents=True)
    (d / "level").write_text(f"{level}\n")
    (d / "type").write_text(f"{kind}\n")
    (d / "size").write_text(f"{size}\n")


@pytest.mark.parametrize("caches, expected", [
    # the largest level is read; instruction caches are not
    ([(1, "Data", "48K"), (1, "Instruction", "32K"), (2, "Unified", "2048K"), (3, "Unified", "491520K")],
     491520 << 10),
    ([(2, "Unified", "1M"), (3, "Unified", "33554432")], 32 << 20),           # sizes in megabytes and bytes
    ([(2, "Unified", "1024K"), (3, "Instruction", "64M")], 1 << 20),          # an instruction cache at the top
])
def test_the_last_level_data_cache_is_read(tmp_path, caches, expected):
    for index, (level, kind, size) in enumerate(caches):
        _cache(tmp_path, index, level, kind, size)
    assert _stream.last_level_cache_bytes(str(tmp_path)) == expected


def test_unreadable_or_malformed_entries_are_skipped(tmp_path):
    _cache(tmp_path, 0, 2, "Unified", "1024K")
    _cache(tmp_path, 1, 3, "Unified", "lots")
    (tmp_path / "index2").mkdir()                   # no files in it
    (tmp_path / "uevent").write_text("")            # not a cache
    assert _stream.last_level_cache_bytes(str(tmp_path)) == 1 << 20


@pytest.mark.parametrize("contents", ["missing", "empty"])
def test_no_description_gives_none(tmp_path, contents):
    root = tmp_path / "cache"
    if contents == "empty":
        root.mkdir()
    assert _stream.last_level_cache_bytes(str(root)) is None


@pytest.mark.parametrize("llc, threshold", [
    (None, 4 << 20),            # unknown: past both L2s of a 2-core machine
    (8 << 20, 4 << 20),
    (32 << 20, 4 << 20),        # the Zen 4 VM: 4 MB measured best
    (48 << 20, 4 << 20),        # 8 MB outputs streamed, as measured there
    (256 << 20, 8 << 20),
    (480 << 20, 15 << 20),      # the 480 MB Xeon: plain stores up to 12 MB, streamed from 24 MB
])
def test_the_threshold_is_a_thirty_second_of_the_last_level_and_at_least_4_mb(llc, threshold):
    assert _stream.stream_threshold(llc) == threshold


def test_the_module_threshold_is_this_machines():
    assert _stream.STREAM_MIN_BYTES == _stream.stream_threshold(_stream.last_level_cache_bytes())
