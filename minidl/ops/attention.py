"""Scaled dot-product attention as one Function: softmax(q k^T * scale + mask) v.

Shapes (PyTorch's): q (..., L, E), k (..., S, E), v (..., S, Ev) -> out (..., L, Ev); the
leading (batch) dims broadcast. Masks broadcast to (..., L, S):
- a bool ``attn_mask``: True means "may attend" (False positions get -inf scores);
- a float ``attn_mask``: added to the scores (it gets a gradient, dS, if it requires one);
- ``is_causal``: query i attends to keys j <= i (top-left aligned, as PyTorch's tril).
  Unlike PyTorch, ``is_causal`` may be combined with ``attn_mask`` (both apply).

Forward (row-wise over the last dim)::

    S  = scale * q k^T + bias          (bias: float mask, -inf where masked)
    P  = softmax(S) = exp(S - m) / sum_j exp(S_j - m),  m = rowmax(S)
    Pd = P * D                          (D: dropout multiplier, 0 or 1/(1-p); D = 1 without)
    O  = Pd v

Backward, with G = dL/dO::

    dv  = Pd^T G
    dPd = G v^T,   dP = dPd * D
    dS  = P * (dP - rowsum(dP * P))     (softmax Jacobian: dP_i/dS_j = P_i (delta_ij - P_j),
                                         so dS_j = sum_i dP_i P_i (delta_ij - P_j)
                                                 = P_j (dP_j - sum_i dP_i P_i))
    dq  = scale * dS k,   dk = scale * dS^T q,   dbias = dS (summed over broadcast dims)

Fully masked rows (every key masked for some query) would be 0/0 = NaN in the textbook
formula (PyTorch's math path returns NaN there). Here the row max is taken as 0 when it
is -inf, the row sum as 1 when it is 0, so such a row has P = 0: its output is 0 and it
passes zero gradient to q, k, v and the mask. Training with, say, a padded query row
that sees only padding therefore stays finite; pool or mask those rows out of the loss.

Three implementations of the same math:
- "reference": the NumPy code below (BLAS batched matmuls, materialises P; saves P for backward);
- "fused-softmax": the reference's matmuls, with the masking and softmax (forward) and the
  softmax Jacobian (backward) each done in one Numba pass over the scores
  (``minidl.kernels.cpu.softmax``) instead of NumPy's six; without masks, each (batch, head)
  pair's products and softmax run back to back in one parallel region
  (``minidl.kernels.cpu.attention_heads``);
- "numba": the fused row kernel ``minidl.kernels.cpu.attention`` (saves only the row
  log-sum-exp and recomputes P in backward: no (L, S) matrix at all).
``set_implementation("auto" | "numba" | "fused-softmax" | "reference")`` (the "attention" family of
minidl.kernels.switch; or the environment variable MINIDL_ATTENTION_IMPL) picks one; "auto" uses the
row kernel where it pays (see ``_kernel_pays``) and "fused-softmax" elsewhere. The kernels are the
CPU's (float32 / float64); on other devices and dtypes the reference runs. The choice is made once
per node, in forward (``_select``), and backward follows it. Dropout draws its mask from
minidl.random's generator before the choice, so both give the same numbers for the same seed.
"""
import numpy as np

from .. import random
from ..autograd import op_function as _op_function
from ..autograd.op_function import Function
from ..backends import device_of, namespace_of
from ..kernels.switch import ATTENTION
from ..tensor.dtype import check_same_dtype
from ._broadcast import unbroadcast
from .heads import packed_like
from .low_precision import float32_compute, keep_low

IMPLEMENTATIONS = ATTENTION.choices
set_implementation, get_implementation, implementation = ATTENTION.set, ATTENTION.get, ATTENTION.use


def _kernel_pays(L, S, E):
    """'auto': for small score matrices BLAS batched matmuls + the fused softmax are as fast as the
    row kernel; for large ones the reference's (..., L, S) temporaries (P, dP, dS: 4 MiB per head
    at 1024 x 1024) cost more than the kernel's recomputation, which keeps only O(L) per head.
    The crossover (measured: docs/performance.md, benchmarks/bench_transformer.py)."""
    return L * S > _AUTO_MIN_SCORES


_AUTO_MIN_SCORES = 512 * 512


def _select(q, k, v, L, S):
    """The implementation for this node: "reference", "fused-softmax" or "numba" (the switch's
    rule: a kernel where the device and dtype have one, the reference elsewhere)."""
    impl = ATTENTION.current
    if impl == "reference" or type(q) is not np.ndarray or q.dtype not in (np.float32, np.float64):
        return "reference"
    if impl == "auto":
        impl = "numba" if _kernel_pays(L, S, q.shape[-1]) else "fused-softmax"
    if impl == "numba" and not q.shape[:-2] == k.shape[:-2] == v.shape[:-2]:
        return "reference"    # the row kernel takes no broadcast batch dims
    return impl


# ----------------------------------------------------------------------------- reference
def attention_forward_reference(q, k, v, bias, allow, scale, drop):
    """(out, P, Pd) as in the module docstring; ``allow`` is a bool array (True = attend)
    or None, ``bias`` a float array or None, ``drop`` the dropout multiplier or None.
    (scale is applied to q, the smaller operand; the rest works in place on the scores.)"""
    xp = namespace_of(q)
    s = _scores(q, k, bias, allow, scale)
    m = s.max(axis=-1, keepdims=True)
    m[~xp.isfinite(m)] = 0  # fully masked row: exp(-inf - 0) = 0 below, not NaN
    s -= m
    p = xp.exp(s, out=s)
    z = p.sum(axis=-1, keepdims=True)
    z[z == 0] = 1
    p /= z
    pd = p if drop is None else p * drop
    return xp.matmul(pd, v), p, pd


def _scores(q, k, bias, allow, scale):
    """scale * q k^T + bias, -inf where not allowed, broadcast to the masks' batch dims."""
    xp = namespace_of(q)
    s = xp.matmul(q * q.dtype.type(scale) if scale != 1 else q, xp.swapaxes(k, -1, -2))
    full = xp.broadcast_shapes(s.shape, *(m.shape for m in (bias, allow) if m is not None))
    if full != s.shape:  # a mask with batch dims that q and k lack (v has them)
        s = xp.ascontiguousarray(xp.broadcast_to(s, full))
    if bias is not None:
        s += bias
    if allow is not None:
        xp.copyto(s, -xp.inf, where=~allow)
    return s


def softmax_backward_reference(dp, p):
    """dS = P * (dP - rowsum(dP * P)), in place in dp."""
    dp -= (dp * p).sum(axis=-1, keepdims=True)
    dp *= p
    return dp


def attention_backward_reference(q, k, v, p, pd, drop, scale, g, softmax_backward=softmax_backward_reference,
                                 out=None):
    """(dq, dk, dv, dS) for out = attention(q, k, v); dS is dL/d(scores), the bias grad.
    ``softmax_backward(dp, p)`` computes dS in place (the "fused-softmax" path passes its kernel);
    ``out``, optional, holds three arrays to write dq, dk, dv into."""
    xp = namespace_of(g)
    dq, dk, dv = (None, None, None) if out is None else out
    dv = _matmul(xp, xp.swapaxes(pd, -1, -2), g, dv)
    dp = xp.matmul(g, xp.swapaxes(v, -1, -2))
    if drop is not None:
        dp *= drop
    ds = softmax_backward(dp, p)
    dq = _matmul(xp, ds, k, dq)
    dk = _matmul(xp, xp.swapaxes(ds, -1, -2), q, dk)
    if scale != 1:
        dq *= scale
        dk *= scale
    return dq, dk, dv, ds


def _matmul(xp, a, b, out):
    return xp.matmul(a, b) if out is None else xp.matmul(a, b, out=out)


# ----------------------------------------------------------------------------- Function
@float32_compute   # float16/bfloat16 inputs: float32 products, one rounding (low_precision.py)
class ScaledDotProductAttention(Function):
    """out = softmax(scale * q k^T + bias, masked) (dropout) v; see the module docstring."""

    @staticmethod
    def forward(ctx, q, k, v, bias, allow, causal, scale, dropout_p):
        L, S = q.shape[-2], k.shape[-2]
        batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        drop = None
        if dropout_p > 0 and type(q) is not np.ndarray:   # another device draws its own mask
            from .. import backends
            drop = backends.get(device_of(q)).dropout_mask(batch + (L, S), dropout_p, q.dtype)
        elif dropout_p > 0:
            keep = random.generator().random(batch + (L, S)) >= dropout_p
            drop = keep.astype(q.dtype) * q.dtype.type(1.0 / (1.0 - dropout_p))
        ctx.scale, ctx.causal, ctx.masks = scale, causal, (bias, allow)
        ctx.bias_shape = None if bias is None else bias.shape
        ctx.no_scores = L == 0 or S == 0 or 0 in batch
        if ctx.no_scores:
            return _no_scores_forward(ctx, q, k, v, batch, L)
        ctx.impl = _select(q, k, v, L, S)
        if ctx.impl == "numba":
            return _kernel_forward(ctx, q, k, v, bias, allow, causal, scale, drop)
        if ctx.impl == "fused-softmax":
            from ..kernels.cpu.softmax import softmax_rows_
            # without a float mask the kernel applies the scale itself (no pass over q, dq, dk)
            ctx.scale_in_softmax = bias is None and scale > 0
            ctx.region = bias is None and allow is None and scale > 0 and heads_region_fits(q, k, v)
            if ctx.region:
                from ..kernels.cpu.attention_heads import attention_heads_forward
                out, p, pd = attention_heads_forward(q, k, v, causal, scale, drop)
                ctx.save_for_backward(q, k, v, p, pd, drop)
                keep_low(ctx, p, pd)
                return out
            ctx.shares = _shares(q, k, v, bias, allow, scale)
            if ctx.shares > 1:
                return _shared_forward(ctx, q, k, v, causal, scale, drop)
            if ctx.scale_in_softmax:
                p = softmax_rows_(_scores(q, k, None, allow, 1.0), causal, scale)
            else:
                p = softmax_rows_(_scores(q, k, bias, allow, scale), causal)
            pd = p if drop is None else p * drop
            ctx.save_for_backward(q, k, v, p, pd, drop)
            keep_low(ctx, p, pd)   # a GPU's attention under autocast keeps P in the low dtype
            return _heads_last_matmul(pd, v)
        if causal:
            if type(q) is not np.ndarray:   # another device: built there, j <= i, as np.tril
                xp = namespace_of(q)
                tril = xp.arange(S)[None, :] <= xp.arange(L)[:, None]
            else:
                tril = np.tril(np.ones((L, S), dtype=bool))
            allow = tril if allow is None else allow & tril
        out, p, pd = attention_forward_reference(q, k, v, bias, allow, scale, drop)
        ctx.save_for_backward(q, k, v, p, pd, drop)
        keep_low(ctx, p, pd)
        return out

    @staticmethod
    def backward(ctx, g):
        if ctx.no_scores:
            dq, dk, dv, ds = _no_scores_backward(ctx, g)
        elif ctx.impl == "numba":
            dq, dk, dv, ds = _kernel_backward(ctx, g)
        else:
            q, k, v, p, pd, drop = ctx.saved_tensors
            if ctx.impl == "fused-softmax":
                from ..kernels.cpu.softmax import softmax_backward_
                out = packed_like((q, k, v))   # q, k, v from split_heads: gradients packed alike
                if ctx.region:
                    from ..kernels.cpu.attention_heads import attention_heads_backward
                    (dq, dk, dv), ds = attention_heads_backward(q, k, v, p, pd, drop, g, ctx.scale, out), None
                elif ctx.shares > 1:
                    dq, dk, dv, ds = _shared_backward(ctx, q, k, v, p, pd, drop, g, out)
                elif ctx.scale_in_softmax:   # dS comes out scaled: dq = dS k, dk = dS^T q
                    dq, dk, dv, ds = attention_backward_reference(
                        q, k, v, p, pd, drop, 1.0, g, lambda dp, p: softmax_backward_(dp, p, ctx.scale), out)
                else:
                    dq, dk, dv, ds = attention_backward_reference(q, k, v, p, pd, drop, ctx.scale, g,
                                                                  softmax_backward_, out)
            else:
                dq, dk, dv, ds = attention_backward_reference(q, k, v, p, pd, drop, ctx.scale, g)
            dq, dk, dv = unbroadcast(dq, q.shape), unbroadcast(dk, k.shape), unbroadcast(dv, v.shape)
        dbias = None
        if ctx.needs_input_grad[3]:
            dbias = unbroadcast(ds, ctx.bias_shape)
        return dq, dk, dv, dbias, None, None, None, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        """The reference backward (module docstring) on Tensors, with P recomputed from q, k and the
        float mask by matmul and softmax; the bool and causal masks and the dropout multiplier are
        constants. A fully masked row keeps P = 0 (its scores are replaced before the softmax
        and its probabilities zeroed after)."""
        from ._higher_order import constant, keep_where, sum_to
        from .indexing import Where
        from .softmax import Softmax
        q, k, v, bias_t = inputs[:4]
        nq, nk, nv, nb = ctx.needs_input_grad[:4]
        if ctx.no_scores:
            xp = namespace_of(g._data)
            zeros = [constant(xp.zeros(s, dtype=g.dtype)) if n else None for s, n in zip(ctx.shapes, (nq, nk, nv))]
            db = constant(xp.zeros(ctx.bias_shape, dtype=g.dtype)) if nb else None
            return tuple(zeros) + (db, None, None, None, None)
        xp = namespace_of(q._data)
        bias, allow = ctx.masks
        L, S = q.shape[-2], k.shape[-2]
        scale = ctx.scale
        s = (q * scale if scale != 1 else q) @ k.transpose(-2, -1)
        if bias is not None:
            s = s + (bias_t if bias_t is not None else constant(bias))
        if ctx.causal:
            tril = xp.arange(S)[None, :] <= xp.arange(L)[:, None]
            allow = tril if allow is None else allow & tril
        if allow is not None:
            seen = allow.any(axis=-1, keepdims=True)      # False: a fully masked row
            s = Where.apply(allow | ~seen, s, -xp.inf)
            p = keep_where(seen, Softmax.apply(s, s.ndim - 1))
        else:
            p = Softmax.apply(s, s.ndim - 1)
        drop = _dropout_multiplier(ctx, q, k, v)
        pd = p if drop is None else p * constant(drop)
        dv = pd.transpose(-2, -1) @ g if nv else None
        dp = g @ v.transpose(-2, -1)
        if drop is not None:
            dp = dp * constant(drop)
        ds = p * (dp - (dp * p).sum(-1, keepdim=True))
        dq = sum_to((ds @ k) * scale, q.shape) if nq else None
        dk = sum_to((ds.transpose(-2, -1) @ q) * scale, k.shape) if nk else None
        return (dq, dk, None if dv is None else sum_to(dv, v.shape),
                sum_to(ds, ctx.bias_shape) if nb else None, None, None, None, None)


def _dropout_multiplier(ctx, q, k, v):
    """The forward's dropout multiplier D (batch + (L, S)), or None without dropout."""
    drop = ctx.saved_tensors[5]
    if ctx.impl != "numba":
        return drop
    if drop.size == 0:
        return None
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    return drop.reshape(batch + drop.shape[-2:])


# Shares of the batch on the block workers ------------------------------------------------------
# Each (batch, head) pair's products are small (GPT's: 64 x 32 by 32 x 64), so NumPy's batched
# matmul runs them one after another on one thread, and with them the whole op. Without masks
# the pairs are independent: the fused-softmax path then splits the leading batch axis into one
# contiguous share per thread (``minidl.runtime.block_workers``), each running its share's
# products (single-threaded BLAS) and softmax passes (the serial kernels, which release the GIL)
# end to end, in forward and in backward; docs/performance.md has the measurement. Where BLAS
# is callable from Numba (``heads_region_fits``), one parallel region of the kernels runs the
# pairs instead, with no Python thread between them; these shares are the path elsewhere.
SHARES_FROM = 1 << 18   # score elements; below, the hand-over to the workers costs more than it saves


def heads_region_fits(q, k, v):
    """Can the fused-softmax path run as the kernels' region over (batch, head) pairs
    (``minidl.kernels.cpu.attention_heads``)? Where it cannot (no BLAS callable from Numba, say),
    the shares below run it."""
    from ..kernels.cpu.attention_heads import fits
    return fits(q, k, v)


def _shares(q, k, v, bias, allow, scale):
    """How many shares of the leading batch axis run concurrently (1: all on the calling thread)."""
    if (bias is not None or allow is not None or not scale > 0 or q.ndim < 3
            or not q.shape[:-2] == k.shape[:-2] == v.shape[:-2] or q.shape[0] < 2):
        return 1
    import numba

    from ..kernels.cpu._threads import layer_parallel
    from ..runtime import block_workers
    scores = int(np.prod(q.shape[:-1])) * k.shape[-2]
    if (numba.get_num_threads() < 2 or not layer_parallel(scores) or scores < SHARES_FROM
            or block_workers.in_worker() or not block_workers.available()):
        return 1
    return min(q.shape[0], numba.get_num_threads())


def _run_shares(ctx, work):
    from ..runtime import block_workers
    return block_workers.run(lambda share: work(*share), block_workers.split(ctx.batch0, ctx.shares))


def _shared_forward(ctx, q, k, v, causal, scale, drop):
    """The fused-softmax forward (scale inside the softmax), one share of the batch per thread."""
    from ..kernels.cpu.softmax import softmax_rows_
    S = k.shape[-2]
    p = np.empty(q.shape[:-1] + (S,), q.dtype)
    pd = p if drop is None else np.empty_like(p)
    out = _heads_last_buffer(p, v)
    kt = np.swapaxes(k, -1, -2)
    ctx.batch0 = q.shape[0]

    def work(b0, b1):
        np.matmul(q[b0:b1], _contiguous(kt[b0:b1]), out=p[b0:b1])
        softmax_rows_(p[b0:b1], causal, scale, serial=True)
        if drop is not None:
            np.multiply(p[b0:b1], drop[b0:b1], out=pd[b0:b1])
        np.matmul(pd[b0:b1], v[b0:b1], out=out[b0:b1])
    _run_shares(ctx, work)
    ctx.save_for_backward(q, k, v, p, pd, drop)
    keep_low(ctx, p, pd)
    return out


def _shared_backward(ctx, q, k, v, p, pd, drop, g, out):
    """The fused-softmax backward, in the forward's shares: (dq, dk, dv, None)."""
    from ..kernels.cpu.softmax import softmax_backward_
    dq, dk, dv = out if out is not None else (np.empty(q.shape, g.dtype), np.empty(k.shape, g.dtype),
                                              np.empty(v.shape, g.dtype))

    def work(b0, b1):
        part = slice(b0, b1)
        vt = _contiguous(np.swapaxes(v[part], -1, -2))          # the reference's G v^T then reads it as is
        attention_backward_reference(q[part], k[part], np.swapaxes(vt, -1, -2), p[part], pd[part],
                                     None if drop is None else drop[part], 1.0, g[part],
                                     lambda dp, p_: softmax_backward_(dp, p_, ctx.scale, serial=True),
                                     (dq[part], dk[part], dv[part]))
    _run_shares(ctx, work)
    return dq, dk, dv, None


def _contiguous(bt):
    """A share's k^T (or v^T) as its own C-ordered copy: with the heads' rows 3 * H * E apart in the
    projection, BLAS runs small (L, E) @ (E, S) products from the transposed view at about half
    the speed, far more than the copy costs (docs/performance.md)."""
    return np.ascontiguousarray(bt)


def _no_scores_forward(ctx, q, k, v, batch, L):
    """No query, no key or an empty batch: no scores at all. Each query's output is 0 (with no
    key to attend to, as a fully masked row; PyTorch returns 0 too) and nothing gets a gradient."""
    xp = namespace_of(q)
    ctx.shapes = q.shape, k.shape, v.shape
    return xp.zeros(batch + (L, v.shape[-1]), dtype=q.dtype)


def _no_scores_backward(ctx, g):
    xp = namespace_of(g)
    dq, dk, dv = (xp.zeros(shape, dtype=g.dtype) for shape in ctx.shapes)
    ds = None if ctx.bias_shape is None else xp.zeros(ctx.bias_shape, dtype=g.dtype)
    return dq, dk, dv, ds


def _heads_last_matmul(pd, v):
    """pd @ v for (B, H, L, S) @ (B, H, S, Ev), written into a (B, L, H, Ev) buffer and
    returned as its (B, H, L, Ev) view, as PyTorch's CPU flash attention does: the usual next
    step, out.transpose(1, 2).reshape(B, L, H * Ev), is then free instead of a copy (BLAS
    writes each head's (L, Ev) block with leading dimension H * Ev)."""
    if pd.ndim != 4 or v.ndim != 4:
        return np.matmul(pd, v)
    out = _heads_last_buffer(pd, v)
    np.matmul(pd, v, out=out)
    return out


def _heads_last_buffer(pd, v):
    """An uninitialised (B, H, L, Ev) result for pd @ v, laid out (B, L, H, Ev) for 4-D operands."""
    if pd.ndim != 4 or v.ndim != 4:
        return np.empty(np.broadcast_shapes(pd.shape[:-2], v.shape[:-2]) + (pd.shape[-2], v.shape[-1]),
                        np.result_type(pd, v))
    B, H = np.broadcast_shapes(pd.shape[:2], v.shape[:2])
    return np.empty((B, pd.shape[2], H, v.shape[-1]), np.result_type(pd, v)).transpose(0, 2, 1, 3)


def _kernel_forward(ctx, q, k, v, bias, allow, causal, scale, drop):
    from ..kernels.cpu.attention import attention_forward
    batch, (L, E), S = q.shape[:-2], q.shape[-2:], k.shape[-2]
    bh = int(np.prod(batch))
    q3 = np.ascontiguousarray(q.reshape(bh, L, E))
    k3 = np.ascontiguousarray(k.reshape(bh, S, E))
    v3 = np.ascontiguousarray(v.reshape(bh, S, v.shape[-1]))
    b3 = _combined_bias(bias, allow, batch, L, S, q.dtype)
    d3 = np.empty((0, L, S), q.dtype) if drop is None else drop.reshape(bh, L, S)
    scale = q.dtype.type(scale)
    kt = np.ascontiguousarray(k3.transpose(0, 2, 1))
    o3, lse = attention_forward(q3, kt, v3, b3, d3, bool(causal), scale)
    ctx.shapes = q.shape, k.shape, v.shape
    ctx.save_for_backward(q3, k3, kt, v3, b3, d3, o3, lse)
    keep_low(ctx, kt, b3)   # k transposed and the masks: exact in the low dtype (lse stays float32)
    return o3.reshape(batch + (L, v.shape[-1]))


def _kernel_backward(ctx, g):
    from ..kernels.cpu.attention import attention_backward
    q3, k3, kt, v3, b3, d3, o3, lse = ctx.saved_tensors
    qs, ks, vs = ctx.shapes
    g3 = np.ascontiguousarray(g.reshape(o3.shape), dtype=q3.dtype)
    vt = np.ascontiguousarray(v3.transpose(0, 2, 1))
    want = bool(ctx.needs_input_grad[3])
    dq, dk, dv, ds = attention_backward(q3, k3, kt, v3, vt, b3, d3, bool(ctx.causal), q3.dtype.type(ctx.scale),
                                        o3, lse, g3, want)
    if want:
        ds = ds.reshape(qs[:-2] + ds.shape[-2:])
    return dq.reshape(qs), dk.reshape(ks), dv.reshape(vs), ds


def _combined_bias(bias, allow, batch, L, S, dtype):
    """The float mask and the bool mask as one additive (nb, L, S) array for the kernel:
    nb = 0 (no mask), 1 (one mask for every batch entry and head) or prod(batch)."""
    if bias is None and allow is None:
        return np.empty((0, L, S), dtype)
    total = np.zeros((), dtype) if bias is None else bias.astype(dtype, copy=False)
    if allow is not None:
        total = np.where(allow, total, dtype.type(-np.inf))
    lead = total.shape[:-2] if total.ndim > 2 else ()
    # fresh writeable copies: a read-only view would make Numba compile another specialisation
    if all(n == 1 for n in lead):
        return np.array(np.broadcast_to(total, (L, S)).reshape(1, L, S), order="C")
    return np.array(np.broadcast_to(total, batch + (L, S)).reshape(-1, L, S), order="C")


# ----------------------------------------------------------------------------- public
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """softmax(query key^T * scale + mask) value, with PyTorch's signature and mask rules
    (bool mask: True = may attend; float mask: added). ``scale`` defaults to 1/sqrt(E).

    ``enable_gqa`` (grouped-query attention): key and value may have fewer heads (dim -3) than
    query, Hq = g * Hkv; each key/value head then serves g consecutive query heads, as
    ``key.repeat_interleave(Hq // Hkv, -3)`` (so its gradient sums over those g heads)."""
    Tensor = _op_function.Tensor
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, Tensor):
            raise TypeError(f"scaled_dot_product_attention: {name} must be a Tensor, got {type(t).__name__}")
        if t.ndim < 2:
            raise ValueError(f"scaled_dot_product_attention: {name} needs at least 2 dims (..., seq, features), "
                             f"got shape {list(t.shape)}")
        if t.dtype.kind != "f":
            raise TypeError(f"scaled_dot_product_attention: {name} must be floating point, got {t.dtype}")
    check_same_dtype("scaled_dot_product_attention", [("query", query), ("key", key), ("value", value)])
    if enable_gqa:
        key, value = _grouped_heads(query, key), _grouped_heads(query, value)
    L, E = query.shape[-2:]
    S = key.shape[-2]
    if key.shape[-1] != E:
        raise ValueError(f"scaled_dot_product_attention: query has E={E} features but key has {key.shape[-1]} "
                         f"(shapes {list(query.shape)}, {list(key.shape)})")
    if value.shape[-2] != S:
        raise ValueError(f"scaled_dot_product_attention: key has S={S} positions but value has {value.shape[-2]} "
                         f"(shapes {list(key.shape)}, {list(value.shape)})")
    try:
        batch = np.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    except ValueError:
        raise ValueError(f"scaled_dot_product_attention: batch dims of query {list(query.shape)}, key "
                         f"{list(key.shape)} and value {list(value.shape)} do not broadcast") from None
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"scaled_dot_product_attention: dropout_p must be in [0, 1), got {dropout_p}")
    bias = allow = None
    if attn_mask is not None:
        m = attn_mask._data if isinstance(attn_mask, Tensor) else (
            attn_mask if device_of(attn_mask) != "cpu" else np.asarray(attn_mask))   # a device mask stays put
        try:
            fits = np.broadcast_shapes(m.shape, batch + (L, S)) == batch + (L, S)
        except ValueError:
            fits = False
        if not fits:
            raise ValueError(f"scaled_dot_product_attention: attn_mask of shape {list(m.shape)} does not "
                             f"broadcast to the scores' shape {list(batch + (L, S))}")
        if m.dtype.kind == "b":
            allow = m
        elif m.dtype.kind in "fV":   # V: bfloat16
            bias = attn_mask if isinstance(attn_mask, Tensor) else m.astype(query.dtype)
            if bias.dtype != query.dtype:
                bias = bias.to(query.dtype)
        else:
            raise TypeError(f"scaled_dot_product_attention: attn_mask must be bool or float, got {m.dtype}")
    if scale is None:   # with E = 0 every score is an empty sum, 0, which 1/sqrt(0) = inf would make NaN
        scale = 1.0 / np.sqrt(E) if E else 1.0
    scale = float(scale)
    return ScaledDotProductAttention.apply(query, key, value, bias, allow, bool(is_causal), scale, float(dropout_p))


def _grouped_heads(query, t):
    """Key or value with its Hkv heads (dim -3) each repeated Hq // Hkv times to match query's Hq."""
    if query.ndim < 3 or t.ndim < 3 or t.shape[-3] == query.shape[-3]:
        return t
    hq, hkv = query.shape[-3], t.shape[-3]
    if hkv == 0 or hq % hkv:
        raise RuntimeError(f"scaled_dot_product_attention: with enable_gqa, the number of heads of key and value "
                           f"must divide the number of heads of query, got {hkv} and {hq}")
    return t.repeat_interleave(hq // hkv, dim=-3)
