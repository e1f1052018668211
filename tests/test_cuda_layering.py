"""The cuda device's layering: the kernels (minidl/kernels/cuda) sit below the backend package
(minidl/backends/cuda) and import nothing from minidl.backends, not even inside a function; the
package keeps its public names and ``md.backends.cuda`` keeps PyTorch's flag objects once the
device is loaded."""
import ast
import pathlib

import numpy as np

import minidl as md

KERNELS = pathlib.Path(md.__file__).parent / "kernels" / "cuda"


def _imported_modules(path):
    """Every module an import statement in ``path`` names (module level or inside functions),
    relative imports resolved against the file's package."""
    package = "minidl.kernels.cuda".split(".")
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            found += [(node.lineno, f"{module}.{alias.name}" if not node.module else module) for alias in node.names]
    return found


def test_import_resolution_sees_relative_and_function_local_imports(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("from . import map\n\ndef f():\n    from ...backends.cuda import CudaArray\n"
                     "    import minidl.backends\n")
    assert _imported_modules(probe) == [(1, "minidl.kernels.cuda.map"), (4, "minidl.backends.cuda"),
                                        (5, "minidl.backends")]


def test_no_cuda_kernel_imports_from_the_backends():
    files = sorted(KERNELS.glob("*.py"))
    assert len(files) > 10   # the kernels package was found
    upward = [f"{f.name}:{line} imports {module}" for f in files for line, module in _imported_modules(f)
              if module == "minidl.backends" or module.startswith("minidl.backends.")]
    assert upward == [], "kernels must take what they need from their arguments: " + "; ".join(upward)


def test_the_package_re_exports_its_public_names():
    from minidl.backends.cuda import CUDA_NUMPY, CudaArray, CudaBackend, CudaNamespace, transfer_log
    assert isinstance(CUDA_NUMPY, CudaNamespace) and CudaBackend.array_type is CudaArray
    assert CudaBackend.xp is CUDA_NUMPY and callable(transfer_log)


def test_a_cuda_array_gives_its_namespace():
    from minidl.backends.cuda import CUDA_NUMPY, CudaArray
    x = CudaArray.from_host(np.arange(3.0))
    assert x.__array_namespace__() is CUDA_NUMPY
    np.testing.assert_array_equal((x * 2 + 1).copy_to_host(), [1.0, 3.0, 5.0])


def test_backends_cuda_keeps_the_flag_objects_once_the_device_is_loaded():
    from minidl.backends import cuda_flags
    md.ones(1, device="cuda")   # loads the device package, which replaces md.backends.cuda
    assert md.backends.cuda.__name__ == "minidl.backends.cuda"
    assert md.backends.cuda.matmul is cuda_flags.matmul   # the flags, not the namespace's matmul
    try:
        md.backends.cuda.matmul.allow_tf32 = True
        assert cuda_flags.matmul.allow_tf32 is True
    finally:
        md.backends.cuda.matmul.allow_tf32 = False
    assert md.backends.cuda.is_built() and md.backends.cuda.flash_sdp_enabled() in (True, False)
