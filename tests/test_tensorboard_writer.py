"""minidl.utils.tensorboard.SummaryWriter: what it writes is read back with TensorBoard's own
EventAccumulator and checked against NumPy references, and against the files
torch.utils.tensorboard writes for the same calls."""
import io
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("tensorboard")

import minidl as md  # noqa: E402
from minidl.utils.tensorboard import SummaryWriter  # noqa: E402
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402
from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader  # noqa: E402
from tensorboard.util import tensor_util  # noqa: E402


def _load(logdir):
    acc = EventAccumulator(str(logdir), size_guidance={"scalars": 0, "images": 0, "histograms": 0, "tensors": 0,
                                                       "audio": 0})
    acc.Reload()
    return acc


def _raw_events(logdir):
    files = sorted(f for f in os.listdir(logdir) if f.startswith("events.out.tfevents"))
    return [e for f in files for e in LegacyEventFileLoader(os.path.join(logdir, f)).Load()]


def _tf_bins():
    edges, v = [], 1e-12
    while v < 1e20:
        edges.append(v)
        v *= 1.1
    return np.array([-e for e in edges[::-1]] + [0.0] + edges)


def _png(image_event):
    from PIL import Image
    return np.asarray(Image.open(io.BytesIO(image_event.encoded_image_string)))


# scalars -----------------------------------------------------------------------------------------------------
def test_scalar_accepts_numbers_arrays_and_tensors(tmp_path):
    values = [1.5, 3, np.float32(-2.25), np.array(4.5), md.tensor(0.125), md.tensor([7.0]),
              md.tensor([[2.0]], requires_grad=True) * 3]
    with SummaryWriter(tmp_path) as w:
        for step, v in enumerate(values):
            w.add_scalar("train/loss", v, step, walltime=1000.0 + step)
    events = _load(tmp_path).Scalars("train/loss")
    assert [e.step for e in events] == list(range(len(values)))
    assert [e.wall_time for e in events] == [1000.0 + i for i in range(len(values))]
    np.testing.assert_allclose([e.value for e in events], [1.5, 3, -2.25, 4.5, 0.125, 7.0, 6.0])


def test_scalar_new_style_keeps_double_precision(tmp_path):
    with SummaryWriter(tmp_path) as w:
        w.add_scalar("f", 0.1, 0, new_style=True)
        w.add_scalar("d", 0.1, 0, new_style=True, double_precision=True)
    acc = _load(tmp_path)
    assert tensor_util.make_ndarray(acc.Tensors("f")[0].tensor_proto).item() == np.float32(0.1)
    assert tensor_util.make_ndarray(acc.Tensors("d")[0].tensor_proto).item() == 0.1


def test_scalar_bad_input(tmp_path):
    with SummaryWriter(tmp_path) as w:
        with pytest.raises(AssertionError, match="one element"):
            w.add_scalar("x", md.tensor([1.0, 2.0]))
        with pytest.raises(NotImplementedError, match="numpy array or a minidl tensor"):
            w.add_scalar("x", [1.0])


def test_scalar_from_cuda_tensor(tmp_path):
    if not md.cuda.is_available():
        pytest.skip("no cuda device (nor the simulator)")
    x = md.tensor([2.5], device="cuda", requires_grad=True) * 2
    with SummaryWriter(tmp_path) as w:
        w.add_scalar("gpu", x, 1)
        w.add_histogram("gpu_h", md.arange(4.0, device="cuda"), 1)
    acc = _load(tmp_path)
    assert acc.Scalars("gpu")[0].value == 5.0
    assert acc.Histograms("gpu_h")[0].histogram_value.sum == 6.0


def test_add_scalars_writes_one_run_per_key(tmp_path):
    with SummaryWriter(tmp_path) as w:
        for step in range(3):
            w.add_scalars("loss/all", {"train": step * 1.0, "val": step * 2.0}, step)
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["loss_all_train", "loss_all_val"]
    for key, scale in (("train", 1.0), ("val", 2.0)):
        events = _load(tmp_path / f"loss_all_{key}").Scalars("loss/all")
        assert [(e.step, e.value) for e in events] == [(s, s * scale) for s in range(3)]


# histograms --------------------------------------------------------------------------------------------------
def _expected_histogram(values, edges):
    counts, edges = np.histogram(values, bins=edges)
    first, last = np.flatnonzero(counts)[[0, -1]]
    kept = np.concatenate([[0], counts[:last + 1]]) if first == 0 else counts[first - 1:last + 1]
    return edges[first:last + 2], kept


def test_histogram_tensorflow_bins(tmp_path):
    values = np.random.default_rng(0).normal(size=(20, 30)).astype(np.float32)
    with SummaryWriter(tmp_path) as w:
        w.add_histogram("weights", md.tensor(values), 7)
    event = _load(tmp_path).Histograms("weights")[0]
    h = event.histogram_value
    v = values.astype(np.float64).reshape(-1)
    limits, counts = _expected_histogram(v, _tf_bins())
    assert event.step == 7
    assert (h.min, h.max, h.num) == (v.min(), v.max(), v.size)
    np.testing.assert_allclose([h.sum, h.sum_squares], [v.sum(), v.dot(v)])
    np.testing.assert_array_equal(h.bucket_limit, limits)
    np.testing.assert_array_equal(h.bucket, counts)
    assert sum(h.bucket) == v.size


def test_histogram_numpy_bins_and_max_bins(tmp_path):
    values = np.linspace(0.0, 1.0, 101)
    with SummaryWriter(tmp_path) as w:
        w.add_histogram("ten", values, 0, bins=10)
        w.add_histogram("merged", values, 0, bins=10, max_bins=5)
    acc = _load(tmp_path)
    ten, merged = acc.Histograms("ten")[0].histogram_value, acc.Histograms("merged")[0].histogram_value
    counts, edges = np.histogram(values, bins=10)
    np.testing.assert_array_equal(ten.bucket, np.concatenate([[0], counts]))
    np.testing.assert_allclose(ten.bucket_limit, edges)
    np.testing.assert_array_equal(merged.bucket, np.concatenate([[0], counts.reshape(5, 2).sum(1)]))
    np.testing.assert_allclose(merged.bucket_limit, edges[::2])


def test_histogram_raw_and_bad_input(tmp_path):
    with SummaryWriter(tmp_path) as w:
        w.add_histogram_raw("raw", min=0.0, max=3.0, num=6, sum=9.0, sum_squares=17.0, bucket_limits=[1.0, 2.0, 3.0],
                            bucket_counts=[1, 2, 3], global_step=2)
        with pytest.raises(ValueError, match="bucket_limits"):
            w.add_histogram_raw("raw", 0.0, 3.0, 6, 9.0, 17.0, [1.0, 2.0], [1, 2, 3])
        with pytest.raises(ValueError, match="no element"):
            w.add_histogram("empty", np.zeros(0))
    h = _load(tmp_path).Histograms("raw")[0].histogram_value
    assert (list(h.bucket_limit), list(h.bucket), h.num) == ([1.0, 2.0, 3.0], [1, 2, 3], 6)


# images, text ------------------------------------------------------------------------------------------------
def test_images_layouts_and_scaling(tmp_path):
    rng = np.random.default_rng(1)
    chw = rng.random((3, 8, 5)).astype(np.float32)
    hwc = rng.integers(0, 256, (6, 4, 3), dtype=np.uint8)
    hw = rng.random((5, 7))
    batch = rng.random((3, 1, 4, 6)).astype(np.float32)
    with SummaryWriter(tmp_path) as w:
        w.add_image("chw", md.tensor(chw), 0)
        w.add_image("hwc", hwc, 0, dataformats="HWC")
        w.add_image("hw", hw * 2 - 0.5, 0, dataformats="HW")   # out of [0, 1]: clipped
        w.add_images("batch", md.tensor(batch), 0)
        with pytest.raises(AssertionError, match="input format"):
            w.add_image("bad", chw, 0, dataformats="HW")
    acc = _load(tmp_path)
    img = {tag: acc.Images(tag)[0] for tag in ("chw", "hwc", "hw", "batch")}
    assert [(img[t].width, img[t].height) for t in img] == [(5, 8), (4, 6), (7, 5), (18, 4)]
    np.testing.assert_array_equal(_png(img["chw"]), (chw * 255).astype(np.uint8).transpose(1, 2, 0))
    np.testing.assert_array_equal(_png(img["hwc"]), hwc)
    grey = ((hw * 2 - 0.5) * 255).clip(0, 255).astype(np.uint8)
    np.testing.assert_array_equal(_png(img["hw"]), np.stack([grey] * 3, 2))
    tiles = (batch[:, 0] * 255).astype(np.uint8)
    np.testing.assert_array_equal(_png(img["batch"])[:, :, 0], np.concatenate(list(tiles), axis=1))


def test_figure(tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig = plt.figure(figsize=(2, 1.5), dpi=50)
    plt.plot([0, 1], [1, 0])
    with SummaryWriter(tmp_path) as w:
        w.add_figure("fig", fig, 3)
    event = _load(tmp_path).Images("fig")[0]
    assert (event.step, event.width, event.height) == (3, 100, 75)
    assert not plt.fignum_exists(fig.number)


def test_text(tmp_path):
    with SummaryWriter(tmp_path) as w:
        w.add_text("notes", "lr **0.1**, été", 4)
    event = _load(tmp_path).Tensors("notes/text_summary")[0]
    assert event.step == 4
    assert tensor_util.make_ndarray(event.tensor_proto).tolist() == ["lr **0.1**, été".encode()]


def test_tensor_and_audio(tmp_path):
    samples = np.sin(np.linspace(0, 20, 800))
    with SummaryWriter(tmp_path) as w:
        w.add_tensor("t", md.arange(6.0).reshape(2, 3), 1)
        w.add_audio("a", md.tensor(samples), 1, sample_rate=8000)
    acc = _load(tmp_path)
    np.testing.assert_array_equal(tensor_util.make_ndarray(acc.Tensors("t")[0].tensor_proto),
                                  np.arange(6.0).reshape(2, 3))
    clip = acc.Audio("a")[0]
    assert (clip.sample_rate, clip.length_frames, clip.content_type) == (8000, 800, "audio/wav")


# hyperparameters, dashboards, projector ----------------------------------------------------------------------
def test_hparams(tmp_path):
    from tensorboard.plugins.hparams import metadata
    from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData
    with SummaryWriter(tmp_path) as w:
        w.add_hparams({"lr": 0.01, "batch": 32, "opt": "adam", "skip": None}, {"hp/acc": 0.75},
                      hparam_domain_discrete={"opt": ["adam", "sgd"]}, run_name="trial")
        with pytest.raises(TypeError, match="dictionary"):
            w.add_hparams([("lr", 0.1)], {})
        with pytest.raises(TypeError, match="same type"):
            w.add_hparams({"opt": "adam"}, {}, hparam_domain_discrete={"opt": [1, 2]})
    acc = _load(tmp_path / "trial")
    assert acc.Scalars("hp/acc")[0].value == 0.75

    def plugin_data(tag):
        data = HParamsPluginData()
        data.ParseFromString(acc.SummaryMetadata(tag).plugin_data.content)
        return data
    experiment = plugin_data(metadata.EXPERIMENT_TAG).experiment
    assert [h.name for h in experiment.hparam_infos] == ["lr", "batch", "opt"]
    assert [v.string_value for v in experiment.hparam_infos[2].domain_discrete.values] == ["adam", "sgd"]
    assert [m.name.tag for m in experiment.metric_infos] == ["hp/acc"]
    start = plugin_data(metadata.SESSION_START_INFO_TAG).session_start_info.hparams
    assert (start["lr"].number_value, start["batch"].number_value, start["opt"].string_value) == (0.01, 32, "adam")
    assert "skip" not in start


def test_pr_curve(tmp_path):
    labels = np.array([0, 0, 1, 1, 1, 0])
    predictions = np.array([0.1, 0.6, 0.4, 0.8, 0.95, 0.3])
    with SummaryWriter(tmp_path) as w:
        w.add_pr_curve("pr", md.tensor(labels), md.tensor(predictions), 0, num_thresholds=5)
    data = tensor_util.make_ndarray(_load(tmp_path).Tensors("pr")[0].tensor_proto)
    thresholds = np.arange(5) / 4
    bucket = np.floor(predictions * 4) / 4
    tp = np.array([((bucket >= t) & (labels == 1)).sum() for t in thresholds])
    fp = np.array([((bucket >= t) & (labels == 0)).sum() for t in thresholds])
    np.testing.assert_allclose(data[:4], [tp, fp, 3 - fp, 3 - tp])
    np.testing.assert_allclose(data[4], tp / np.maximum(tp + fp, 1e-7), rtol=1e-6)
    np.testing.assert_allclose(data[5], tp / 3, rtol=1e-6)


def test_custom_scalars(tmp_path):
    from tensorboard.plugins.custom_scalar import layout_pb2
    with SummaryWriter(tmp_path) as w:
        w.add_custom_scalars({"losses": {"both": ["Multiline", ["loss/train", "loss/val"]],
                                         "band": ["Margin", ["m", "lo", "hi"]]}})
    layout = layout_pb2.Layout()
    layout.ParseFromString(tensor_util.make_ndarray(_load(tmp_path).Tensors("custom_scalars__config__")[0]
                                                    .tensor_proto).item())
    (category,) = layout.category
    assert category.title == "losses"
    assert list(category.chart[0].multiline.tag) == ["loss/train", "loss/val"]
    assert category.chart[1].margin.series[0].upper == "hi"


def test_embedding_files(tmp_path):
    from google.protobuf import text_format
    from tensorboard.plugins.projector.projector_config_pb2 import ProjectorConfig
    mat = np.arange(12.0).reshape(4, 3)
    with SummaryWriter(tmp_path) as w:
        w.add_embedding(md.tensor(mat), metadata=["a", "b", "c", "d"], label_img=md.rand(4, 3, 5, 5), tag="feat/x")
        with pytest.raises(AssertionError, match="labels"):
            w.add_embedding(mat, metadata=["a"], global_step=1)
    folder = tmp_path / "00000" / "feat%2fx"
    rows = (folder / "tensors.tsv").read_text().splitlines()
    np.testing.assert_array_equal([[float(v) for v in r.split("\t")] for r in rows], mat)
    assert (folder / "metadata.tsv").read_text() == "a\nb\nc\nd\n"
    from PIL import Image
    assert Image.open(folder / "sprite.png").size == (10, 10)
    config = text_format.Parse((tmp_path / "projector_config.pbtxt").read_text(), ProjectorConfig())
    assert config.embeddings[0].tensor_name == "feat/x:00000"
    assert list(config.embeddings[0].sprite.single_image_dim) == [5, 5]


def test_add_graph_is_not_supported(tmp_path):
    with SummaryWriter(tmp_path) as w, pytest.raises(NotImplementedError, match="graph tracer"):
        w.add_graph(md.nn.Linear(2, 2), md.randn(1, 2))


# the writer's lifetime ---------------------------------------------------------------------------------------
def test_default_logdir_purge_step_and_reopen(tmp_path, monkeypatch):
    import socket
    monkeypatch.chdir(tmp_path)
    w = SummaryWriter(comment="_lr0.1", purge_step=5)
    (run,) = os.listdir(tmp_path / "runs")
    assert run.endswith("_" + socket.gethostname() + "_lr0.1") and w.get_logdir() == os.path.join("runs", run)
    w.add_scalar("x", 1.0, 5)
    w.close()
    w.close()   # a second close does nothing
    w.add_scalar("x", 2.0, 6)   # a closed writer opens a new event file
    w.flush()
    w.close()
    events = _raw_events(tmp_path / "runs" / run)
    starts = [e for e in events if e.HasField("session_log")]
    assert [(e.step, e.session_log.status) for e in starts] == [(5, 1)]
    assert sorted(e.summary.value[0].simple_value for e in events if e.HasField("summary")) == [1.0, 2.0]
    assert len(os.listdir(tmp_path / "runs" / run)) == 2


def test_import_does_not_need_tensorboard():
    code = ("import sys, minidl; assert 'tensorboard' not in sys.modules\n"
            "sys.modules['tensorboard'] = None\n"
            "try:\n    import minidl.utils.tensorboard\nexcept ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "TensorBoard logging requires TensorBoard" in out.stdout and "pip install tensorboard" in out.stdout


# against torch.utils.tensorboard -----------------------------------------------------------------------------
def _log_everything(writer_cls, logdir, tensor):
    rng = np.random.default_rng(3)
    values, image = rng.normal(size=500), rng.random((3, 6, 4)).astype(np.float32)
    labels, preds = rng.integers(0, 2, 40), rng.random(40)
    with writer_cls(str(logdir)) as w:
        for step in range(3):
            w.add_scalar("loss", tensor(np.array(0.5 / (step + 1))), step, walltime=10.0 + step)
            w.add_scalars("pair", {"a": step, "b": -step}, step, walltime=10.0)
        w.add_histogram("h", tensor(values), 1, walltime=10.0)
        w.add_histogram("h_auto", tensor(values), 1, bins="auto", max_bins=7, walltime=10.0)
        w.add_image("img", tensor(image), 1, walltime=10.0)
        w.add_images("imgs", tensor(rng.random((5, 3, 4, 4)).astype(np.float32)), 1, walltime=10.0)
        w.add_text("txt", "hello", 1, walltime=10.0)
        w.add_pr_curve("pr", tensor(labels), tensor(preds), 1, num_thresholds=20, walltime=10.0)
        w.add_hparams({"lr": 0.1, "opt": "sgd", "flag": True}, {"hp/m": 1.5}, run_name="hp")
        w.add_embedding(tensor(values[:12].reshape(4, 3)), metadata=[1, 2, 3, 4], tag="e")


def _summaries(logdir):
    """{(run directory, tag): [(step, wall time, the serialized Summary.Value)]}; add_hparams takes no
    walltime, so its run's times are left out."""
    out = {}
    for root, _, files in os.walk(logdir):
        for f in files:
            if f.startswith("events.out"):
                for e in LegacyEventFileLoader(os.path.join(root, f)).Load():
                    for v in e.summary.value:
                        run = os.path.relpath(root, logdir)
                        when = None if run == "hp" else e.wall_time
                        out.setdefault((run, v.tag), []).append((e.step, when, v.SerializeToString(deterministic=True)))
    return out


def test_same_files_as_torch(tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("torch.utils.tensorboard")
    from torch.utils.tensorboard import SummaryWriter as TorchWriter
    _log_everything(SummaryWriter, tmp_path / "md", md.tensor)
    _log_everything(TorchWriter, tmp_path / "torch", torch.tensor)
    ours, theirs = _summaries(tmp_path / "md"), _summaries(tmp_path / "torch")
    assert sorted(ours) == sorted(theirs)
    for key in theirs:
        assert ours[key] == theirs[key], key
    for name in ("tensors.tsv", "metadata.tsv"):
        assert (tmp_path / "md/00000/e" / name).read_text() == (tmp_path / "torch/00000/e" / name).read_text()
    assert (tmp_path / "md/projector_config.pbtxt").read_text() == \
        (tmp_path / "torch/projector_config.pbtxt").read_text()
