"""The Tensor type reaches autograd through one seam: ``minidl.autograd.op_function.Tensor``,
set by the tensor module once the class exists. Autograd imports nothing from the tensor
module, so importing it first works, and after ``import minidl`` every part of autograd and
the ops sees the very class users get as ``md.Tensor``."""
import os
import subprocess
import sys

import pytest

import minidl as md
from minidl.autograd import engine, op_function

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CHECK_AFTER_AUTOGRAD_FIRST = """
import minidl.autograd
import minidl
from minidl.autograd import op_function
assert op_function.Tensor is minidl.Tensor, op_function.Tensor
x = minidl.ones(3, requires_grad=True)
(x * 2 + 1).sum().backward()
assert type(x.grad) is minidl.Tensor and x.grad.tolist() == [2.0, 2.0, 2.0]
print("ok")
"""


def test_importing_minidl_autograd_first_in_a_fresh_process_works():
    r = subprocess.run([sys.executable, "-c", _CHECK_AFTER_AUTOGRAD_FIRST], capture_output=True, text=True,
                       cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_the_tensor_type_is_registered_after_import_minidl():
    assert op_function.Tensor is md.Tensor


def test_autograd_wraps_gradients_and_hook_arguments_in_the_registered_type():
    seen = []
    x = md.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    y.register_hook(lambda g: seen.append(type(g)))
    y.sum().backward()
    assert seen == [md.Tensor]
    assert type(x.grad) is md.Tensor
    assert not hasattr(engine, "_tensor_class")     # no second, lazily loaded copy of the type


def test_ops_that_check_for_tensors_use_the_registered_type():
    assert md.maximum(md.tensor([1.0, 4.0]), md.tensor([3.0, 2.0])).tolist() == [3.0, 4.0]
    with pytest.raises(TypeError, match="expected two Tensors, got Tensor and int"):
        md.maximum(md.ones(2), 3)
    assert md.index_add(md.zeros(3), 0, md.tensor([0, 2]), md.ones(2)).tolist() == [1.0, 0.0, 1.0]


def test_no_op_or_autograd_module_imports_the_tensor_class_inside_a_function():
    import ast
    import pathlib
    offenders = []
    for part in ("ops", "autograd"):
        for path in (pathlib.Path(ROOT) / "minidl" / part).rglob("*.py"):
            tree = ast.parse(path.read_text())
            for fn in ast.walk(tree):
                if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                for node in ast.walk(fn):
                    if isinstance(node, ast.ImportFrom) and any(a.name == "Tensor" for a in node.names):
                        offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == [], "function-local Tensor imports (use autograd.op_function.Tensor): " + ", ".join(offenders)
