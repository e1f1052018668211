"""PyTorch names minidl leaves out on purpose, and what ``md.<name>`` says about them.

``import minidl as torch`` runs ordinary CPU training scripts; what such scripts do not need
and a NumPy framework of this size cannot honestly offer is not imitated: asking for it
raises NotImplementedError naming it and why, rather than an AttributeError from deep
inside or a stand-in that behaves differently.
"""

_WHY = {
    "sparse tensors": ("sparse", "sparse_coo_tensor", "sparse_csr_tensor", "sparse_csc_tensor", "sparse_bsr_tensor",
                       "sparse_bsc_tensor", "sparse_compressed_tensor", "to_sparse", "sparse_coo", "sparse_csr",
                       "smm", "hspmm", "spmm"),
    "complex numbers": ("complex", "complex32", "complex64", "complex128", "cfloat", "cdouble", "chalf",
                        "view_as_complex", "view_as_real", "polar", "fft"),
    "TorchScript and graph capture": ("jit", "fx", "export", "onnx", "_dynamo", "_inductor", "package", "compiler"),
    "quantization": ("quantization", "ao", "quantize_per_tensor", "quantize_per_channel", "dequantize", "qint8",
                     "quint8", "qint32", "quint4x2", "quint2x4", "qscheme", "per_tensor_affine",
                     "per_channel_affine"),
    "torch.multiprocessing (minidl.distributed starts its ranks with mpiexec)": ("multiprocessing",),
    "other devices": ("xpu", "mps", "mtia"),
    "named and nested tensors": ("nested",),
    "float8 types": ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"),
    "wide unsigned types": ("uint16", "uint32", "uint64"),
}
UNSUPPORTED = {name: why for why, names in _WHY.items() for name in names}


def raise_for(module, name):
    """Raise NotImplementedError for a deliberately missing ``name``; AttributeError otherwise."""
    why = UNSUPPORTED.get(name)
    if why is not None:
        raise NotImplementedError(f"{module}.{name} is not implemented: minidl deliberately does not support "
                                  f"{why} (PyTorch's torch.{name} has no minidl counterpart)")
    raise AttributeError(f"module {module!r} has no attribute {name!r}")
