"""Streaming (non-temporal) row stores for kernels whose output is too big to stay in cache.

A plain store to memory that is not in cache first *reads* the line (read-for-ownership),
so writing an (N, D) output costs two transfers per line, and a kernel that reads x and
writes y moves three arrays' worth of bytes, not two. A non-temporal store (``vmovntps``)
writes the whole line straight to memory without reading it: for a norm's forward (read x,
write y) that is a third less traffic, for its backward (read dy and x, write dx) a quarter.
The price: the output is not left in cache, so this only pays for outputs larger than the
caches keep for the next op (``stream_threshold`` says where that starts).

Numba has no way to ask for such stores, so ``stream_row`` is an ``@intrinsic`` that emits
LLVM IR directly: scalar stores up to the first 64-byte boundary of the destination row,
then 64-byte vector stores marked ``!nontemporal`` (the x86 backend turns them into
``vmovntps``/``vmovntpd``; they need the 64-byte alignment, hence the head), then scalar
stores for the tail. Kernels compute a row into a small scratch row (in L1) and stream it.
Non-temporal stores are weakly ordered, so every thread calls ``store_fence`` (``sfence``)
after its last one, before the kernel returns and anyone reads the output.

``prefetch_row`` asks for a row a few iterations ahead of need (``llvm.prefetch``, one per
64-byte line). A norm kernel reads a row from memory, then computes on it in L1 for a while:
the hardware prefetcher, which follows a stream only within a 4 KB page, has stopped by the
time the next row is wanted, so each row began with a wait for memory. Prefetching row i + 2
while row i is processed hides that wait (docs/performance.md).

Off x86 (and with NUMBA_DISABLE_JIT=1) these are plain equivalents (the prefetch a no-op).
"""
import os
import platform

import numba
from numba import njit, types

SYSFS_CACHES = "/sys/devices/system/cpu/cpu0/cache"


def last_level_cache_bytes(root=SYSFS_CACHES):
    """The size in bytes of the CPU's largest data (or unified) cache, as Linux's sysfs lists
    cpu0's caches under ``root`` (``index*/level``, ``type``, ``size`` such as "32768K"), or
    None where that cannot be read (another OS, a container that hides it)."""
    best = None
    try:
        entries = sorted(os.listdir(root))
    except OSError:
        return None
    for name in entries:
        if not name.startswith("index"):
            continue
        try:
            with open(os.path.join(root, name, "type")) as f:
                kind = f.read().strip()
            with open(os.path.join(root, name, "level")) as f:
                level = int(f.read())
            with open(os.path.join(root, name, "size")) as f:
                size = f.read().strip()
        except (OSError, ValueError):
            continue
        if kind == "Instruction":
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(size[-1:].upper(), 1)
        digits = size[:-1] if scale > 1 else size
        if not digits.isdigit():
            continue
        if best is None or level > best[0]:
            best = (level, int(digits) * scale)
    return None if best is None else best[1]


def stream_threshold(llc_bytes):
    """The output size from which streaming stores pay, for a last-level cache of ``llc_bytes``
    (None: unknown). A plain store leaves the output in cache for the next op, which reads it;
    a streamed one saves the read-for-ownership but sends the output to memory. Where the last
    level holds little, only the two L2s' worth stays cached, and streaming pays from 4 MB: on
    a 2-core VM with a 48 MB L3 shared with other tenants, 8 MB outputs of GroupNorm,
    InstanceNorm, BatchNorm2d and LayerNorm ran 8-11% faster streamed, and 4 MB was the best
    threshold on a Zen 4 VM (32 MB L3). On a Xeon VM with a 480 MB L3, plain stores won up to
    12 MB in every measurement, while at 24 MB they won or lost by a quarter with how much of
    the shared L3 the other tenants left (docs/performance.md). A thirty-second of the last
    level, and never under 4 MB, agrees with all three."""
    return max(MIN_STREAM_BYTES, (llc_bytes or 0) // 32)


MIN_STREAM_BYTES = 4 << 20    # past both L2s together on a 2-core machine
# Outputs at least this big are streamed (see stream_threshold)
STREAM_MIN_BYTES = stream_threshold(last_level_cache_bytes())
STREAM_ROW_MIN_BYTES = 256    # rows shorter than this are not worth a scratch row and a fence
PREFETCH_AHEAD = 2            # rows: prefetch row i + 2 while working on row i (1, 2, 4 measured alike)


def should_stream(array):
    """Stream a 2-D output that kernels write row by row? When it is big and its rows are not short."""
    return array.nbytes >= STREAM_MIN_BYTES and array.shape[-1] * array.itemsize >= STREAM_ROW_MIN_BYTES


if numba.config.DISABLE_JIT or platform.machine().lower() not in ("x86_64", "amd64"):
    @njit(error_model="numpy", cache=True)
    def stream_row(dst, i, src, si):
        """dst[i, :] = src[si, :]"""
        for k in range(dst.shape[1]):
            dst[i, k] = src[si, k]

    @njit(error_model="numpy", cache=True)
    def store_fence():
        pass

    @njit(error_model="numpy", cache=True)
    def prefetch_row(a, i):
        """(a hint; nothing here)"""

else:
    from llvmlite import ir
    from numba.extending import intrinsic

    def _loop(builder, start, stop, body):
        """for (k = start; k < stop; k++) body(k), as LLVM IR."""
        i64 = ir.IntType(64)
        fn = builder.function
        pre = builder.block
        head, loop_body, done = fn.append_basic_block(), fn.append_basic_block(), fn.append_basic_block()
        builder.branch(head)
        builder.position_at_end(head)
        k = builder.phi(i64)
        k.add_incoming(start, pre)
        builder.cbranch(builder.icmp_unsigned("<", k, stop), loop_body, done)
        builder.position_at_end(loop_body)
        body(k)
        k.add_incoming(builder.add(k, ir.Constant(i64, 1)), builder.block)
        builder.branch(head)
        builder.position_at_end(done)

    @intrinsic
    def stream_row(typingctx, dst, i, src, si):
        """dst[i, :] = src[si, :] with non-temporal stores; both C-contiguous 2-D arrays of the
        same dtype, src with at least dst.shape[1] columns."""
        if not (isinstance(dst, types.Array) and isinstance(src, types.Array) and dst.dtype == src.dtype
                and dst.ndim == 2 and src.ndim == 2 and dst.layout == "C" and src.layout == "C"):
            return None
        sig = types.void(dst, i, src, si)

        def codegen(context, builder, signature, args):
            dst_ty, i_ty, src_ty, si_ty = signature.args
            i64 = ir.IntType(64)
            dst_a = context.make_array(dst_ty)(context, builder, args[0])
            src_a = context.make_array(src_ty)(context, builder, args[2])
            n = builder.extract_value(dst_a.shape, 1)
            src_n = builder.extract_value(src_a.shape, 1)
            row = context.cast(builder, args[1], i_ty, types.int64)
            srow = context.cast(builder, args[3], si_ty, types.int64)
            out = builder.gep(dst_a.data, [builder.mul(row, n)])
            inp = builder.gep(src_a.data, [builder.mul(srow, src_n)])
            elt = context.get_data_type(dst_ty.dtype)
            size = context.get_abi_sizeof(elt)
            width = 64 // size
            vec = ir.VectorType(elt, width)
            c = lambda v: ir.Constant(i64, v)  # noqa: E731

            # head: elements before the first 64-byte boundary of the output row
            misaligned = builder.and_(builder.ptrtoint(out, i64), c(63))
            head = builder.udiv(builder.and_(builder.sub(c(64), misaligned), c(63)), c(size))
            head = builder.select(builder.icmp_unsigned("<", head, n), head, n)
            nvec = builder.udiv(builder.sub(n, head), c(width))
            tail = builder.add(head, builder.mul(nvec, c(width)))
            nontemporal = builder.module.add_metadata([ir.Constant(ir.IntType(32), 1)])

            def scalar(k):
                builder.store(builder.load(builder.gep(inp, [k])), builder.gep(out, [k]))

            def vector(k):
                off = builder.add(head, builder.mul(k, c(width)))
                v = builder.load(builder.bitcast(builder.gep(inp, [off]), vec.as_pointer()), align=size)
                st = builder.store(v, builder.bitcast(builder.gep(out, [off]), vec.as_pointer()), align=64)
                st.set_metadata("nontemporal", nontemporal)

            _loop(builder, c(0), head, scalar)
            _loop(builder, c(0), nvec, vector)
            _loop(builder, tail, n, scalar)
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def store_fence(typingctx):
        """sfence: make this thread's non-temporal stores visible before anything after it."""
        sig = types.void()

        def codegen(context, builder, signature, args):
            fn = builder.module.declare_intrinsic("llvm.x86.sse.sfence", fnty=ir.FunctionType(ir.VoidType(), []))
            builder.call(fn, [])
            return context.get_dummy_value()

        return sig, codegen


    @intrinsic
    def prefetch_row(typingctx, a, i):
        """Prefetch row i of the C-contiguous 2-D array a into the cache, one hint per 64-byte line
        (llvm.prefetch: read, high locality, data cache). A hint: no effect on results."""
        if not (isinstance(a, types.Array) and a.ndim == 2 and a.layout == "C"):
            return None
        sig = types.void(a, i)

        def codegen(context, builder, signature, args):
            a_ty, i_ty = signature.args
            i64, i32, i8p = ir.IntType(64), ir.IntType(32), ir.IntType(8).as_pointer()
            arr = context.make_array(a_ty)(context, builder, args[0])
            n = builder.extract_value(arr.shape, 1)
            row = context.cast(builder, args[1], i_ty, types.int64)
            start = builder.bitcast(builder.gep(arr.data, [builder.mul(row, n)]), i8p)
            nbytes = builder.mul(n, ir.Constant(i64, context.get_abi_sizeof(context.get_data_type(a_ty.dtype))))
            hint = builder.module.declare_intrinsic("llvm.prefetch", fnty=ir.FunctionType(ir.VoidType(),
                                                                                          [i8p, i32, i32, i32]))
            nlines = builder.udiv(builder.add(nbytes, ir.Constant(i64, 63)), ir.Constant(i64, 64))

            def line(k):
                address = builder.gep(start, [builder.mul(k, ir.Constant(i64, 64))])
                builder.call(hint, [address, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])

            _loop(builder, ir.Constant(i64, 0), nlines, line)
            return context.get_dummy_value()

        return sig, codegen
