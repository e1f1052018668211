"""How DistributedDataParallel groups gradients into buckets, as PyTorch's
``_compute_bucket_assignment_by_size`` does when it rebuilds the buckets after the first
iteration.

Parameters are visited in the order backward produces their gradients, taken to be the reverse
registration order (the last layer first). Each (dtype, device) has an open bucket that takes
parameters until it holds at least its limit in bytes; with the default ``bucket_cap_mb`` the
first bucket closes at 1 MiB (PyTorch's ``_DEFAULT_FIRST_BUCKET_BYTES``), so the first
all-reduce starts early in backward, and the others at 25 MiB. PyTorch's first iteration uses a
single bucket and then rebuilds the buckets in the order its backward actually produced the
gradients; minidl uses the reverse registration order from the first iteration on.
"""
import numpy as np

FIRST_BUCKET_BYTES = 1024 * 1024


def assign(params, cap_bytes, first_bytes):
    """Lists of indices into ``params`` (one list per bucket, in launch order)."""
    open_buckets = {}       # (dtype, device) -> [indices, bytes, limit]
    closed = []
    for i in reversed(range(len(params))):
        p = params[i]
        key = (np.dtype(p._data.dtype).str, p.device.type)
        bucket = open_buckets.get(key)
        if bucket is None:
            first = not any(k == key for k, _ in closed)
            bucket = open_buckets[key] = [[], 0, min(first_bytes, cap_bytes) if first else cap_bytes]
        bucket[0].append(i)
        bucket[1] += int(p._data.size) * p._data.dtype.itemsize
        if bucket[1] >= bucket[2]:
            closed.append((key, bucket[0]))
            del open_buckets[key]
    closed.extend((key, b[0]) for key, b in open_buckets.items())
    # launch order: by the first parameter each bucket takes (highest index first)
    closed.sort(key=lambda kb: -kb[1][0])
    return [indices for _, indices in closed]
