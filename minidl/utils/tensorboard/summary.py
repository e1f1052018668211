"""The ``Summary`` protobufs behind each ``SummaryWriter.add_*`` call, built from TensorBoard's own
message classes (``tensorboard.compat.proto``, the plugins' ``*_pb2``) the way
``torch.utils.tensorboard.summary`` builds them, so TensorBoard's dashboards read them alike.

Histograms. TensorBoard stores a histogram as the right edges of its buckets and their counts.
The default bucketing (``bins='tensorflow'``) is TensorFlow's: edges at +-1e-12 * 1.1**k up to
1e20 and 0, so the resolution is relative (10%) at every scale. The values are counted with
``np.histogram`` over those edges, then only the support is kept: from one empty bucket left
of the first non-empty one (its right edge is the leftmost limit TensorBoard draws) to the last
non-empty one.
"""
import io
import wave

import numpy as np
from tensorboard.compat.proto.summary_pb2 import HistogramProto, Summary, SummaryMetadata
from tensorboard.compat.proto.tensor_pb2 import TensorProto
from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
from tensorboard.plugins.custom_scalar import layout_pb2
from tensorboard.plugins.pr_curve.plugin_data_pb2 import PrCurvePluginData
from tensorboard.plugins.text.plugin_data_pb2 import TextPluginData
from tensorboard.util import tensor_util

from ._convert import convert_to_HWC, make_np


def _tensorflow_bins():
    # grown by repeated multiplication, as TensorFlow and PyTorch do, so the edges match theirs bit for bit
    v, positive = 1e-12, []
    while v < 1e20:
        positive.append(v)
        v *= 1.1
    return [-b for b in reversed(positive)] + [0] + positive


DEFAULT_BINS = _tensorflow_bins()


def scalar(name, value, new_style=False, double_precision=False):
    """A scalar summary: the old ``simple_value`` field, or with ``new_style`` a 0-d tensor of the
    scalars plugin (float, or double with ``double_precision``)."""
    value = make_np(value).squeeze()
    if value.ndim != 0:
        raise AssertionError(f"Tensor should contain one element (0 dimensions). Was given size: {value.size} "
                             f"and {value.ndim} dimensions.")
    value = float(value)
    if not new_style:
        return Summary(value=[Summary.Value(tag=name, simple_value=value)])
    proto = (TensorProto(double_val=[value], dtype="DT_DOUBLE") if double_precision
             else TensorProto(float_val=[value], dtype="DT_FLOAT"))
    smd = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="scalars"))
    return Summary(value=[Summary.Value(tag=name, tensor=proto, metadata=smd)])


def tensor_proto(tag, tensor):
    """A summary holding the whole array (the ``tensor`` plugin), encoded by TensorBoard's
    ``make_tensor_proto``."""
    array = np.ascontiguousarray(make_np(tensor))
    if array.nbytes >= 1 << 31:
        raise ValueError("tensor is bigger than protocol buffer's hard limit of 2GB in size")
    try:
        proto = tensor_util.make_tensor_proto(array)
    except TypeError:
        raise ValueError(f"{tag} has unsupported tensor dtype {array.dtype}") from None
    smd = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="tensor"))
    return Summary(value=[Summary.Value(tag=tag, metadata=smd, tensor=proto)])


def histogram_raw(name, min, max, num, sum, sum_squares, bucket_limits, bucket_counts):  # noqa: A002
    """A histogram from statistics already computed (``bucket_limits`` are the right edges)."""
    hist = HistogramProto(min=min, max=max, num=num, sum=sum, sum_squares=sum_squares,
                          bucket_limit=bucket_limits, bucket=bucket_counts)
    return Summary(value=[Summary.Value(tag=name, histo=hist)])


def histogram(name, values, bins, max_bins=None):
    """A histogram of ``values`` (any shape) over ``bins`` (edges, a count or a NumPy rule)."""
    return Summary(value=[Summary.Value(tag=name, histo=make_histogram(make_np(values).astype(float), bins,
                                                                        max_bins))])


def make_histogram(values, bins, max_bins=None):
    """The HistogramProto of ``values``; ``max_bins`` merges adjacent buckets until at most that many
    remain (see the module docstring for which buckets are kept)."""
    if values.size == 0:
        raise ValueError("The input has no element.")
    values = values.reshape(-1)
    counts, limits = np.histogram(values, bins=bins)
    if max_bins is not None and len(counts) > max_bins:
        group = len(counts) // max_bins
        if len(counts) % group:
            counts = np.pad(counts, [(0, group - len(counts) % group)])
        counts = counts.reshape(-1, group).sum(axis=-1)
        limits = np.concatenate([limits[:-1:group], limits[-1:]])
    nonzero = np.flatnonzero(counts)
    if nonzero.size == 0:
        raise ValueError(f"The histogram is empty: none of the {values.size} values lies within the bins "
                         f"[{limits[0]}, {limits[-1]}]")
    start, end = int(nonzero[0]), int(nonzero[-1]) + 1
    counts = counts[start - 1:end] if start > 0 else np.concatenate([[0], counts[:end]])
    limits = limits[start:end + 1]
    return HistogramProto(min=values.min(), max=values.max(), num=len(values), sum=values.sum(),
                          sum_squares=values.dot(values), bucket_limit=limits.tolist(), bucket=counts.tolist())


def image(tag, tensor, rescale=1, dataformats="NCHW"):
    """An image summary (PNG). Float images are taken to lie in [0, 1] and uint8 ones in [0, 255];
    values outside are clipped."""
    array = convert_to_HWC(make_np(tensor), dataformats)
    scale = 1 if array.dtype == np.uint8 else 255
    array = (array.astype(np.float32) * scale).clip(0, 255).astype(np.uint8)
    return Summary(value=[Summary.Value(tag=tag, image=make_image(array, rescale=rescale))])


def make_image(array, rescale=1):
    """Encode an H,W,C uint8 array as PNG in a ``Summary.Image``; the stored height and width are
    the array's, whatever ``rescale`` does to the picture."""
    from PIL import Image

    height, width, channels = array.shape
    picture = Image.fromarray(array)
    size = (int(width * rescale), int(height * rescale))
    if size != picture.size:
        picture = picture.resize(size, Image.Resampling.LANCZOS)
    with io.BytesIO() as out:
        picture.save(out, format="PNG")
        encoded = out.getvalue()
    return Summary.Image(height=height, width=width, colorspace=channels, encoded_image_string=encoded)


def audio(tag, tensor, sample_rate=44100):
    """A mono 16-bit WAV clip from samples in [-1, 1] (clipped, with a warning, when outside)."""
    array = make_np(tensor).squeeze()
    if abs(array).max() > 1:
        print("warning: audio amplitude out of range, auto clipped.")
        array = array.clip(-1, 1)
    if array.ndim != 1:
        raise AssertionError("input tensor should be 1 dimensional.")
    pcm = (array * np.iinfo(np.int16).max).astype("<i2")
    with io.BytesIO() as out:
        with wave.open(out, "wb") as wav:
            wav.setnchannels(1)
            wav.setsampwidth(2)
            wav.setframerate(sample_rate)
            wav.writeframes(pcm.tobytes())
        encoded = out.getvalue()
    clip = Summary.Audio(sample_rate=sample_rate, num_channels=1, length_frames=pcm.shape[-1],
                         encoded_audio_string=encoded, content_type="audio/wav")
    return Summary(value=[Summary.Value(tag=tag, audio=clip)])


def text(tag, text):
    """A text (Markdown) summary, stored under ``tag + '/text_summary'`` as the text plugin expects."""
    smd = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(
        plugin_name="text", content=TextPluginData(version=0).SerializeToString()))
    proto = TensorProto(dtype="DT_STRING", string_val=[text.encode("utf_8")],
                        tensor_shape=TensorShapeProto(dim=[TensorShapeProto.Dim(size=1)]))
    return Summary(value=[Summary.Value(tag=tag + "/text_summary", metadata=smd, tensor=proto)])


def custom_scalars(layout):
    """The custom-scalars dashboard layout: ``{category: {chart title: ['Multiline', [tags]] or
    ['Margin', [value, lower, upper]]}}``."""
    categories = []
    for category, charts_of in layout.items():
        charts = []
        for title, (kind, tags) in charts_of.items():
            if kind == "Margin":
                if len(tags) != 3:
                    raise AssertionError(f"a Margin chart takes 3 tags (value, lower, upper), got {len(tags)}")
                series = layout_pb2.MarginChartContent.Series(value=tags[0], lower=tags[1], upper=tags[2])
                charts.append(layout_pb2.Chart(title=title, margin=layout_pb2.MarginChartContent(series=[series])))
            else:
                charts.append(layout_pb2.Chart(title=title, multiline=layout_pb2.MultilineChartContent(tag=tags)))
        categories.append(layout_pb2.Category(title=category, chart=charts))
    smd = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="custom_scalars"))
    proto = TensorProto(dtype="DT_STRING", string_val=[layout_pb2.Layout(category=categories).SerializeToString()],
                        tensor_shape=TensorShapeProto())
    return Summary(value=[Summary.Value(tag="custom_scalars__config__", tensor=proto, metadata=smd)])


def _pr_curve_summary(tag, data, num_thresholds):
    content = PrCurvePluginData(version=0, num_thresholds=num_thresholds).SerializeToString()
    smd = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="pr_curves", content=content))
    shape = TensorShapeProto(dim=[TensorShapeProto.Dim(size=n) for n in data.shape])
    proto = TensorProto(dtype="DT_FLOAT", float_val=data.reshape(-1).tolist(), tensor_shape=shape)
    return Summary(value=[Summary.Value(tag=tag, metadata=smd, tensor=proto)])


def pr_curve_raw(tag, tp, fp, tn, fn, precision, recall, num_thresholds=127, weights=None):
    """A PR curve from counts already computed, one entry per threshold."""
    data = np.stack([make_np(a) if not isinstance(a, (list, tuple)) else np.asarray(a)
                     for a in (tp, fp, tn, fn, precision, recall)])
    return _pr_curve_summary(tag, data, min(num_thresholds, 127))


def pr_curve(tag, labels, predictions, num_thresholds=127, weights=None):
    """A PR curve of ``predictions`` (probabilities) against 0/1 ``labels``; TensorBoard's plugin
    caps the thresholds at 127."""
    num_thresholds = min(num_thresholds, 127)
    return _pr_curve_summary(tag, compute_curve(labels, predictions, num_thresholds, weights), num_thresholds)


def compute_curve(labels, predictions, num_thresholds=None, weights=None):
    """The (6, num_thresholds) rows TP, FP, TN, FN, precision, recall at thresholds i/(n-1).

    Each prediction falls in bucket floor(p * (n-1)); counting buckets from the top down (a reverse
    cumulative sum) gives, at threshold i, the positives and negatives predicted >= i/(n-1)."""
    minimum_count = 1e-7
    weights = 1.0 if weights is None else weights
    buckets = np.int32(np.floor(predictions * (num_thresholds - 1)))
    positive = labels.astype(np.float64)
    tp_buckets, _ = np.histogram(buckets, bins=num_thresholds, range=(0, num_thresholds - 1),
                                 weights=positive * weights)
    fp_buckets, _ = np.histogram(buckets, bins=num_thresholds, range=(0, num_thresholds - 1),
                                 weights=(1.0 - positive) * weights)
    tp = np.cumsum(tp_buckets[::-1])[::-1]
    fp = np.cumsum(fp_buckets[::-1])[::-1]
    tn, fn = fp[0] - fp, tp[0] - tp
    precision = tp / np.maximum(minimum_count, tp + fp)
    recall = tp / np.maximum(minimum_count, tp + fn)
    return np.stack((tp, fp, tn, fn, precision, recall))
