"""``SummaryWriter``: the object a training script logs through, with ``torch.utils.tensorboard``'s
methods, arguments and files.

Each ``add_*`` builds a ``Summary`` (``summary.py``), wraps it in an ``Event`` stamped with the step
and the wall time, and hands it to TensorBoard's ``EventFileWriter``, which queues it and writes it
from a background thread (every ``flush_secs``, when ``max_queue`` events wait, on ``flush`` and on
``close``), so logging costs the training loop little. ``add_scalars`` and ``add_hparams`` write into
sub-directories of the log directory, which TensorBoard shows as runs of their own, so that several
curves share one chart, or one run's hyperparameters sit beside its metrics.
"""
import os
import socket
import time
from datetime import datetime

from tensorboard.compat import tf
from tensorboard.compat.proto import event_pb2
from tensorboard.compat.proto.event_pb2 import Event, SessionLog
from tensorboard.plugins.projector.projector_config_pb2 import ProjectorConfig
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from . import _embedding, summary
from ._convert import figure_to_image, make_np
from ._hparams import hparams

__all__ = ["FileWriter", "SummaryWriter"]


class FileWriter:
    """One event file in ``log_dir``: wraps summaries and events and passes them to TensorBoard's
    asynchronous ``EventFileWriter``."""

    def __init__(self, log_dir, max_queue=10, flush_secs=120, filename_suffix=""):
        self.event_writer = EventFileWriter(str(log_dir), max_queue, flush_secs, filename_suffix)

    def get_logdir(self):
        return self.event_writer.get_logdir()

    def add_event(self, event, step=None, walltime=None):
        event.wall_time = time.time() if walltime is None else walltime
        if step is not None:
            event.step = int(step)
        self.event_writer.add_event(event)

    def add_summary(self, summary, global_step=None, walltime=None):
        self.add_event(event_pb2.Event(summary=summary), global_step, walltime)

    def flush(self):
        self.event_writer.flush()

    def close(self):
        self.event_writer.close()

    def reopen(self):
        """After ``close``, start a new event file in the same directory."""
        self.event_writer.reopen()


class SummaryWriter:
    """Writes TensorBoard event files into ``log_dir``.

    ``log_dir`` defaults to ``runs/<Mon DD_HH-MM-SS>_<hostname><comment>``. ``purge_step``: when a
    run that crashed at step T + X restarts from a checkpoint at step T into the same ``log_dir``,
    TensorBoard hides the events it had logged at steps >= T. ``max_queue``, ``flush_secs``: how many
    events may wait, and how long, before they are written; ``filename_suffix`` ends the event file's
    name. Closing the writer (or leaving its ``with`` block) writes everything; a closed writer opens
    a new event file if it is logged to again.
    """

    def __init__(self, log_dir=None, comment="", purge_step=None, max_queue=10, flush_secs=120, filename_suffix=""):
        if not log_dir:
            stamp = datetime.now().strftime("%b%d_%H-%M-%S")
            log_dir = os.path.join("runs", stamp + "_" + socket.gethostname() + comment)
        self.log_dir = log_dir
        self.purge_step = purge_step
        self.max_queue = max_queue
        self.flush_secs = flush_secs
        self.filename_suffix = filename_suffix
        self.default_bins = summary.DEFAULT_BINS
        self.file_writer = self.all_writers = None
        self._get_file_writer()

    def _get_file_writer(self):
        """The writer of the main event file, created anew after ``close``."""
        if self.all_writers is None or self.file_writer is None:
            self.file_writer = FileWriter(self.log_dir, self.max_queue, self.flush_secs, self.filename_suffix)
            self.all_writers = {self.file_writer.get_logdir(): self.file_writer}
            if self.purge_step is not None:
                # a file-version event and a session START at the step tell TensorBoard to drop later events
                self.file_writer.add_event(Event(step=self.purge_step, file_version="brain.Event:2"))
                self.file_writer.add_event(Event(step=self.purge_step,
                                                 session_log=SessionLog(status=SessionLog.START)))
                self.purge_step = None
        return self.file_writer

    def get_logdir(self):
        """The directory the event files are written to."""
        return self.log_dir

    def _add(self, summary_proto, global_step=None, walltime=None):
        self._get_file_writer().add_summary(summary_proto, global_step, walltime)

    # scalars -----------------------------------------------------------------------------------------------
    def add_scalar(self, tag, scalar_value, global_step=None, walltime=None, new_style=False,
                   double_precision=False):
        """Log one number (a Python or NumPy number, or a one-element tensor) under ``tag``.
        ``new_style`` stores it as a tensor of the scalars plugin (double with ``double_precision``)."""
        self._add(summary.scalar(tag, scalar_value, new_style=new_style, double_precision=double_precision),
                  global_step, walltime)

    def add_scalars(self, main_tag, tag_scalar_dict, global_step=None, walltime=None):
        """Log several numbers to one chart ``main_tag``: each key gets its own run directory
        ``LOGDIR/<main_tag with / as _>_<key>`` holding the scalar ``main_tag``."""
        walltime = time.time() if walltime is None else walltime
        logdir = self._get_file_writer().get_logdir()
        for tag, value in tag_scalar_dict.items():
            path = logdir + "/" + main_tag.replace("/", "_") + "_" + tag
            writer = self.all_writers.get(path)
            if writer is None:
                writer = self.all_writers[path] = FileWriter(path, self.max_queue, self.flush_secs,
                                                             self.filename_suffix)
            writer.add_summary(summary.scalar(main_tag, value), global_step, walltime)

    def add_tensor(self, tag, tensor, global_step=None, walltime=None):
        """Log a whole array (the ``tensor`` plugin)."""
        self._add(summary.tensor_proto(tag, tensor), global_step, walltime)

    # distributions -----------------------------------------------------------------------------------------
    def add_histogram(self, tag, values, global_step=None, bins="tensorflow", walltime=None, max_bins=None):
        """Log a histogram of ``values``. ``bins``: 'tensorflow' (exponential buckets, see summary.py),
        or anything ``np.histogram`` takes (a count, edges, 'auto', 'fd', ...)."""
        if isinstance(bins, str) and bins == "tensorflow":
            bins = self.default_bins
        self._add(summary.histogram(tag, values, bins, max_bins=max_bins), global_step, walltime)

    def add_histogram_raw(self, tag, min, max, num, sum, sum_squares, bucket_limits, bucket_counts,  # noqa: A002
                          global_step=None, walltime=None):
        """Log a histogram computed elsewhere: ``bucket_limits`` are the buckets' right edges."""
        if len(bucket_limits) != len(bucket_counts):
            raise ValueError(f"len(bucket_limits) != len(bucket_counts): {len(bucket_limits)} limits for "
                             f"{len(bucket_counts)} counts")
        self._add(summary.histogram_raw(tag, min, max, num, sum, sum_squares, bucket_limits, bucket_counts),
                  global_step, walltime)

    def add_pr_curve(self, tag, labels, predictions, global_step=None, num_thresholds=127, weights=None,
                     walltime=None):
        """Log a precision-recall curve of ``predictions`` (probabilities) against 0/1 ``labels``."""
        labels, predictions = make_np(labels), make_np(predictions)
        self._add(summary.pr_curve(tag, labels, predictions, num_thresholds, weights), global_step, walltime)

    def add_pr_curve_raw(self, tag, true_positive_counts, false_positive_counts, true_negative_counts,
                         false_negative_counts, precision, recall, global_step=None, num_thresholds=127,
                         weights=None, walltime=None):
        """Log a precision-recall curve from per-threshold counts computed elsewhere."""
        self._add(summary.pr_curve_raw(tag, true_positive_counts, false_positive_counts, true_negative_counts,
                                       false_negative_counts, precision, recall, num_thresholds, weights),
                  global_step, walltime)

    # images, text, sound -----------------------------------------------------------------------------------
    def add_image(self, tag, img_tensor, global_step=None, walltime=None, dataformats="CHW"):
        """Log an image: C,H,W by default (``dataformats`` 'HWC', 'HW', ...), float in [0, 1] or uint8."""
        self._add(summary.image(tag, img_tensor, dataformats=dataformats), global_step, walltime)

    def add_images(self, tag, img_tensor, global_step=None, walltime=None, dataformats="NCHW"):
        """Log a batch of images, tiled into one grid image (8 per row)."""
        self._add(summary.image(tag, img_tensor, dataformats=dataformats), global_step, walltime)

    def add_figure(self, tag, figure, global_step=None, close=True, walltime=None):
        """Log a matplotlib figure (or a list of them, as a grid) rendered to an image."""
        fmt = "NCHW" if isinstance(figure, list) else "CHW"
        self.add_image(tag, figure_to_image(figure, close), global_step, walltime, dataformats=fmt)

    def add_text(self, tag, text_string, global_step=None, walltime=None):
        """Log text (rendered as Markdown), under ``tag + '/text_summary'``."""
        self._add(summary.text(tag, text_string), global_step, walltime)

    def add_audio(self, tag, snd_tensor, global_step=None, sample_rate=44100, walltime=None):
        """Log a mono clip of samples in [-1, 1]."""
        self._add(summary.audio(tag, snd_tensor, sample_rate=sample_rate), global_step, walltime)

    # dashboards --------------------------------------------------------------------------------------------
    def add_hparams(self, hparam_dict, metric_dict, hparam_domain_discrete=None, run_name=None, global_step=None):
        """Log one run's hyperparameters and final metrics for the HParams dashboard, in the run
        directory ``LOGDIR/<run_name>`` (default: the current time). ``hparam_domain_discrete`` lists
        the values a hyperparameter can take. The metrics are written there as scalars, so their names
        should not also be ``add_scalar`` tags of the main run."""
        if type(hparam_dict) is not dict or type(metric_dict) is not dict:
            raise TypeError(f"hparam_dict and metric_dict should be dictionary, got {type(hparam_dict).__name__} "
                            f"and {type(metric_dict).__name__}")
        experiment, start, end = hparams(hparam_dict, metric_dict, hparam_domain_discrete)
        logdir = os.path.join(self._get_file_writer().get_logdir(), run_name or str(time.time()))
        with SummaryWriter(log_dir=logdir) as run:
            for proto in (experiment, start, end):
                run.file_writer.add_summary(proto, global_step)
            for k, v in metric_dict.items():
                run.add_scalar(k, v, global_step)

    def add_custom_scalars(self, layout):
        """Lay out the custom-scalars dashboard: ``{category: {title: ['Multiline', tags] or
        ['Margin', [value, lower, upper]]}}``."""
        self._add(summary.custom_scalars(layout))

    def add_custom_scalars_multilinechart(self, tags, category="default", title="untitled"):
        self.add_custom_scalars({category: {title: ["Multiline", tags]}})

    def add_custom_scalars_marginchart(self, tags, category="default", title="untitled"):
        if len(tags) != 3:
            raise AssertionError(f"Expected 3 tags, got {len(tags)}.")
        self.add_custom_scalars({category: {title: ["Margin", tags]}})

    @staticmethod
    def _encode(rawstr):
        return rawstr.replace("%", "%25").replace("/", "%2f").replace("\\", "%5c")

    def add_embedding(self, mat, metadata=None, label_img=None, global_step=None, tag="default",
                      metadata_header=None):
        """Log N points (``mat``, N x D) for the Projector, with optional labels (``metadata``, one per
        point, or rows under ``metadata_header``) and images (``label_img``, N,C,H,W)."""
        mat = make_np(mat)
        global_step = 0 if global_step is None else global_step
        subdir = f"{str(global_step).zfill(5)}/{self._encode(tag)}"
        save_path = os.path.join(self._get_file_writer().get_logdir(), subdir)
        fs = tf.io.gfile
        if fs.exists(save_path):
            if not fs.isdir(save_path):
                raise NotADirectoryError(f"Path: `{save_path}` exists, but is a file. Cannot proceed.")
            print("warning: Embedding dir exists, did you set global_step for add_embedding()?")
        else:
            fs.makedirs(save_path)
        if metadata is not None:
            if mat.shape[0] != len(metadata):
                raise AssertionError(f"#labels should equal with #data points: {len(metadata)} labels for "
                                     f"{mat.shape[0]} points")
            _embedding.make_tsv(metadata, save_path, metadata_header=metadata_header)
        if label_img is not None:
            label_img = make_np(label_img)
            if mat.shape[0] != label_img.shape[0]:
                raise AssertionError(f"#images should equal with #data points: {label_img.shape[0]} images for "
                                     f"{mat.shape[0]} points")
            _embedding.make_sprite(label_img, save_path)
        if mat.ndim != 2:
            raise AssertionError(f"mat should be 2D, where mat.size(0) is the number of data points; got shape "
                                 f"{mat.shape}")
        _embedding.make_mat(mat, save_path)
        if not hasattr(self, "_projector_config"):
            self._projector_config = ProjectorConfig()
        self._projector_config.embeddings.extend(
            [_embedding.embedding_info(metadata, label_img, subdir, global_step, tag)])
        from google.protobuf import text_format
        _embedding.write_pbtxt(self._get_file_writer().get_logdir(),
                               text_format.MessageToString(self._projector_config))

    def add_graph(self, model, input_to_model=None, verbose=False, use_strict_trace=True):
        """Not available: PyTorch records the graph by tracing the model with ``torch.jit.trace``;
        minidl has no graph tracer, so there is no graph to write."""
        raise NotImplementedError("SummaryWriter.add_graph is not supported by minidl: it needs a traced graph "
                                  "of the model (torch.jit.trace in PyTorch), and minidl has no graph tracer")

    # lifetime ----------------------------------------------------------------------------------------------
    def flush(self):
        """Write every pending event of every event file to disk."""
        if self.all_writers is None:
            return
        for writer in self.all_writers.values():
            writer.flush()

    def close(self):
        """Write everything and close the event files (a second close does nothing)."""
        if self.all_writers is None:
            return
        for writer in self.all_writers.values():
            writer.flush()
            writer.close()
        self.file_writer = self.all_writers = None

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        self.close()
