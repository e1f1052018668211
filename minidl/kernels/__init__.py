"""Fast kernels per device: ``cpu`` (Numba) and ``cuda``. Each is tested against the NumPy reference of its op."""
