"""``md.cuda``'s memory functions, as torch.cuda.memory: how many bytes minidl's tensors hold
on the GPU now and at most, the allocator's statistics and summary, and the device's free and
total memory.

The counts come from ``allocator`` (every device buffer minidl makes, taken off when it is
garbage; see its docstring): minidl keeps no cache of freed blocks, so ``memory_reserved``
equals ``memory_allocated``, and ``empty_cache`` hands numba's queue of pending frees to the
driver. Without a device the readings are PyTorch's: 0, an empty dict; what needs the device
raises its no-driver RuntimeError.
"""
import warnings

from . import _device, allocator


def _stats_index(device):
    """The index ``device`` names (None: the current one), or None when there is no device."""
    if not _device.is_available():
        return None
    return _device.checked_index(device, "memory_stats")


def memory_stats(device=None):
    """PyTorch's flat statistics dict ("allocated_bytes.all.current", "allocation.all.peak",
    "num_ooms"...), keys sorted; {} without a device. Only the current device has allocations
    (minidl runs on one GPU per process): another one reads zeros."""
    idx = _stats_index(device)
    if idx is None:
        return {}
    stats = allocator.stats()
    if idx != _device.current_device():
        stats = {k: (-1 if k == "max_split_size" else 0) for k in stats}
    return stats


def memory_stats_as_nested_dict(device=None):
    """memory_stats split at its dots: ``{"allocated_bytes": {"all": {"current": ...}}}``."""
    out = {}
    for key, value in memory_stats(device).items():
        node = out
        *path, last = key.split(".")
        for part in path:
            node = node.setdefault(part, {})
        node[last] = value
    return out


def _stat(key, device):
    return memory_stats(device).get(key, 0)


def memory_allocated(device=None):
    """Bytes held by live minidl tensors on the device now (views count once, with their base)."""
    return _stat("allocated_bytes.all.current", device)


def max_memory_allocated(device=None):
    """The most bytes held at once since the start or the last ``reset_peak_memory_stats``."""
    return _stat("allocated_bytes.all.peak", device)


def memory_reserved(device=None):
    """Bytes the allocator holds: memory_allocated's, minidl keeping no cache of freed blocks."""
    return _stat("reserved_bytes.all.current", device)


def max_memory_reserved(device=None):
    return _stat("reserved_bytes.all.peak", device)


def memory_cached(device=None):
    """Deprecated spelling of ``memory_reserved``."""
    warnings.warn("minidl.cuda.memory_cached has been renamed to minidl.cuda.memory_reserved",
                  FutureWarning, stacklevel=2)
    return memory_reserved(device)


def max_memory_cached(device=None):
    """Deprecated spelling of ``max_memory_reserved``."""
    warnings.warn("minidl.cuda.max_memory_cached has been renamed to minidl.cuda.max_memory_reserved",
                  FutureWarning, stacklevel=2)
    return max_memory_reserved(device)


def reset_peak_memory_stats(device=None):
    """Start the "peak" statistics again from the current values."""
    _device.checked_index(device, "reset_peak_memory_stats")
    allocator.reset_peak()


def reset_max_memory_allocated(device=None):
    """Deprecated: resets every peak statistic (``reset_peak_memory_stats``), as in PyTorch."""
    warnings.warn("minidl.cuda.reset_max_memory_allocated now calls minidl.cuda.reset_peak_memory_stats, which "
                  "resets /all/ peak memory stats.", FutureWarning, stacklevel=2)
    reset_peak_memory_stats(device)


def reset_max_memory_cached(device=None):
    """Deprecated: resets every peak statistic (``reset_peak_memory_stats``), as in PyTorch."""
    warnings.warn("minidl.cuda.reset_max_memory_cached now calls minidl.cuda.reset_peak_memory_stats, which "
                  "resets /all/ peak memory stats.", FutureWarning, stacklevel=2)
    reset_peak_memory_stats(device)


def reset_accumulated_memory_stats(device=None):
    """Zero the running totals ("allocated" and "freed" statistics, num_ooms)."""
    _device.checked_index(device, "reset_accumulated_memory_stats")
    allocator.reset_accumulated()


def empty_cache():
    """Free now the device buffers numba has queued for freeing. numba batches the frees of
    dropped buffers (it frees them when the queue grows long or an allocation fails); this hands
    them to the driver at once, so ``mem_get_info`` sees the memory free. minidl keeps no cache
    of its own. Does nothing before the first GPU allocation, or without a device."""
    if not (_device.is_available() and allocator.ever_allocated()):
        return
    context = _device.numba_cuda().current_context()
    # numba queues device frees on its memory manager, and streams' and events' on the context;
    # the simulator has neither (it frees at once)
    for owner in (getattr(context, "memory_manager", None), context):
        deallocations = getattr(owner, "deallocations", None)
        if deallocations is not None:
            deallocations.clear()


def mem_get_info(device=None):
    """(free, total) bytes of the device's memory, from the driver (numba's
    ``current_context().get_memory_info()``). Under the simulator the device's memory is the
    host's RAM, and these are its numbers."""
    idx = _device.checked_index(device, "mem_get_info")
    if _device.simulated():
        return _device.host_memory()
    if idx != _device.current_device():
        raise RuntimeError(f"minidl.cuda.mem_get_info({idx}): minidl runs on one GPU per process, device "
                           f"{_device.current_device()}; it has no CUDA context on device {idx}")
    info = _device.numba_cuda().current_context().get_memory_info()
    return int(info.free), int(info.total)


def _format_size(sz, pref_sz):
    prefix = "B  "
    for new_prefix in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        if pref_sz < 768 * 1024:
            break
        prefix, sz, pref_sz = new_prefix, sz // 1024, pref_sz / 1024
    return f"{sz:6d} {prefix}"


def _format_count(cnt, pref_cnt):
    prefix = " "
    for new_prefix in ("K", "M"):
        if pref_cnt < 750 * 1000:
            break
        prefix, cnt, pref_cnt = new_prefix, cnt // 1000, pref_cnt / 1000
    return f"{cnt:7d} {prefix} "


_SUMMARY_METRICS = [("allocated_bytes", "Allocated memory", _format_size),
                    ("active_bytes", "Active memory", _format_size),
                    ("requested_bytes", "Requested memory", _format_size),
                    ("reserved_bytes", "GPU reserved memory", _format_size),
                    ("inactive_split_bytes", "Non-releasable memory", _format_size),
                    ("allocation", "Allocations", _format_count),
                    ("active", "Active allocs", _format_count),
                    ("segment", "GPU reserved segments", _format_count),
                    ("inactive_split", "Non-releasable allocs", _format_count)]


def memory_summary(device=None, abbreviated=False):
    """PyTorch's table of the memory statistics (current, peak, total allocated and freed, per
    pool unless ``abbreviated``), as a string to print."""
    idx = _device.checked_index(device, "memory_summary")
    stats = memory_stats(idx)
    rule = "-" * 75
    lines = ["=" * 75, f" {'':16} minidl CUDA memory summary, device ID {idx:<18d} ", rule,
             f"  {'':9} CUDA OOMs: {stats['num_ooms']:<12d} | {'':6} cudaMalloc retries: "
             f"{stats['num_alloc_retries']:<8d}  ", "=" * 75,
             "        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  "]
    pools = [("all", None)] + ([] if abbreviated else [("large_pool", "      from large pool"),
                                                       ("small_pool", "      from small pool")])
    for key, name, fmt in _SUMMARY_METRICS:
        lines.append(rule)
        first = None
        for pool, label in pools:
            values = [stats[f"{key}.{pool}.{kind}"] for kind in ("current", "peak", "allocated", "freed")]
            first = values if first is None else first
            cells = " | ".join(fmt(v, p) for v, p in zip(values, first))
            lines.append(f" {label or name:<21} | {cells} ")
    for key, name in (("oversize_allocations", "Oversize allocations"), ("oversize_segments", "Oversize GPU segments")):
        values = [stats[f"{key}.{kind}"] for kind in ("current", "peak", "allocated", "freed")]
        lines += [rule, f" {name:<21} | " + " | ".join(_format_count(v, v) for v in values) + " "]
    lines.append("=" * 75)
    return "|" + "|\n|".join(lines) + "|\n"
