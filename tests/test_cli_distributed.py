"""``minidl train`` data parallel: ranks simulated by run_ranks (always on) and one real
``mpiexec -n 2`` launch. Rank 0 alone writes and prints, every rank resumes from the checkpoint,
the sampler's epoch is saved, and ``--norm syncbatch`` is SyncBatchNorm (BatchNorm, with a
warning, on one process)."""
import os

import numpy as np
import pytest

from minidl.cli import main
from minidl.distributed.testing import run_ranks
from minidl.io import load

RESNET = ["train", "resnet8", "--norm", "syncbatch", "--width", "4", "--batch-size", "8", "--no-progress"]
GPT = ["train", "gpt", "--d-model", "16", "--n-layer", "1", "--n-head", "2", "--block-size", "16", "--batch-size", "2",
       "--no-progress"]


def _ranks(k, argv):
    return run_ranks(k, lambda r: main(argv), timeout=300.0)


def test_syncbatch_on_one_process_is_batchnorm_with_a_warning(tmp_path, monkeypatch):
    from minidl.nn.modules import syncbatchnorm
    monkeypatch.setattr(syncbatchnorm, "_FALLBACK_WARNED", [False])
    out = str(tmp_path / "one")
    with pytest.warns(UserWarning, match="SyncBatchNorm"):
        assert main(RESNET + ["--steps", "2", "--out", out]) == 0
    ckpt = load(os.path.join(out, "checkpoint.npz"))
    assert ckpt["config"]["norm"] == "syncbatch" and "world_size" not in ckpt
    assert main(RESNET + ["--steps", "3", "--out", out, "--resume"]) == 0


def test_two_ranks_train_write_once_and_resume_on_every_rank(tmp_path, capsys):
    out = str(tmp_path / "two")
    assert _ranks(2, RESNET + ["--steps", "2", "--out", out]) == [0, 0]
    printed = capsys.readouterr().out
    assert printed.count("parameters on each of 2 ranks") == 1 and printed.count("final:") == 1
    ckpt = load(os.path.join(out, "checkpoint.npz"))
    assert ckpt["world_size"] == 2 and ckpt["data"] == {"sampler_epoch": 0} and ckpt["step"] == 2
    assert sorted(os.listdir(out)) == ["checkpoint.npz", "loss.png", "metrics.csv", "metrics.json"]
    # resumed: every rank loads the checkpoint; the run continues to the new length
    assert _ranks(2, RESNET + ["--steps", "3", "--out", out, "--resume"]) == [0, 0]
    ckpt = load(os.path.join(out, "checkpoint.npz"))
    assert ckpt["step"] == 3 and len(ckpt["history"]["loss"]) == 3
    with pytest.raises(SystemExit):     # another number of ranks would be another run
        main(RESNET + ["--steps", "4", "--out", out, "--resume"])
    assert "trained on 2 rank(s), this one has 1" in capsys.readouterr().err


def test_two_ranks_shard_the_epoch(tmp_path):
    from minidl.cli.tasks import ShardedImageTask
    from minidl.train.replicas import Replicas
    tasks = [ShardedImageTask("digits", 8, 0, "cpu", Replicas(r, 2)) for r in range(2)]
    first = [t._order(0) for t in tasks]
    assert len(set(first[0]) & set(first[1])) == 0          # disjoint shards of one epoch
    assert tasks[0].steps_per_epoch == len(first[0]) // 8
    assert not np.array_equal(tasks[0]._order(1), first[0])  # a new order each epoch (set_epoch)


def test_gpt_on_two_ranks(tmp_path, capsys):
    out = str(tmp_path / "gpt")
    assert _ranks(2, GPT + ["--steps", "2", "--out", out]) == [0, 0]
    ckpt = load(os.path.join(out, "checkpoint.npz"))
    assert ckpt["world_size"] == 2 and ckpt["step"] == 2
    assert capsys.readouterr().out.count("final:") == 1


def test_mpiexec_two_ranks_train(tmp_path):
    from minidl.distributed.testing import mpiexec_path, run_mpiexec
    if mpiexec_path() is None:
        pytest.skip("needs mpi4py and an mpiexec (the [distributed] extra)")
    script = tmp_path / "minidl_main.py"
    script.write_text("import sys\nfrom minidl.cli import main\nsys.exit(main())\n")
    out = str(tmp_path / "mpi")
    # one launch (each costs seconds of start-up); resuming on every rank is tested with run_ranks above
    proc = run_mpiexec(script, n=2, args=RESNET + ["--out", out, "--steps", "2"], timeout=240)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.stdout.count("final:") == 1 and "on each of 2 ranks" in proc.stdout   # rank 0 alone prints
    ckpt = load(os.path.join(out, "checkpoint.npz"))
    assert ckpt["world_size"] == 2 and ckpt["step"] == 2 and ckpt["data"] == {"sampler_epoch": 0}
