"""md.set_float32_matmul_precision and the deterministic-algorithms switches: PyTorch's
values, validation and read-back; on minidl's CPU kernels they change no result."""
import numpy as np
import pytest

import minidl as md


@pytest.fixture(autouse=True)
def _restore():
    precision, mode = md.get_float32_matmul_precision(), md.get_deterministic_debug_mode()
    yield
    md.set_float32_matmul_precision(precision)
    md.set_deterministic_debug_mode(mode)


def test_matmul_precision_is_remembered_and_changes_no_cpu_result():
    assert md.get_float32_matmul_precision() == "highest"
    a, b = md.randn(16, 32), md.randn(32, 8)
    exact = (a @ b).numpy().copy()
    for p in ("high", "medium", "highest"):
        md.set_float32_matmul_precision(p)
        assert md.get_float32_matmul_precision() == p
        assert md.backends.cuda.matmul.allow_tf32 == (p != "highest")   # mirrored, as PyTorch
        np.testing.assert_array_equal((a @ b).numpy(), exact)


def test_an_unknown_precision_warns_and_changes_nothing_as_pytorch():
    md.set_float32_matmul_precision("high")
    with pytest.warns(UserWarning, match="'highest', 'high', or 'medium'.*no effect"):
        md.set_float32_matmul_precision("low")
    assert md.get_float32_matmul_precision() == "high"
    with pytest.raises(RuntimeError, match="expects a str"):
        md.set_float32_matmul_precision(3)


def test_deterministic_algorithms_flag():
    assert not md.are_deterministic_algorithms_enabled()
    md.use_deterministic_algorithms(True)
    assert md.are_deterministic_algorithms_enabled() and not md.is_deterministic_algorithms_warn_only_enabled()
    assert md.get_deterministic_debug_mode() == 2
    md.use_deterministic_algorithms(True, warn_only=True)
    assert md.is_deterministic_algorithms_warn_only_enabled() and md.get_deterministic_debug_mode() == 1
    md.set_deterministic_debug_mode("default")
    assert not md.are_deterministic_algorithms_enabled() and not md.is_deterministic_algorithms_warn_only_enabled()
    with pytest.raises(TypeError, match="must be bool"):
        md.use_deterministic_algorithms(1)
    with pytest.raises(RuntimeError, match="expected one of `default`, `warn`, `error`"):
        md.set_deterministic_debug_mode("strict")


def test_the_same_as_pytorch():
    torch = pytest.importorskip("torch")
    for mode, warn_only in ((True, False), (True, True), (False, True)):
        torch.use_deterministic_algorithms(mode, warn_only=warn_only)
        md.use_deterministic_algorithms(mode, warn_only=warn_only)
        assert (md.are_deterministic_algorithms_enabled(), md.is_deterministic_algorithms_warn_only_enabled(),
                md.get_deterministic_debug_mode()) == (torch.are_deterministic_algorithms_enabled(),
                                                       torch.is_deterministic_algorithms_warn_only_enabled(),
                                                       torch.get_deterministic_debug_mode())
    torch.use_deterministic_algorithms(False)


def test_training_repeats_bit_for_bit_on_the_cpu():
    """What deterministic mode asks for, which minidl's CPU kernels give without it."""
    md.use_deterministic_algorithms(True)
    results = []
    for _ in range(2):
        md.manual_seed(0)
        net = md.nn.Sequential(md.nn.Conv2d(2, 4, 3), md.nn.BatchNorm2d(4), md.nn.ReLU(), md.nn.Flatten(),
                               md.nn.Linear(4 * 6 * 6, 3))
        x = md.randn(4, 2, 8, 8)
        net(x).square().mean().backward()
        results.append([p.grad.numpy().copy() for p in net.parameters()])
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)
