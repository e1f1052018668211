"""Streaming (non-temporal) row stores for kernels whose output is too big to stay in cache.

A plain store to memory that is not in cache first *reads* the line (read-for-ownership),
so writing an (N, D) output costs two transfers per line, and a kernel that reads x and
writes y moves three arrays' worth of bytes, not two. A non-temporal store (``vmovntps``)
writes the whole line straight to memory without reading it: for a norm's forward (read x,
write y) that is a third less traffic, for its backward (read dy and x, write dx) a quarter.
The price: the output is not left in cache, so this only pays for outputs much larger than
the cache, where it would have been evicted anyway.

Numba has no way to ask for such stores, so ``stream_row`` is an ``@intrinsic`` that emits
LLVM IR directly: scalar stores up to the first 64-byte boundary of the destination row,
then 64-byte vector stores marked ``!nontemporal`` (the x86 backend turns them into
``vmovntps``/``vmovntpd``; they need the 64-byte alignment, hence the head), then scalar
stores for the tail. Kernels compute a row into a small scratch row (in L1) and stream it.
Non-temporal stores are weakly ordered, so every thread calls ``store_fence`` (``sfence``)
after its last one, before the kernel returns and anyone reads the output.

Off x86 (and with NUMBA_DISABLE_JIT=1) both are plain equivalents.
"""
import platform

import numba
from numba import njit, types

STREAM_MIN_BYTES = 16 << 20   # outputs at least this big are streamed (a third of a 48 MB L3)


def should_stream(array):
    return array.nbytes >= STREAM_MIN_BYTES


if numba.config.DISABLE_JIT or platform.machine().lower() not in ("x86_64", "amd64"):
    @njit(error_model="numpy", cache=True)
    def stream_row(dst, i, src, si):
        """dst[i, :] = src[si, :]"""
        for k in range(dst.shape[1]):
            dst[i, k] = src[si, k]

    @njit(error_model="numpy", cache=True)
    def store_fence():
        pass

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
