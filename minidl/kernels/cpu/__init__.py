"""Numba CPU kernels, one op family per file; each is tested against the NumPy reference of its op."""
