"""Small programs in PyTorch's idiom on the newer surface (minidl.linalg, minidl.special,
minidl.distributions, minidl.func, AdaptiveLogSoftmaxWithLoss), each run unchanged under both
frameworks by passing the framework module ``T`` (``torch`` or ``minidl``): a VAE, a
policy-gradient step, Gaussian-process regression, PCA/whitening with a Procrustes alignment,
least squares with a learnt ridge penalty, per-sample gradients, an adaptive-softmax language-model
head, a normalising flow and a probit/Poisson GLM.

Every bit of randomness comes from NumPy: data and initial weights are NumPy arrays loaded into
both frameworks, and the standard-normal noise behind ``rsample`` is a fixed NumPy sequence in
both (md.manual_seed and torch.manual_seed draw different numbers). Without torch each program
still runs on minidl and its torch-free properties are checked (a loss falls, a closed form
holds); with torch the two frameworks' losses per step, final parameters, gradients and the
shapes and dtypes of what they sample must agree."""
import importlib
import math
import types

import numpy as np
import pytest

import minidl


def _ns(T):
    name = T.__name__
    mod = {k: importlib.import_module(f"{name}.{k}") for k in ("nn", "nn.functional", "optim", "linalg", "special",
                                                              "distributions", "func")}
    return types.SimpleNamespace(T=T, nn=mod["nn"], F=mod["nn.functional"], optim=mod["optim"], la=mod["linalg"],
                                 sp=mod["special"], D=mod["distributions"], func=mod["func"])


def _np(t):
    return t.detach().numpy().copy()


def _fixed_normal_noise(T, monkeypatch, seed):
    """Normal.rsample's standard noise becomes a fixed NumPy sequence, identical in both frameworks."""
    rng = np.random.default_rng(seed)
    normal = importlib.import_module(f"{T.__name__}.distributions.normal")

    def standard_normal(shape, dtype, device):
        return T.tensor(rng.standard_normal(tuple(shape)), dtype=dtype)
    monkeypatch.setattr(normal, "_standard_normal", standard_normal)


def _load(T, module, arrays):
    module.load_state_dict({k: T.tensor(v) for k, v in arrays.items()})


def _init_like(shapes, seed, scale=0.3):
    rng = np.random.default_rng(seed)
    return {k: (scale * rng.standard_normal(s)).astype(np.float32) for k, s in shapes.items()}


# (1) VAE on binary 8x8 images: Normal.rsample, kl_divergence to the prior, Bernoulli(logits).log_prob,
# Independent for the event dims, Adam.
def vae_program(T, d, monkeypatch):
    t = _ns(T)
    _fixed_normal_noise(T, monkeypatch, 1)

    class VAE(t.nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = t.nn.Linear(64, 16)
            self.head = t.nn.Linear(16, 2 * 4)
            self.dec = t.nn.Sequential(t.nn.Linear(4, 16), t.nn.Tanh(), t.nn.Linear(16, 64))

        def forward(self, x):
            mu, logvar = self.head(T.tanh(self.enc(x))).chunk(2, dim=-1)
            q = t.D.Normal(mu, (0.5 * logvar).exp())
            z = q.rsample()
            px = t.D.Independent(t.D.Bernoulli(logits=self.dec(z)), 1)
            kl = t.D.kl_divergence(q, t.D.Normal(T.zeros_like(mu), T.ones_like(mu))).sum(-1)
            return -px.log_prob(x) + kl, q, px, kl

    model = VAE()
    _load(T, model, d["init"])
    opt = t.optim.Adam(model.parameters(), lr=1e-2)
    x = T.tensor(d["x"])
    losses = []
    for _ in range(6):
        neg_elbo, q, px, kl = model(x)
        loss = neg_elbo.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(_np(loss))
    with T.no_grad():
        z = q.rsample((3,))
    out = {"losses": np.stack(losses), "kl": _np(kl), "mu": _np(q.loc), "scale": _np(q.scale), "z": _np(z),
           "px_mean": _np(px.mean), "grad_enc": _np(model.enc.weight.grad)}
    out.update({k: _np(v) for k, v in model.state_dict().items()})
    draws = px.sample((2,))
    out["sample_meta"] = (tuple(draws.shape), str(draws.dtype).split(".")[-1], tuple(px.batch_shape),
                          tuple(px.event_shape), bool(((draws == 0) | (draws == 1)).all()))
    return out


def _vae_data():
    rng = np.random.default_rng(0)
    shapes = {"enc.weight": (16, 64), "enc.bias": (16,), "head.weight": (8, 16), "head.bias": (8,),
              "dec.0.weight": (16, 4), "dec.0.bias": (16,), "dec.2.weight": (64, 16), "dec.2.bias": (64,)}
    return {"x": (rng.uniform(size=(10, 64)) < 0.3).astype(np.float32), "init": _init_like(shapes, 1)}


def _vae_check(out, d):
    assert out["losses"][-1] < out["losses"][0]
    mu, var = out["mu"].astype(np.float64), out["scale"].astype(np.float64) ** 2
    np.testing.assert_allclose(out["kl"], 0.5 * (mu ** 2 + var - 1 - np.log(var)).sum(-1), rtol=1e-4, atol=1e-6)
    # rsample is mu + eps * scale with eps the seventh draw of the fixed noise sequence (six training steps)
    rng = np.random.default_rng(1)
    for _ in range(6):
        rng.standard_normal((10, 4))
    eps = rng.standard_normal((3, 10, 4))
    np.testing.assert_allclose(out["z"], out["mu"] + eps * out["scale"], rtol=1e-5, atol=1e-6)
    assert out["sample_meta"] == ((2, 10, 64), "float32", (10,), (64,), True)


# (2) policy-gradient (REINFORCE) updates with an entropy bonus: episode returns summed with
# index_put(accumulate=True), Categorical(logits).log_prob and entropy, sample shapes; SGD with momentum.
def policy_program(T, d, monkeypatch):
    t = _ns(T)
    policy = t.nn.Sequential(t.nn.Linear(6, 12), t.nn.ReLU(), t.nn.Linear(12, 4))
    _load(T, policy, d["init"])
    opt = t.optim.SGD(policy.parameters(), lr=0.1, momentum=0.9)
    obs, actions, rewards, episode = (T.tensor(d[k]) for k in ("obs", "actions", "rewards", "episode"))
    totals = T.zeros(4).index_put((episode,), rewards, accumulate=True)     # each episode's return
    returns = totals[episode]
    losses, entropies = [], []
    for _ in range(4):
        dist = t.D.Categorical(logits=policy(obs))
        adv = returns - returns.mean()
        logp = dist.log_prob(actions)
        loss = -(logp * adv).mean() - 0.05 * dist.entropy().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(_np(loss))
        entropies.append(_np(dist.entropy().mean()))
    a = dist.sample((5,))
    logp_a = dist.log_prob(a)
    out = {"totals": _np(totals), "logp_a_shape": tuple(logp_a.shape), "losses": np.stack(losses),
           "entropy": np.stack(entropies), "probs": _np(dist.probs),
           "logp": _np(logp), "logits": _np(dist.logits), "grad": _np(policy[2].weight.grad)}
    out.update({k: _np(v) for k, v in policy.state_dict().items()})
    out["sample_meta"] = (tuple(a.shape), str(a.dtype).split(".")[-1], bool(((a >= 0) & (a < 4)).all()))
    return out


def _policy_data():
    rng = np.random.default_rng(2)
    shapes = {"0.weight": (12, 6), "0.bias": (12,), "2.weight": (4, 12), "2.bias": (4,)}
    return {"obs": rng.standard_normal((16, 6)).astype(np.float32), "actions": rng.integers(0, 4, 16),
            "rewards": rng.standard_normal(16).astype(np.float32), "episode": np.repeat(np.arange(4), 4),
            "init": _init_like(shapes, 3, 0.5)}


def _policy_check(out, d):
    p = out["probs"].astype(np.float64)
    logits = out["logits"].astype(np.float64)
    np.testing.assert_allclose(p.sum(-1), 1.0, rtol=1e-6)
    log_softmax = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    np.testing.assert_allclose(out["logp"], log_softmax[np.arange(16), d["actions"]], rtol=1e-5, atol=1e-6)
    assert out["losses"][-1] < out["losses"][0]
    assert out["sample_meta"] == ((5, 16), "int64", True) and out["logp_a_shape"] == (5, 16)
    np.testing.assert_allclose(out["totals"], d["rewards"].reshape(4, 4).sum(1), rtol=1e-6)


# (3) Gaussian-process regression in float64: the negative log marginal likelihood through
# cholesky, cholesky_solve and logdet (the noise added with diagonal_scatter), its hyperparameters
# fitted by Adam; the predictive mean and covariance, the same likelihood as a MultivariateNormal.
def gp_program(T, d, monkeypatch):
    t = _ns(T)
    X, y, Xs = (T.tensor(d[k]) for k in ("X", "y", "Xs"))
    log_ls, log_sf, log_sn = (T.tensor(v, dtype=T.float64, requires_grad=True) for v in (0.0, 0.0, -1.0))
    opt = t.optim.Adam([log_ls, log_sf, log_sn], lr=0.1)
    n = X.shape[0]

    def kernel(A, B):
        return (2 * log_sf).exp() * T.exp(-0.5 * T.cdist(A, B) ** 2 / (2 * log_ls).exp())

    def gram():
        Kxx = kernel(X, X)
        return T.diagonal_scatter(Kxx, Kxx.diagonal() + (2 * log_sn).exp())

    losses = []
    for _ in range(6):
        K = gram()
        L = t.la.cholesky(K)
        alpha = T.cholesky_solve(y.unsqueeze(-1), L)
        nll = 0.5 * (y.unsqueeze(-1) * alpha).sum() + 0.5 * T.logdet(K) + 0.5 * n * math.log(2 * math.pi)
        opt.zero_grad()
        nll.backward()
        opt.step()
        losses.append(_np(nll))
    out = {"losses": np.stack(losses), "hyper": np.array([log_ls.item(), log_sf.item(), log_sn.item()]),
           "grad": np.array([log_ls.grad.item(), log_sf.grad.item(), log_sn.grad.item()])}
    with T.no_grad():
        Ks = kernel(Xs, X)
        mean = (Ks @ alpha).squeeze(-1)
        v = t.la.solve_triangular(L, Ks.mT, upper=False)
        cov = kernel(Xs, Xs) - v.mT @ v + 1e-6 * T.eye(Xs.shape[0], dtype=T.float64)
    opt.zero_grad()
    prior = t.D.MultivariateNormal(T.zeros(n, dtype=T.float64), covariance_matrix=gram())
    mvn_lp = prior.log_prob(y)
    mvn_lp.backward()
    post = t.D.MultivariateNormal(mean, covariance_matrix=cov)
    draws = post.sample((2,))
    out.update(mean=_np(mean), var=_np(cov.diagonal()), K=_np(K), L=_np(L), alpha=_np(alpha), logdet=T.logdet(K).item(),
               mvn_lp=mvn_lp.item(), mvn_grad=np.array([log_ls.grad.item(), log_sf.grad.item(), log_sn.grad.item()]),
               post_lp=post.log_prob(T.tensor(d["ys"])).item(), post_entropy=post.entropy().item(),
               draw_meta=(tuple(draws.shape), str(draws.dtype).split(".")[-1]))
    return out


def _gp_data():
    rng = np.random.default_rng(4)
    X = rng.uniform(-3, 3, (20, 1))
    Xs = np.linspace(-3, 3, 7)[:, None]
    return {"X": X, "y": np.sin(X[:, 0]) + 0.1 * rng.standard_normal(20), "Xs": Xs, "ys": np.sin(Xs[:, 0])}


def _gp_check(out, d):
    assert out["losses"][-1] < out["losses"][0]
    K, L = out["K"], out["L"]
    np.testing.assert_allclose(L @ L.T, K, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(out["logdet"], 2 * np.log(np.diag(L)).sum(), rtol=1e-10)
    np.testing.assert_allclose(K @ out["alpha"][:, 0], d["y"], rtol=1e-8, atol=1e-10)
    assert (out["var"] > 0).all()
    # the prior MultivariateNormal's log-density of y at the fitted hyperparameters is minus the next nll
    ls, sf, sn = np.exp(out["hyper"])
    X, y = d["X"], d["y"]
    K = sf ** 2 * np.exp(-0.5 * (X - X.T) ** 2 / ls ** 2) + sn ** 2 * np.eye(20)
    ref = -0.5 * y @ np.linalg.solve(K, y) - 0.5 * np.linalg.slogdet(K)[1] - 10 * np.log(2 * np.pi)
    np.testing.assert_allclose(out["mvn_lp"], ref, rtol=1e-10)
    assert out["mvn_lp"] > -out["losses"][-1]
    assert out["draw_meta"] == ((2, 7), "float64")
    np.testing.assert_allclose(out["mean"][1:-1], d["ys"][1:-1], atol=0.2)   # interpolation, not the edges


# (4) PCA and whitening through eigh and svd, then an orthogonal Procrustes alignment; only
# gauge-invariant quantities (eigen/singular values, projectors, the rotation) and gradients of them.
def pca_program(T, d, monkeypatch):
    t = _ns(T)
    X = T.tensor(d["X"], requires_grad=True)
    A, B = T.tensor(d["A"], requires_grad=True), T.tensor(d["B"])
    Xc = X - X.mean(0, keepdim=True)
    cov = Xc.mT @ Xc / (X.shape[0] - 1)
    evals, evecs = t.la.eigh(cov)
    U, S, Vh = t.la.svd(Xc, full_matrices=False)
    top = evecs[:, -2:]
    projector = top @ top.mT
    white = Xc @ evecs / evals.sqrt()
    white_cov = white.mT @ white / (X.shape[0] - 1)
    u, _, vh = T.linalg.svd(A.mT @ B)
    R = u @ vh
    signal = T.tensor(d["signal"], requires_grad=True)
    hankel = signal.as_strided((signal.shape[0] - 4, 5), (1, 1))          # rows are sliding windows of 5
    ssa = t.la.svdvals(hankel)
    loss = ((A @ R - B) ** 2).sum() + evals[-2:].sum() + (projector * T.tensor(d["W"])).sum() + S.sum() + ssa[:2].sum()
    loss.backward()
    return {"hankel": _np(hankel), "ssa": _np(ssa), "g_signal": _np(signal.grad), "evals": _np(evals), "S": _np(S),
            "projector": _np(projector), "white_cov": _np(white_cov),
            "R": _np(R), "loss": loss.item(), "gX": _np(X.grad), "gA": _np(A.grad),
            "svdvals": _np(t.la.svdvals(Xc)), "eigvalsh": _np(t.la.eigvalsh(cov))}


def _pca_data():
    rng = np.random.default_rng(5)
    X = rng.standard_normal((40, 5)) @ np.diag([3.0, 2.0, 1.5, 1.0, 0.5]) @ rng.standard_normal((5, 5))
    A = rng.standard_normal((30, 3))
    R_true, _ = np.linalg.qr(rng.standard_normal((3, 3)))
    return {"signal": np.sin(np.arange(30) * 0.4) + 0.1 * rng.standard_normal(30), "X": X, "A": A,
            "B": A @ R_true + 0.05 * rng.standard_normal((30, 3)), "W": rng.standard_normal((5, 5)),
            "R_true": R_true}


def _pca_check(out, d):
    Xc = d["X"] - d["X"].mean(0)
    np.testing.assert_allclose(out["evals"], np.linalg.eigvalsh(np.cov(Xc.T)), rtol=1e-10)
    np.testing.assert_allclose(np.sort(out["S"] ** 2 / 39), out["evals"], rtol=1e-10)
    np.testing.assert_allclose(out["white_cov"], np.eye(5), atol=1e-10)
    np.testing.assert_allclose(out["R"] @ out["R"].T, np.eye(3), atol=1e-12)
    np.testing.assert_allclose(out["R"], d["R_true"], atol=0.05)
    np.testing.assert_allclose(out["svdvals"], out["S"], rtol=1e-12)
    H = np.lib.stride_tricks.sliding_window_view(d["signal"], 5)
    np.testing.assert_array_equal(out["hankel"], H)
    u, s, vh = np.linalg.svd(H, full_matrices=False)
    np.testing.assert_allclose(out["ssa"], s, rtol=1e-10)
    # d(s1 + s2)/dH = U_2 V_2^T, summed over the windows that share each sample
    gH = u[:, :2] @ vh[:2]
    g = np.zeros(30)
    for i in range(26):
        g[i:i + 5] += gH[i]
    np.testing.assert_allclose(out["g_signal"], g, rtol=1e-8, atol=1e-10)


# (5) least squares: lstsq, pinv and the normal equations agree; a ridge penalty exp(log_lam) is then
# learnt by gradient descent on a held-out loss through linalg.solve (a bilevel fit).
def lstsq_program(T, d, monkeypatch):
    t = _ns(T)
    A, b = T.tensor(d["A"], requires_grad=True), T.tensor(d["b"], requires_grad=True)
    sol = t.la.lstsq(A, b).solution
    via_pinv = t.la.pinv(A) @ b
    via_normal = t.la.solve(A.mT @ A, A.mT @ b)
    (sol ** 2).sum().backward()
    out = {"sol": _np(sol), "pinv": _np(via_pinv), "normal": _np(via_normal), "gA": _np(A.grad), "gb": _np(b.grad),
           "resid": _np(((A @ sol - b) ** 2).sum(0))}
    Atr, btr, Ava, bva = (T.tensor(d[k]) for k in ("Atr", "btr", "Ava", "bva"))
    log_lam = T.tensor(1.0, dtype=T.float64, requires_grad=True)
    opt = t.optim.SGD([log_lam], lr=0.5)
    losses = []
    for _ in range(5):
        w = t.la.solve(Atr.mT @ Atr + log_lam.exp() * T.eye(Atr.shape[1], dtype=T.float64), Atr.mT @ btr)
        val = ((Ava @ w - bva) ** 2).mean()
        opt.zero_grad()
        val.backward()
        opt.step()
        losses.append(_np(val))
    out.update(losses=np.stack(losses), log_lam=log_lam.item(), g_lam=log_lam.grad.item(),
               det=t.la.det(Atr.mT @ Atr).item(), rank=int(t.la.matrix_rank(Atr)))
    return out


def _lstsq_data():
    rng = np.random.default_rng(6)
    A = rng.standard_normal((30, 4))
    Atr, Ava = rng.standard_normal((12, 8)), rng.standard_normal((30, 8))
    w = rng.standard_normal(8)
    return {"A": A, "b": A @ rng.standard_normal((4, 2)) + 0.1 * rng.standard_normal((30, 2)), "Atr": Atr,
            "btr": Atr @ w + 0.5 * rng.standard_normal(12), "Ava": Ava, "bva": Ava @ w}


def _lstsq_check(out, d):
    ref = np.linalg.lstsq(d["A"], d["b"], rcond=None)[0]
    for k in ("sol", "pinv", "normal"):
        np.testing.assert_allclose(out[k], ref, rtol=1e-9, atol=1e-12, err_msg=k)
    np.testing.assert_allclose(out["gb"], 2 * np.linalg.pinv(d["A"]).T @ ref, rtol=1e-9, atol=1e-12)
    assert out["losses"][-1] < out["losses"][0]
    assert out["rank"] == 8


# (6) per-sample gradients: vmap(grad(loss)) over functional_call, checked against a loop of
# backward passes, then a DP-SGD style update (per-sample clipping); jacrev and vjp of the model.
def per_sample_program(T, d, monkeypatch):
    t = _ns(T)
    model = t.nn.Sequential(t.nn.Linear(5, 8), t.nn.Tanh(), t.nn.Linear(8, 3))
    _load(T, model, d["init"])
    params = {k: v.detach() for k, v in model.named_parameters()}
    X, Y = T.tensor(d["x"]), T.tensor(d["y"])

    def loss_fn(p, x, y):
        return t.F.cross_entropy(t.func.functional_call(model, p, (x.unsqueeze(0),)), y.unsqueeze(0))

    per = t.func.vmap(t.func.grad(loss_fn), in_dims=(None, 0, 0))(params, X, Y)
    loop = {}
    for i in range(X.shape[0]):
        model.zero_grad()
        loss_fn(dict(model.named_parameters()), X[i], Y[i]).backward()
        for k, v in model.named_parameters():
            loop.setdefault(k, []).append(_np(v.grad))
    norms = T.stack([g.flatten(1).norm(dim=1) for g in per.values()]).norm(dim=0)
    factor = (1.0 / norms).clamp(max=1.0)
    new = {k: params[k] - 0.1 * (per[k] * factor.reshape(-1, *[1] * (per[k].dim() - 1))).mean(0) for k in params}
    jac = t.func.jacrev(lambda x: t.func.functional_call(model, params, (x,)))(X[0])
    out_vjp, fn_vjp = t.func.vjp(lambda x: t.func.functional_call(model, params, (x,)), X[:3])
    (g_vjp,) = fn_vjp(T.ones_like(out_vjp))
    # an ensemble of three copies with perturbed weights, evaluated in one vmap over their stacked state
    copies = []
    for i in range(3):
        m = t.nn.Sequential(t.nn.Linear(5, 8), t.nn.Tanh(), t.nn.Linear(8, 3))
        _load(T, m, {k: v * (1.0 + 0.1 * i) for k, v in d["init"].items()})
        copies.append(m)
    stacked, buffers = t.func.stack_module_state(copies)
    ens = t.func.vmap(lambda p, b, x: t.func.functional_call(model, (p, b), (x,)),
                      in_dims=(0, 0, None))(stacked, buffers, X)
    ens.logsumexp(-1).sum().backward()
    out = {"ens": _np(ens), "ens_grad": _np(stacked["2.weight"].grad)}
    out.update({f"per.{k}": _np(v) for k, v in per.items()})
    out.update({f"loop.{k}": np.stack(v) for k, v in loop.items()})
    out.update({f"new.{k}": _np(v) for k, v in new.items()})
    out.update(norms=_np(norms), jac=_np(jac), g_vjp=_np(g_vjp))
    return out


def _per_sample_data():
    rng = np.random.default_rng(7)
    shapes = {"0.weight": (8, 5), "0.bias": (8,), "2.weight": (3, 8), "2.bias": (3,)}
    return {"x": rng.standard_normal((6, 5)).astype(np.float32), "y": rng.integers(0, 3, 6),
            "init": _init_like(shapes, 8, 0.6)}


def _per_sample_check(out, d):
    for k in ("0.weight", "0.bias", "2.weight", "2.bias"):
        np.testing.assert_allclose(out[f"per.{k}"], out[f"loop.{k}"], rtol=1e-5, atol=1e-7, err_msg=k)
    assert out["jac"].shape == (3, 5) and out["g_vjp"].shape == (3, 5)
    np.testing.assert_allclose(out["g_vjp"][0], out["jac"].sum(0), rtol=1e-5, atol=1e-7)   # 1^T J
    W0 = {k: v.astype(np.float64) for k, v in d["init"].items()}
    for i in range(3):
        c = 1 + 0.1 * i
        h = np.tanh(d["x"] @ (c * W0["0.weight"].T) + c * W0["0.bias"])
        np.testing.assert_allclose(out["ens"][i], h @ (c * W0["2.weight"].T) + c * W0["2.bias"], rtol=1e-4, atol=1e-5)
    norms = np.sqrt(sum((out[f"per.{k}"].reshape(6, -1) ** 2).sum(1) for k in ("0.weight", "0.bias", "2.weight",
                                                                               "2.bias")))
    np.testing.assert_allclose(out["norms"], norms, rtol=1e-5)


# (7) a language-model head with AdaptiveLogSoftmaxWithLoss over a context of three tokens mixed by
# F.multi_head_attention_forward (its own parameters, a key-padding mask), trained with Adam;
# log_prob over the vocabulary and predict.
def adaptive_program(T, d, monkeypatch):
    t = _ns(T)

    class LM(t.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = t.nn.Embedding(20, 8)
            self.in_proj_weight = t.nn.Parameter(T.empty(24, 8))
            self.in_proj_bias = t.nn.Parameter(T.empty(24))
            self.out_proj = t.nn.Linear(8, 8)
            self.proj = t.nn.Linear(8, 8)
            self.head = t.nn.AdaptiveLogSoftmaxWithLoss(8, 20, cutoffs=[5, 12], div_value=2.0)

        def forward(self, tokens, targets):
            e = self.emb(tokens).transpose(0, 1)                   # (3, B, 8): the previous tokens
            a, w = t.F.multi_head_attention_forward(
                e[-1:], e, e, 8, 2, self.in_proj_weight, self.in_proj_bias, None, None, False, 0.0,
                self.out_proj.weight, self.out_proj.bias, training=self.training, key_padding_mask=tokens == 0)
            h = T.tanh(self.proj(a[0] + e[-1]))
            return self.head(h, targets), h, w

    model = LM()
    _load(T, model, d["init"])
    opt = t.optim.Adam(model.parameters(), lr=0.05)
    tokens, targets = T.tensor(d["tokens"]), T.tensor(d["targets"])
    losses = []
    for _ in range(5):
        res, h, _ = model(tokens, targets)
        opt.zero_grad()
        res.loss.backward()
        opt.step()
        losses.append(_np(res.loss))
    with T.no_grad():
        res, h, w = model(tokens, targets)
        logp = model.head.log_prob(h)
        pred = model.head.predict(h)
    out = {"losses": np.stack(losses), "output": _np(res.output), "loss": res.loss.item(), "logp": _np(logp),
           "pred": _np(pred), "attn": _np(w), "keys": list(model.state_dict())}
    out.update({k: _np(v) for k, v in model.state_dict().items()})
    # the key third of the in-projection bias adds a constant to each softmax row: its gradient is zero up to
    # rounding, which Adam's normalised step turns into noise; the rest must agree
    out["in_proj_bias"] = np.delete(out["in_proj_bias"], np.s_[8:16])
    return out


def _adaptive_data():
    rng = np.random.default_rng(9)
    shapes = {"emb.weight": (20, 8), "in_proj_weight": (24, 8), "in_proj_bias": (24,), "out_proj.weight": (8, 8),
              "out_proj.bias": (8,), "proj.weight": (8, 8), "proj.bias": (8,), "head.head.weight": (7, 8),
              "head.tail.0.0.weight": (4, 8), "head.tail.0.1.weight": (7, 4), "head.tail.1.0.weight": (2, 8),
              "head.tail.1.1.weight": (8, 2)}
    tokens = rng.integers(0, 20, (24, 3))
    tokens[:5, 0] = 0                                              # token 0 pads: masked out as a key
    tokens[:, 2] = np.where(tokens[:, 2] == 0, 1, tokens[:, 2])
    return {"tokens": tokens, "targets": (tokens[:, 1] * 3 + tokens[:, 2]) % 20, "init": _init_like(shapes, 10, 0.5)}


def _adaptive_check(out, d):
    assert out["losses"][-1] < out["losses"][0]
    lp = out["logp"].astype(np.float64)
    np.testing.assert_allclose(np.exp(lp).sum(-1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(out["output"], lp[np.arange(24), d["targets"]], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["loss"], -out["output"].mean(), rtol=1e-6)
    np.testing.assert_array_equal(out["pred"], lp.argmax(-1))
    attn = out["attn"]                                             # (B, 1, 3), averaged over the heads
    assert attn.shape == (24, 1, 3)
    np.testing.assert_allclose(attn.sum(-1), 1.0, rtol=1e-5)
    assert (attn[:, 0][d["tokens"] == 0] == 0).all()


# (8) a normalising flow Normal -> Affine -> Tanh fitted by maximum likelihood, plus a probit/Poisson
# GLM whose likelihood uses special.log_ndtr, special.gammaln and special.xlogy.
def flow_glm_program(T, d, monkeypatch):
    t = _ns(T)
    _fixed_normal_noise(T, monkeypatch, 11)
    loc = T.zeros(2, requires_grad=True)
    log_scale = T.zeros(2, requires_grad=True)
    w = T.zeros(3, dtype=T.float64, requires_grad=True)
    v = T.zeros(3, dtype=T.float64, requires_grad=True)
    opt = t.optim.Adam([loc, log_scale, w, v], lr=0.1)
    x, Z, yb, yc = (T.tensor(d[k]) for k in ("x", "Z", "yb", "yc"))
    flow_losses, glm_losses = [], []
    def make_flow():
        return t.D.TransformedDistribution(t.D.Normal(T.zeros(2), T.ones(2)),
                                           [t.D.AffineTransform(loc, log_scale.exp()), t.D.TanhTransform(cache_size=1)])

    for _ in range(6):
        flow = make_flow()
        flow_nll = -flow.log_prob(x).sum(-1).mean()
        s = (2 * yb - 1) * (Z @ w)
        rate_log = Z @ v
        poisson_ll = t.sp.xlogy(yc, rate_log.exp()) - rate_log.exp() - t.sp.gammaln(yc + 1)
        glm_nll = -t.sp.log_ndtr(s).mean() - poisson_ll.mean()
        opt.zero_grad()
        (flow_nll + glm_nll).backward()
        opt.step()
        flow_losses.append(_np(flow_nll))
        glm_losses.append(_np(glm_nll))
    flow = make_flow()
    y = flow.rsample((4,))
    (y.sum()).backward()
    return {"flow_losses": np.stack(flow_losses), "glm_losses": np.stack(glm_losses), "loc": _np(loc),
            "log_scale": _np(log_scale), "w": _np(w), "v": _np(v), "y": _np(y), "g_loc": _np(loc.grad),
            "logp_grid": _np(flow.log_prob(T.tensor(d["grid"]))), "ndtr": _np(t.sp.ndtr(s)),
            "log_ndtr": _np(t.sp.log_ndtr(s))}


def _flow_glm_data():
    rng = np.random.default_rng(12)
    Z = np.concatenate([np.ones((40, 1)), rng.standard_normal((40, 2))], 1)
    return {"x": np.tanh(0.5 + 0.7 * rng.standard_normal((50, 2))).astype(np.float32), "Z": Z,
            "yb": (Z @ [0.3, 1.0, -1.0] + rng.standard_normal(40) > 0).astype(np.float64),
            "yc": rng.poisson(np.exp(Z @ [0.5, 0.3, -0.2])).astype(np.float64),
            "grid": np.array([[-0.9, 0.0], [0.2, 0.5], [0.95, -0.3]], np.float32)}


def _flow_glm_check(out, d):
    assert out["flow_losses"][-1] < out["flow_losses"][0] and out["glm_losses"][-1] < out["glm_losses"][0]
    assert out["y"].shape == (4, 2) and (np.abs(out["y"]) < 1).all()
    np.testing.assert_allclose(np.exp(out["log_ndtr"]), out["ndtr"], rtol=1e-12)
    # the flow's density by the change of variables: z = (atanh(x) - loc) / scale
    g = d["grid"].astype(np.float64)
    scale = np.exp(out["log_scale"].astype(np.float64))
    z = (np.arctanh(g) - out["loc"]) / scale
    ref = -0.5 * z ** 2 - 0.5 * np.log(2 * np.pi) - np.log(scale) - np.log1p(-g ** 2)
    np.testing.assert_allclose(out["logp_grid"], ref, rtol=1e-4, atol=1e-5)


PROGRAMS = {
    "vae": (vae_program, _vae_data, _vae_check),
    "policy_gradient": (policy_program, _policy_data, _policy_check),
    "gaussian_process": (gp_program, _gp_data, _gp_check),
    "pca_procrustes": (pca_program, _pca_data, _pca_check),
    "least_squares": (lstsq_program, _lstsq_data, _lstsq_check),
    "per_sample_grads": (per_sample_program, _per_sample_data, _per_sample_check),
    "adaptive_softmax_lm": (adaptive_program, _adaptive_data, _adaptive_check),
    "flow_and_glm": (flow_glm_program, _flow_glm_data, _flow_glm_check),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_runs_on_minidl_and_its_closed_forms_hold(name, monkeypatch):
    program, make_data, check = PROGRAMS[name]
    d = make_data()
    check(program(minidl, d, monkeypatch), d)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_matches_pytorch(name, monkeypatch):
    torch = pytest.importorskip("torch")
    program, make_data, _ = PROGRAMS[name]
    ref = program(torch, make_data(), monkeypatch)
    got = program(minidl, make_data(), monkeypatch)
    assert list(got) == list(ref)
    for key, want in ref.items():
        have = got[key]
        if isinstance(want, np.ndarray):
            assert have.dtype == want.dtype and have.shape == want.shape, (key, have.dtype, want.dtype)
            tol = dict(rtol=1e-9, atol=1e-11) if want.dtype == np.float64 else dict(rtol=2e-4, atol=2e-5)
            np.testing.assert_allclose(have, want, err_msg=key, **tol)
        elif isinstance(want, float):
            np.testing.assert_allclose(have, want, rtol=1e-6, err_msg=key)
        else:
            assert have == want, key
