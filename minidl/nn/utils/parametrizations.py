"""Ready-made parametrizations, as ``torch.nn.utils.parametrizations``: ``orthogonal``,
``spectral_norm`` and ``weight_norm``, each registered with ``parametrize.register_parametrization``
(so the original lives at ``module.parametrizations.<name>.original``, or ``original0`` /
``original1`` for weight_norm, and the state_dict keys are PyTorch's).
"""
from enum import Enum, auto

import numpy as np

from ... import cat, dot, eye, mv, randn, zeros_like
from ...autograd import grad_mode
from ...tensor.tensor import Tensor
from .. import functional as F
from ..modules.conv_nd import _ConvTransposeNd
from ..modules.module import Module
from . import parametrize
from ...linalg import householder_product, matrix_exp, solve
from .weight_norm import _norm_except_dim

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]


def _is_orthogonal(Q):
    """Whether the tall Q (..., n, k) has orthonormal columns: Q^T Q = I within 10 n eps."""
    n, k = Q.shape[-2], Q.shape[-1]
    q = Q.numpy(force=True)
    eps = 10.0 * n * np.finfo(q.dtype).eps
    return np.allclose(np.swapaxes(q, -1, -2) @ q, np.eye(k, dtype=q.dtype), atol=eps)


def _make_orthogonal(A):
    """The Q of A = QR (A tall, (..., n, k)) with R's diagonal made non-negative: Q's columns
    times the signs of R's diagonal (a column whose R entry is 0 becomes zero, as PyTorch's
    ``sgn``). NumPy's QR is LAPACK's geqrf + orgqr, as PyTorch's."""
    a = A.numpy(force=True)
    q, r = np.linalg.qr(a, mode="reduced")
    q = q * np.sign(np.diagonal(r, axis1=-2, axis2=-1))[..., None, :]
    return Tensor._wrap(q.astype(a.dtype, copy=False), None, 0)


class _OrthMaps(Enum):
    matrix_exp = auto()
    cayley = auto()
    householder = auto()


class _Orthogonal(Module):
    """Q(X) with orthonormal columns (rows for a wide X), for X (..., n, k).

    For a tall X (a wide one is transposed first and Q transposed back):
    - ``matrix_exp`` / ``cayley``: A = Y - Y^T is skew-symmetric, Y being X's lower triangle
      padded with zero columns to n x n; Q is the first k columns of exp(A), or of the Cayley
      transform (I - A/2)^-1 (I + A/2); both are orthogonal for a skew-symmetric A.
    - ``householder``: Q = H_1 ... H_k (first k columns), the reflectors being X's columns
      below the diagonal (tau_i = 2 / ||v_i||^2, an exact reflection), times the signs
      ``int(diag X)`` per column (the diagonal is not trained: no gradient goes through int).

    With ``use_trivialization`` (the default) a buffer ``base`` (n x n orthogonal) is kept and
    Q becomes ``base @ Q``: right_inverse stores the target itself as ``base`` (completed to a
    square orthogonal matrix, or orthogonalized by QR when it is not orthogonal) and returns -I,
    which every map sends to I, so the weight starts at the target and training moves X near 0,
    where the maps are well conditioned ("dynamic trivialization", Lezcano-Casado 2019).
    """

    def __init__(self, weight, orthogonal_map, *, use_trivialization=True):
        super().__init__()
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X):
        # computed on the host for a tensor on another device: the matrix functions run there
        # anyway, and minidl's tril and diagonal have no device kernels (the copies are
        # differentiable)
        device = X.device
        if device.type != "cpu":
            X = X.cpu()
        n, k = X.shape[-2], X.shape[-1]
        transposed = n < k
        if transposed:
            X = X.mT
            n, k = k, n
        if self.orthogonal_map in (_OrthMaps.matrix_exp, _OrthMaps.cayley):
            X = X.tril()
            if n != k:
                X = cat([X, X.new_zeros(n, n - k).expand(*X.shape[:-2], -1, -1)], dim=-1)
            A = X - X.mH
            if self.orthogonal_map == _OrthMaps.matrix_exp:
                Q = matrix_exp(A)
            else:
                Id = eye(n, dtype=A.dtype, device=A.device)
                Q = solve(Id - 0.5 * A, Id + 0.5 * A)
            if n != k:
                Q = Q[..., :k]
        else:
            A = X.tril(diagonal=-1)
            tau = 2.0 / (1.0 + (A * A).sum(dim=-2))
            Q = householder_product(A, tau)
            Q = Q * X.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)
        if device.type != "cpu":
            Q = Q.to(device)
        if hasattr(self, "base"):
            Q = self.base @ Q
        if transposed:
            Q = Q.mT
        return Q

    def right_inverse(self, Q):
        """The X whose Q(X) is ``Q`` (see the class docstring): with use_trivialization, -I
        (``base`` becomes Q, orthogonalized when it is not orthogonal, and completed with
        random columns when it is not square); without it, only the householder map has an
        inverse: the reflectors of Q's QR factorization (geqrf), with R's signs on the
        diagonal."""
        with grad_mode.no_grad():
            if Q.shape != self.shape:
                raise ValueError(f"Expected a matrix or batch of matrices of shape {self.shape}. "
                                 f"Got a tensor of shape {Q.shape}.")
            Q_init = Q
            n, k = Q.shape[-2], Q.shape[-1]
            transpose = n < k
            if transpose:
                Q = Q.mT
                n, k = k, n
            if not hasattr(self, "base"):
                if self.orthogonal_map in (_OrthMaps.cayley, _OrthMaps.matrix_exp):
                    raise NotImplementedError("It is not possible to assign to the matrix exponential or the Cayley "
                                              "parametrizations when use_trivialization=False.")
                # LAPACK's geqrf (np.linalg.qr's "raw" mode, transposed): the reflectors below the
                # diagonal, R above; the diagonal becomes R's signs (-1 flipped to +1 where tau == 0:
                # that reflector is the identity), which forward multiplies back in
                q = Q.numpy(force=True)
                h, tau = np.linalg.qr(q, mode="raw")
                a = np.array(np.swapaxes(h, -1, -2), dtype=q.dtype)
                diag = np.sign(np.diagonal(a, axis1=-2, axis2=-1))
                diag = np.where(tau == 0.0, -diag, diag)
                idx = np.arange(k)
                a[..., idx, idx] = diag
                A = Tensor._wrap(a, None, 0)
                if A.device != Q.device:
                    A = A.to(Q.device)
                return A.mT if transpose else A
            if n == k:
                Q = _make_orthogonal(Q) if not _is_orthogonal(Q) else Q.clone()
            else:
                N = randn(*(tuple(Q.shape[:-2]) + (n, n - k)), dtype=Q.dtype)
                QN = np.concatenate([Q.numpy(force=True), N.numpy(force=True)], axis=-1)
                Q = _make_orthogonal(Tensor._wrap(QN, None, 0))
            if Q.device != Q_init.device:
                Q = Q.to(Q_init.device)
            self.base = Q
            # -I of Q_init's shape (made on the host: diagonal has no device kernel)
            neg_Id = zeros_like(Q_init.cpu())
            neg_Id.diagonal(dim1=-2, dim2=-1).fill_(-1.0)
            return neg_Id.to(Q_init.device)


def orthogonal(module, name="weight", orthogonal_map=None, *, use_trivialization=True):
    """Make ``module.<name>`` (a matrix, or a batch of them) orthogonal: Q^T Q = I for a tall
    (m >= n) matrix, Q Q^T = I for a wide one, as torch.nn.utils.parametrizations.orthogonal.

    ``orthogonal_map``: "matrix_exp", "cayley" or "householder" (see _Orthogonal); the default
    is "matrix_exp" for a square matrix, "householder" otherwise. With ``use_trivialization``
    (the default) the weight starts at its current value, orthogonalized by QR when it is not
    orthogonal, and ``module.parametrizations.<name>[0].base`` holds it. Returns the module."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of {weight.ndim} dimensions.")
    if orthogonal_map is None:
        orthogonal_map = "matrix_exp" if weight.shape[-2] == weight.shape[-1] else "householder"
    orth_enum = getattr(_OrthMaps, orthogonal_map, None) if isinstance(orthogonal_map, str) else None
    if orth_enum is None:
        raise ValueError('orthogonal_map has to be one of "matrix_exp", "cayley", "householder". '
                         f"Got: {orthogonal_map}")
    orth = _Orthogonal(weight, orth_enum, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module


class _WeightNorm(Module):
    """w = g * v / ||v||, the norm over every dim but ``dim`` (the whole tensor for dim None or
    -1), from the originals (g, v) = (original0, original1)."""

    def __init__(self, dim=0):
        super().__init__()
        if dim is None:
            dim = -1
        self.dim = dim

    def _norm_dim(self, v):
        return None if self.dim == -1 else self.dim % v.ndim

    def forward(self, weight_g, weight_v):
        return weight_v * (weight_g / _norm_except_dim(weight_v, self._norm_dim(weight_v)))

    def right_inverse(self, weight):
        return _norm_except_dim(weight, self._norm_dim(weight)), weight


def weight_norm(module, name="weight", dim=0):
    """Weight normalization as a parametrization: ``module.<name>`` = g * v / ||v||, trained
    as ``parametrizations.<name>.original0`` (g, the norms: size 1 on every dim but ``dim``)
    and ``original1`` (v, the direction), as torch.nn.utils.parametrizations.weight_norm.
    ``dim=None`` takes one norm over the whole tensor. A state_dict saved with the older
    ``nn.utils.weight_norm`` (keys ``<name>_g``, ``<name>_v``) still loads. Returns the
    module."""
    _weight_norm = _WeightNorm(dim)
    parametrize.register_parametrization(module, name, _weight_norm, unsafe=True)

    def _weight_norm_compat_hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                 error_msgs):
        g_key = f"{prefix}{name}_g"
        v_key = f"{prefix}{name}_v"
        if g_key in state_dict and v_key in state_dict:
            original0 = state_dict.pop(g_key)
            original1 = state_dict.pop(v_key)
            state_dict[f"{prefix}parametrizations.{name}.original0"] = original0
            state_dict[f"{prefix}parametrizations.{name}.original1"] = original1

    module._register_load_state_dict_pre_hook(_weight_norm_compat_hook)
    return module


class _SpectralNorm(Module):
    """W / sigma(W), sigma the largest singular value of W as a matrix (dim ``dim`` first, the
    rest flattened), estimated as u^T W v with the singular vectors u, v (buffers ``_u``, ``_v``)
    refined by ``n_power_iterations`` steps of the power method at each read in training mode
    (u = normalize(W v), v = normalize(W^T u), written into the buffers in place); in eval mode
    u and v are used as they are. A 1-d W is divided by its norm instead."""

    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12):
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [-{ndim}, {ndim - 1}] but got "
                             f"{dim})")
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            weight_mat = self._reshape_weight_to_matrix(weight)
            h, w = weight_mat.shape
            u = weight_mat.new_empty(h).normal_(0, 1)
            v = weight_mat.new_empty(w).normal_(0, 1)
            self.register_buffer("_u", F.normalize(u, dim=0, eps=self.eps))
            self.register_buffer("_v", F.normalize(v, dim=0, eps=self.eps))
            # start from good estimates of the singular vectors
            self._power_method(weight_mat, 15)

    def _reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.ndim) if d != self.dim))
        return weight.flatten(1)

    def _power_method(self, weight_mat, n_power_iterations):
        """Refine ``_u`` and ``_v`` in place (so replicas sharing the buffers see the update);
        forward reads clones, so a graph built by an earlier forward keeps its values."""
        with grad_mode.no_grad():
            for _ in range(n_power_iterations):
                self._u.copy_(F.normalize(mv(weight_mat, self._v), dim=0, eps=self.eps))
                self._v.copy_(F.normalize(mv(weight_mat.mH, self._u), dim=0, eps=self.eps))

    def forward(self, weight):
        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        weight_mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        u = self._u.clone()
        v = self._v.clone()
        sigma = dot(u, mv(weight_mat, v))
        return weight / sigma

    def right_inverse(self, value):
        return value


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Spectral normalization as a parametrization: ``module.<name>`` = W / sigma(W) (see
    _SpectralNorm), as torch.nn.utils.parametrizations.spectral_norm; the vectors are
    ``parametrizations.<name>[0]._u`` and ``._v``. ``dim`` (the output dim) defaults to 0, or 1
    for a ConvTranspose. Returns the module."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if isinstance(module, _ConvTransposeNd) else 0
    parametrize.register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module
