"""Process tuning: how minidl sets up the process it runs in, for speed, in one place.

``tune_process()`` is the entry point; ``import minidl`` calls it once. It

- keeps freed array buffers in the process for the next step (``host_memory``: glibc's mmap and
  trim thresholds; MINIDL_KEEP_FREED_MEMORY=0 leaves malloc alone);
- starts NumPy's array buffers on 64-byte cache lines, as PyTorch's tensors start
  (``aligned_arrays``: NumPy's allocation handler; MINIDL_ALIGNED_ARRAYS=0 keeps NumPy's own);
- lets OpenBLAS's idle workers sleep at once after a matrix product, so that they leave the
  cores to Numba's kernels (``blas_threads``; MINIDL_BLAS_SPIN=default keeps OpenBLAS's spin).

Two more pieces belong to the same tuning but act at a given moment:

- Numba's thread pool starts with short spinning when the CPU kernels are first imported
  (``thread_pool.start``, called by ``minidl.kernels.cpu``: libgomp reads its spin count once,
  when it is loaded);
- whether the layer kernels run in parallel follows from the BLAS tuning (``layer_threads``;
  MINIDL_LAYER_PARALLEL=1 or 0 forces it).

Big convolutions run their image blocks on a pool of Python threads, each with the serial
kernels, BLAS held at one thread meanwhile (``block_workers``, ``blas_threads.single_threaded``).

Each piece leaves alone what the user set through the library's own variables (see each module).
"""
from . import aligned_arrays, blas_threads, host_memory, layer_threads, thread_pool  # noqa: F401


def tune_process():
    """Apply the process-wide tuning above; returns which pieces took effect."""
    return {"keep_freed_memory": host_memory.keep_freed_memory(),
            "aligned_arrays": aligned_arrays.install(),
            "short_blas_spin": blas_threads.shorten_blas_spin()}
