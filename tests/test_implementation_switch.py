"""One registry of implementation switches (minidl.kernels.switch): ``minidl.implementation(...)``
sets any family, the MINIDL_*_IMPL variables set the defaults, "reference" means the reference on
every device, and an op's node keeps the implementation its forward chose for its backward."""
import os
import subprocess
import sys

import numpy as np
import pytest

import minidl as md
import minidl.nn.functional as F
from minidl.kernels.cpu import batch_norm as cpu_batch_norm
from minidl.kernels.cpu import im2col as cpu_im2col
from minidl.kernels.cpu import unfold as cpu_unfold
from minidl.kernels.cpu import layer_norm as cpu_layer_norm
from minidl.ops import normalization as N


def _refuse(*args, **kwargs):
    raise AssertionError("the kernel ran although the reference was selected")


def test_one_call_sets_several_families_and_restores_them():
    before = md.get_implementation()
    with md.implementation(norm="reference", layer="reference", attention="fused-softmax", optim="reference"):
        assert md.get_implementation("norm") == N.get_implementation() == "reference"
        assert md.get_implementation("layer") == "reference"
        assert md.get_implementation("attention") == "fused-softmax"
        assert md.get_implementation("optim") == "reference"
    assert md.get_implementation() == before


def test_the_families_own_switches_are_the_registry_entries():
    from minidl.ops import _kernel_switch, attention
    from minidl.optim import implementation as optim_impl
    with N.implementation("reference"), _kernel_switch.implementation("reference"), \
            attention.implementation("numba"), optim_impl.implementation("reference"):
        assert md.get_implementation() == {**md.get_implementation(), "norm": "reference", "layer": "reference",
                                           "attention": "numba", "optim": "reference"}


def test_invalid_settings_raise_and_change_nothing():
    before = md.get_implementation()
    with pytest.raises(ValueError, match="expected one of"):
        md.set_implementation(norm="reference", layer="fast")
    with pytest.raises(ValueError, match="unknown family"):
        md.set_implementation(convolution="reference")
    assert md.get_implementation() == before


def test_previous_settings_round_trip():
    previous = md.set_implementation(norm="reference")
    try:
        assert md.get_implementation("norm") == "reference"
    finally:
        md.set_implementation(**previous)
    assert md.get_implementation("norm") == previous["norm"]


def test_environment_variables_set_the_defaults():
    env = {**os.environ, "MINIDL_NORM_IMPL": "reference", "MINIDL_ATTENTION_IMPL": "numba",
           "MINIDL_LAYER_IMPL": "reference", "MINIDL_OPTIM_IMPL": "reference"}
    code = ("import minidl as md; s = md.get_implementation(); "
            "print(s['norm'], s['attention'], s['layer'], s['optim'])")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["reference", "numba", "reference", "reference"]


def test_backward_runs_the_implementation_its_forward_chose(monkeypatch):
    """Selected once per node: a forward under "reference" gets the reference's backward even
    when the setting is back to the kernels by the time backward runs, and vice versa."""
    x = md.randn(4, 6, requires_grad=True)
    with N.implementation("reference"):
        y = F.layer_norm(x, (6,))
    monkeypatch.setattr(cpu_layer_norm, "layer_norm_backward", _refuse)
    y.backward(md.randn(4, 6))      # the reference's backward: the patched kernel is not called
    monkeypatch.undo()

    seen = []
    original = cpu_layer_norm.layer_norm_backward
    monkeypatch.setattr(cpu_layer_norm, "layer_norm_backward", lambda *a, **k: seen.append(1) or original(*a, **k))
    z = F.layer_norm(x, (6,))
    with N.implementation("reference"):
        z.backward(md.randn(4, 6))
    assert seen == [1]


def test_reference_runs_no_cpu_kernel(monkeypatch):
    for name in ("batch_norm_forward", "batch_norm_apply", "batch_norm_backward"):
        monkeypatch.setattr(cpu_batch_norm, name, _refuse)
    monkeypatch.setattr(cpu_im2col, "im2col", _refuse)
    monkeypatch.setattr(cpu_im2col, "col2im", _refuse)
    monkeypatch.setattr(cpu_unfold, "unfold", _refuse)
    monkeypatch.setattr(cpu_unfold, "fold", _refuse)
    x = md.randn(2, 3, 5, 5, requires_grad=True)
    for w in (md.randn(4, 3, 3, 3, requires_grad=True), md.randn(4, 3, 7, 7, requires_grad=True)):
        with md.implementation(norm="reference", layer="reference"):    # unfold's layout, then im2col's
            y = F.batch_norm(F.conv2d(x, w, padding=1), None, None, training=True)
            y.sum().backward()
    assert x.grad.shape == x.shape


def test_a_device_module_without_the_kernel_fails_at_selection():
    from minidl.kernels.switch import NORM
    impls = NORM.kernels(("layer_norm_forward", "no_such_kernel"), "minidl.ops.normalization.layer_norm",
                         cpu="minidl.kernels.cpu.layer_norm")
    with pytest.raises(AttributeError, match="no_such_kernel"):
        impls.select(np.zeros((2, 3)))
