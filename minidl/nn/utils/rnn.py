"""Variable-length batches for the recurrent layers, as ``torch.nn.utils.rnn``.

    padded = pad_sequence([a, b, c], batch_first=True)                  # (3, L_max, *)
    packed = pack_padded_sequence(padded, lengths, batch_first=True, enforce_sorted=False)
    out, h_n = gru(packed)                    # no step is computed past a sequence's end
    out, lengths = pad_packed_sequence(out, batch_first=True)            # zeros after each end

A PackedSequence holds ``data`` (N, *), the steps' rows one after the other, and ``batch_sizes``
(how many sequences run at each step), for a batch sorted by decreasing length; with
``enforce_sorted=False`` the batch is sorted here and ``sorted_indices`` / ``unsorted_indices``
remember the permutation, so everything handed back (padded outputs, final states) is in the
caller's order. The layout is described in ``minidl.ops.rnn.packing``.
"""
from collections import namedtuple

import numpy as np

from ...ops.rnn.packing import Pack, PadSequences, Unpack, batch_sizes_of
from ...tensor import dtype as dtypes
from ...tensor.tensor import Tensor


def _int64(a):
    from ...tensor.factories import tensor
    return tensor(np.asarray(a, dtype=np.int64))


def _array(x):
    if isinstance(x, Tensor):
        return x.numpy(force=True)
    return np.asarray(x)


class PackedSequence(namedtuple("PackedSequence", ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])):
    """data (N, *), batch_sizes (int64, one per step), and the sorting permutation (or None)."""

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if batch_sizes is None:
            raise TypeError("PackedSequence: batch_sizes is required (build one with pack_padded_sequence)")
        if not isinstance(batch_sizes, Tensor):
            batch_sizes = _int64(batch_sizes)
        if sorted_indices is not None and not isinstance(sorted_indices, Tensor):
            sorted_indices = _int64(sorted_indices)
        if unsorted_indices is None and sorted_indices is not None:
            unsorted_indices = _int64(_invert(sorted_indices.numpy(force=True)))
        elif unsorted_indices is not None and not isinstance(unsorted_indices, Tensor):
            unsorted_indices = _int64(unsorted_indices)
        _check_layout(data, batch_sizes, sorted_indices)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs):
        """``data.to(...)``; the permutation follows data to its device, batch_sizes stays on the
        CPU (the loops read it there); self when nothing changes."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        moved = [None if t is None else t.to(data.device) for t in (self.sorted_indices, self.unsorted_indices)]
        return type(self)(data, self.batch_sizes, *moved)

    def cuda(self, device=None):
        from ...tensor.device import cuda_device
        return self.to(cuda_device(device))

    def cpu(self):
        return self.to("cpu")

    def double(self):
        return self.to(dtype=dtypes.float64)

    def float(self):
        return self.to(dtype=dtypes.float32)

    def half(self):
        return self.to(dtype=dtypes.float16)

    def long(self):
        return self.to(dtype=dtypes.int64)

    def int(self):
        return self.to(dtype=dtypes.int32)

    def short(self):
        return self.to(dtype=dtypes.int16)

    def char(self):
        return self.to(dtype=dtypes.int8)

    def byte(self):
        return self.to(dtype=dtypes.uint8)

    @property
    def is_cuda(self):
        return self.data.device.type == "cuda"

    def is_pinned(self):
        return self.data.is_pinned()


def _check_layout(data, batch_sizes, sorted_indices):
    """The layout the RNN loops index by: each step runs the first batch_sizes[t] sequences, so the
    sizes are positive and non-increasing, and they add up to data's rows."""
    bs = batch_sizes.numpy(force=True)
    if bs.ndim != 1 or bs.dtype.kind not in "iu":
        raise ValueError(f"PackedSequence: batch_sizes must be a 1-D integer sequence, got shape {bs.shape} "
                         f"and dtype {bs.dtype}")
    if bs.size and (bs.min() < 1 or np.any(bs[1:] > bs[:-1])):
        raise ValueError(f"PackedSequence: batch_sizes must be positive and non-increasing (step t runs the first "
                         f"batch_sizes[t] sequences), got {bs.tolist()[:20]}")
    rows = getattr(data, "shape", (None,))[:1]
    if rows and rows[0] is not None and int(bs.sum()) != rows[0]:
        raise ValueError(f"PackedSequence: batch_sizes add up to {int(bs.sum())} rows, but data has {rows[0]}")
    if sorted_indices is not None:
        perm = sorted_indices.numpy(force=True)
        if perm.ndim != 1 or perm.size != (bs[0] if bs.size else 0) or not np.array_equal(np.sort(perm),
                                                                                      np.arange(perm.size)):
            last = int(bs[0]) - 1 if bs.size else -1
            raise ValueError(f"PackedSequence: sorted_indices must be a permutation of 0..{last} (one per "
                             f"sequence), got {perm.tolist()[:20]}")


def invert_permutation(permutation):
    """The inverse of a 1-D permutation tensor (None for None), as PackedSequence's
    unsorted_indices are of its sorted_indices."""
    if permutation is None:
        return None
    from ...tensor.factories import tensor
    out = tensor(_invert(permutation.cpu().numpy(force=True)))
    return out.to(permutation.device) if permutation.device.type != "cpu" else out


def _invert(perm):
    inv = np.empty_like(perm)
    inv[perm] = np.arange(perm.size, dtype=perm.dtype)
    return inv


def _check_lengths(lengths, batch, total):
    if lengths.ndim != 1 or lengths.size != batch:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got {lengths.size} "
                           f"(batch_size={batch})")
    if lengths.size and lengths.min() <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element in 'lengths' "
                           "that is <= 0")
    if lengths.size and lengths.max() > total:
        raise RuntimeError(f"Expected every length to be at most the padded sequence length {total}, but got a "
                           f"length of {int(lengths.max())}")


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Pack a padded batch (T, B, *) (``batch_first``: (B, T, *)) of sequences of ``lengths``."""
    if not isinstance(input, Tensor):
        raise TypeError(f"pack_padded_sequence: input must be a Tensor, got {type(input).__name__}")
    if input.ndim < 2:
        raise ValueError(f"pack_padded_sequence: input must have at least 2 dims (T, B, *), got shape "
                         f"{list(input.shape)}")
    lengths = _array(lengths)
    if lengths.size == 0:   # before the dtype: np.asarray([]) is float64
        raise RuntimeError("Cannot pack empty tensors.")
    if lengths.dtype.kind not in "iufb":
        raise TypeError(f"pack_padded_sequence: lengths must be numbers, got dtype {lengths.dtype}")
    lengths = lengths.astype(np.int64)   # as PyTorch's as_tensor(lengths, dtype=int64): floats truncate
    T, B = (input.shape[1], input.shape[0]) if batch_first else (input.shape[0], input.shape[1])
    _check_lengths(lengths, B, T)
    sorted_indices = None
    if enforce_sorted:
        if np.any(lengths[1:] > lengths[:-1]):
            raise RuntimeError("`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. "
                               "You can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to "
                               "sidestep this requirement if you do not need ONNX exportability.")
    else:
        order = np.argsort(-lengths, kind="stable")
        lengths = lengths[order]
        sorted_indices = order
        input = input[order] if batch_first else input[:, order]
    if batch_first:
        input = input.transpose(0, 1)
    bs = batch_sizes_of(lengths)
    return PackedSequence(Pack.apply(input, bs), bs, sorted_indices)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """(padded (T, B, *) or (B, T, *), lengths): the inverse of pack_padded_sequence, in the
    caller's batch order; T = the longest length, or ``total_length``."""
    if not isinstance(sequence, PackedSequence):
        raise TypeError(f"pad_packed_sequence: expected a PackedSequence, got {type(sequence).__name__}")
    bs = sequence.batch_sizes.numpy(force=True).astype(np.int64)
    T = bs.size
    if total_length is not None:
        if total_length < T:
            raise ValueError(f"Expected total_length to be at least the length of the longest sequence in input, "
                             f"but got total_length={total_length} and max sequence length being {T}")
        T = int(total_length)
    out = Unpack.apply(sequence.data, bs, T, float(padding_value))
    B = int(bs[0]) if bs.size else 0
    lengths = (bs[None, :] > np.arange(B)[:, None]).sum(axis=1).astype(np.int64)
    if sequence.unsorted_indices is not None:
        idx = sequence.unsorted_indices.numpy(force=True)
        out = out[:, idx]
        lengths = lengths[idx]
    if batch_first:
        out = out.transpose(0, 1)
    return out, _int64(lengths)


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stack tensors (len_i, *) into (L_max, B, *) (``batch_first``: (B, L_max, *)), padded."""
    if isinstance(sequences, Tensor):
        sequences = [sequences[i] for i in range(sequences.shape[0])]
    sequences = list(sequences)
    if padding_side not in ("left", "right"):
        raise RuntimeError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    trailing = tuple(sequences[0].shape[1:])
    for i, s in enumerate(sequences):
        if not isinstance(s, Tensor):
            raise TypeError(f"pad_sequence: sequence {i} must be a Tensor, got {type(s).__name__}")
        if s.ndim < 1 or tuple(s.shape[1:]) != trailing:
            raise RuntimeError(f"pad_sequence: every sequence must share the trailing shape {list(trailing)} of "
                               f"sequence 0, but sequence {i} has shape {list(s.shape)}")
    return PadSequences.apply(not batch_first, padding_side == "left", float(padding_value), *sequences)


def pack_sequence(sequences, enforce_sorted=True):
    """pack_padded_sequence(pad_sequence(sequences), their lengths, enforce_sorted)."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The list of tensors (len_i, *) of a padded batch."""
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    return [padded_sequences[i, :int(n)] for i, n in enumerate(_array(lengths))]


def unpack_sequence(packed_sequences):
    """The list of tensors (len_i, *) of a PackedSequence, in the caller's order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
