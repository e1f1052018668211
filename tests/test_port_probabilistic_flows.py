"""Normalizing flows as users write them, and the distributions' checks and regressions that the
probabilistic scripts turned up. The flows: RealNVP (masked affine couplings, a MultivariateNormal prior,
sampling by inverting) and a Glow-like flow (ActNorm, an LU-parametrised invertible linear map, a MADE layer,
slogdet, a checkpoint). They run through the harness of test_port_probabilistic_scripts.py: on minidl alone
against their own invariants, and with torch installed from the same weights, torch replaying minidl's draws.
Then: seeded reproducibility, shapes and argument checks, and one regression test per finding."""
import contextlib
import math
import os

import numpy as np
import pytest

import minidl
from test_port_probabilistic_scripts import _check_seeding, _compare_with_pytorch, _init, _np, _ns, _params, _run, _Tape


def _moons(n, seed):
    rng = np.random.default_rng(seed)
    th = rng.uniform(0, np.pi, n)
    upper = rng.integers(0, 2, n)
    xy = np.stack([np.where(upper, np.cos(th), 1 - np.cos(th)), np.where(upper, np.sin(th), 0.5 - np.sin(th))], 1)
    return (xy + 0.05 * rng.standard_normal((n, 2))).astype(np.float32)


# (3) RealNVP (the widespread two-moons notebook): masked affine couplings, a MultivariateNormal prior, the sum of
# log-determinants, sampling by inverting; an affine TransformedDistribution against the Gaussian it must equal --
def realnvp_script(torch, log, replay=None, iters=4):
    t = _ns(torch)
    nn, D = t.nn, t.D
    tape = _Tape(torch, replay)

    class RealNVP(nn.Module):
        def __init__(self, nets, nett, mask, prior):
            super(RealNVP, self).__init__()
            self.prior = prior
            self.mask = nn.Parameter(mask, requires_grad=False)
            self.t = torch.nn.ModuleList([nett() for _ in range(len(mask))])
            self.s = torch.nn.ModuleList([nets() for _ in range(len(mask))])

        def g(self, z):
            x = z
            for i in range(len(self.t)):
                x_ = x * self.mask[i]
                s = self.s[i](x_) * (1 - self.mask[i])
                t = self.t[i](x_) * (1 - self.mask[i])
                x = x_ + (1 - self.mask[i]) * (x * torch.exp(s) + t)
            return x

        def f(self, x):
            log_det_J, z = x.new_zeros(x.shape[0]), x
            for i in reversed(range(len(self.t))):
                z_ = self.mask[i] * z
                s = self.s[i](z_) * (1 - self.mask[i])
                t = self.t[i](z_) * (1 - self.mask[i])
                z = (1 - self.mask[i]) * (z - t) * torch.exp(-s) + z_
                log_det_J -= s.sum(dim=1)
            return z, log_det_J

        def log_prob(self, x):
            z, logp = self.f(x)
            return self.prior.log_prob(z) + logp

        def sample(self, batchSize):
            z = tape(lambda: self.prior.sample((batchSize, 1)))
            return self.g(z), self.prior.log_prob(z)

    nets = lambda: nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(), nn.Linear(16, 16), nn.LeakyReLU(),
                                 nn.Linear(16, 2), nn.Tanh())
    nett = lambda: nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(), nn.Linear(16, 16), nn.LeakyReLU(),
                                 nn.Linear(16, 2))
    masks = torch.from_numpy(np.array([[0, 1], [1, 0]] * 2).astype(np.float32))
    prior = D.MultivariateNormal(torch.zeros(2), torch.eye(2))
    flow = RealNVP(nets, nett, masks, prior)
    _init(torch, flow, 5, 0.2, skip=("mask",))
    optimizer = torch.optim.Adam([p for p in flow.parameters() if p.requires_grad == True], lr=1e-3)  # noqa: E712
    data = _moons(64, 1)
    out = {"loss": []}
    for it in range(iters):
        noisy = torch.from_numpy(data[it * 16:(it + 1) * 16])
        loss = -flow.log_prob(noisy).mean()
        optimizer.zero_grad()
        loss.backward(retain_graph=True)
        optimizer.step()
        out["loss"].append(loss.item())
        log('iter %s: loss = %.3f' % (it, loss.item()))
    with torch.no_grad():
        x = torch.from_numpy(data[:8])
        z, ld = flow.f(x)
        xs, logp = flow.sample(6)
        base = D.Independent(D.Normal(torch.zeros(2), torch.ones(2)), 1)
        shift, scale = torch.tensor([0.5, -0.25]), torch.tensor([2.0, 0.5])
        aff = D.TransformedDistribution(base, [D.AffineTransform(shift, scale, event_dim=1)])
        out.update(x=_np(x), recon=_np(flow.g(z)), ld=_np(ld), sample_x=_np(xs), sample_logp=_np(logp),
                   aff_lp=_np(aff.log_prob(x)),
                   mvn_lp=_np(D.MultivariateNormal(shift, torch.diag(scale ** 2)).log_prob(x)),
                   mask_grad=flow.mask.requires_grad,
                   n_params=sum(p.numel() for p in flow.parameters() if p.requires_grad))
    out.update(_params(flow), tape=tape.record)
    return out


# (4) a Glow-like flow: ActNorm with data-dependent init (a uint8 buffer flag), an LU-parametrised invertible
# linear map, a masked autoregressive (MADE) layer, TensorDataset/DataLoader, AdamW + cosine schedule,
# slogdet and an autograd Jacobian against the summed log-determinants, a checkpoint round trip ------------------
def glow_script(torch, log, replay=None, workdir=None, epochs=2):
    t = _ns(torch)
    nn, F, D = t.nn, t.F, t.D

    class ActNorm(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.loc = nn.Parameter(torch.zeros(1, dim))
            self.log_scale = nn.Parameter(torch.zeros(1, dim))
            self.register_buffer("initialized", torch.tensor(0, dtype=torch.uint8))

        def forward(self, x):
            if self.initialized.item() == 0:
                with torch.no_grad():
                    self.loc.data.copy_(-x.mean(0, keepdim=True))
                    self.log_scale.data.copy_(torch.log(1 / (x.std(0, keepdim=True) + 1e-6)))
                    self.initialized.fill_(1)
            return (x + self.loc) * torch.exp(self.log_scale), self.log_scale.sum().expand(x.shape[0])

        def inverse(self, z):
            return z * torch.exp(-self.log_scale) - self.loc

    class InvLinearLU(nn.Module):
        """W = P L U: P a fixed permutation, L unit lower triangular, U upper triangular with diagonal
        sign_s * exp(log_s), so log |det W| = sum(log_s)."""
        def __init__(self, perm):
            super().__init__()
            self.register_buffer("P", torch.eye(2)[perm])
            self.register_buffer("sign_s", torch.tensor([1.0, -1.0]))
            self.register_buffer("l_mask", torch.tril(torch.ones(2, 2), -1))
            self.register_buffer("eye", torch.eye(2))
            self.L = nn.Parameter(torch.tensor([[0.0, 0.0], [0.4, 0.0]]))
            self.log_s = nn.Parameter(torch.tensor([0.1, -0.2]))
            self.U = nn.Parameter(torch.tensor([[0.0, 0.3], [0.0, 0.0]]))

        def weight(self):
            L = self.L * self.l_mask + self.eye
            U = self.U * self.l_mask.T + torch.diag(self.sign_s * torch.exp(self.log_s))
            return self.P @ L @ U

        def forward(self, x):
            return x @ self.weight().t(), self.log_s.sum().expand(x.shape[0])

        def inverse(self, z):
            return z @ torch.inverse(self.weight()).t()

    class MaskedLinear(nn.Linear):
        def __init__(self, n_in, n_out, mask):
            super().__init__(n_in, n_out)
            self.register_buffer("mask", mask)

        def forward(self, x):
            return F.linear(x, self.mask * self.weight, self.bias)

    class MADE(nn.Module):
        """z_i = (x_i - mu_i(x_<i)) exp(-alpha_i(x_<i)) for two dims: the hidden units see x_1 only, and
        only the second dim's outputs read them (the first dim's are the biases alone)."""
        def __init__(self, hidden=8):
            super().__init__()
            m1 = torch.zeros(hidden, 2)
            m1[:, 0] = 1
            m2 = torch.zeros(4, hidden)
            m2[[1, 3]] = 1
            self.l1, self.l2 = MaskedLinear(2, hidden, m1), MaskedLinear(hidden, 4, m2)

        def _mu_alpha(self, x):
            mu, alpha = self.l2(F.elu(self.l1(x))).view(-1, 2, 2).unbind(1)
            return mu, torch.clamp(alpha, -3, 3)

        def forward(self, x):
            mu, alpha = self._mu_alpha(x)
            return (x - mu) * torch.exp(-alpha), -alpha.sum(dim=1)

        def inverse(self, z):
            x = torch.zeros_like(z)
            for i in range(2):
                mu, alpha = self._mu_alpha(x)
                x[:, i] = mu[:, i] + z[:, i] * torch.exp(alpha[:, i])
            return x

    class Flow(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([ActNorm(2), InvLinearLU([0, 1]), MADE(), ActNorm(2), InvLinearLU([1, 0]),
                                         MADE()])
            self.register_buffer("base_loc", torch.zeros(2))
            self.register_buffer("base_cov", torch.eye(2))

        @property
        def base(self):
            return D.MultivariateNormal(self.base_loc, self.base_cov)

        def forward(self, x):
            log_det = torch.zeros(x.shape[0])
            for layer in self.layers:
                x, ld = layer(x)
                log_det = log_det + ld
            return x, log_det

        def inverse(self, z):
            for layer in reversed(self.layers):
                z = layer.inverse(z)
            return z

    flow = Flow()
    _init(torch, flow, 13, 0.1, skip=("P", "sign_s", "mask", "eye", "base_", "L", "U", "log_s"))
    opt = t.optim.AdamW(flow.parameters(), lr=5e-3, weight_decay=1e-4)
    sched = t.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs * 3)
    X = torch.from_numpy(_moons(48, 2))
    loader = t.data.DataLoader(t.data.TensorDataset(X), batch_size=16, shuffle=False)
    out = {"loss": [], "slogdet": [], "lr": []}
    for epoch in range(epochs):
        for (xb,) in loader:
            z, log_det = flow(xb)
            loss = -(flow.base.log_prob(z) + log_det).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(flow.parameters(), max_norm=5.0)
            opt.step()
            sched.step()
            out["loss"].append(loss.item())
        sign, logabsdet = torch.linalg.slogdet(flow.layers[1].weight())
        out["slogdet"].append([sign.item(), logabsdet.item(), flow.layers[1].log_s.sum().item()])
        out["lr"].append(sched.get_last_lr()[0])
        log(f"epoch {epoch}: nll {loss.item():.4f} lr {sched.get_last_lr()[0]:.6f}")
    with torch.no_grad():
        z, ld = flow(X[:6])
        out.update(recon=_np(flow.inverse(z)), x=_np(X[:6]), z=_np(z), ld=_np(ld))
    jac = torch.autograd.functional.jacobian(lambda v: flow(v.unsqueeze(0))[0].squeeze(0), X[0])
    out["jac_logdet"] = torch.linalg.slogdet(jac)[1].item()
    out["initialized"] = [int(flow.layers[i].initialized) for i in (0, 3)]
    if workdir is not None:
        path = os.path.join(workdir, "flow.pt")
        torch.save({"model": flow.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict()}, path)
        ck = torch.load(path)
        flow2 = Flow()
        flow2.load_state_dict(ck["model"])
        with torch.no_grad():
            out["resume_equal"] = bool(torch.allclose(flow2(X[:6])[0], z))
        out["ck_init_dtype"] = str(ck["model"]["layers.0.initialized"].dtype).split(".")[-1]
        out["ck_last_epoch"] = ck["sched"]["last_epoch"]
    out.update(_params(flow), tape=[])
    return out


FLOWS = {"realnvp": realnvp_script, "glow": glow_script}


def _flow_sanity(name, out):
    assert len(out["loss"]) >= 3 and np.all(np.isfinite(out["loss"]))
    assert all(np.all(np.isfinite(v)) for k, v in out.items() if k.startswith("p."))
    assert out["warnings"] == [], out["warnings"]
    if name == "realnvp":
        np.testing.assert_allclose(out["recon"], out["x"], atol=1e-5)
        np.testing.assert_allclose(out["aff_lp"], out["mvn_lp"], rtol=1e-5)
        assert out["sample_x"].shape == (6, 1, 2) and out["sample_logp"].shape == (6, 1)
        assert out["mask_grad"] is False and out["n_params"] == 4 * 2 * (2 * 16 + 16 + 16 * 16 + 16 + 16 * 2 + 2)
    else:
        np.testing.assert_allclose(out["recon"], out["x"], atol=1e-4)
        assert abs(out["jac_logdet"] - out["ld"][0]) < 1e-3
        for sign, logabsdet, log_s in out["slogdet"]:
            assert sign == -1.0 and abs(logabsdet - log_s) < 1e-5
        assert out["initialized"] == [1, 1]
        assert all(b < a for a, b in zip(out["loss"][:3], out["loss"][3:]))   # each batch, one epoch later
        assert out["resume_equal"] and out["ck_init_dtype"] == "uint8" and out["ck_last_epoch"] == 6


@pytest.mark.parametrize("name", sorted(FLOWS))
def test_flow_runs_on_minidl_alone(name, tmp_path):
    _flow_sanity(name, _run(minidl, FLOWS[name], **({"workdir": str(tmp_path)} if name == "glow" else {})))


@pytest.mark.parametrize("name", sorted(FLOWS))
def test_flow_matches_pytorch_given_minidls_draws(name, tmp_path):
    torch = pytest.importorskip("torch")
    kw = [{"workdir": str(tmp_path / d)} if name == "glow" else {} for d in ("ours", "theirs")]
    for d in ("ours", "theirs"):
        (tmp_path / d).mkdir()
    _compare_with_pytorch(torch, FLOWS[name], *kw)


def test_realnvp_seeded_runs_repeat_exactly():
    _check_seeding(realnvp_script)


# seeded sampling, shapes and argument checks ----------------------------------------------------------------
def _draws(torch):
    D = torch.distributions
    return [D.Normal(torch.zeros(3), torch.ones(3)).sample((2,)), D.Categorical(logits=torch.zeros(4)).sample((5,)),
            D.Bernoulli(probs=torch.full((4,), 0.3)).sample(),
            D.MultivariateNormal(torch.zeros(2), torch.eye(2)).rsample((2,)),
            D.MixtureSameFamily(D.Categorical(logits=torch.zeros(3)),
                                D.Normal(torch.arange(3.), torch.ones(3))).sample((4,)),
            D.Beta(torch.tensor([2.]), torch.tensor([3.])).rsample((3,)), D.Dirichlet(torch.ones(3)).sample(),
            D.TransformedDistribution(D.Normal(0., 1.), [D.transforms.TanhTransform()]).rsample((2,)),
            torch.randperm(6), torch.multinomial(torch.tensor([0.2, 0.8]), 3, replacement=True)]


def _describe(draws):
    return [(str(d.dtype).split(".")[-1], tuple(d.shape)) for d in draws]


def test_manual_seed_replays_every_distributions_draws():
    md = minidl
    md.manual_seed(3)
    a = _draws(md)
    md.manual_seed(3)
    b = _draws(md)
    assert all(md.equal(x, y) for x, y in zip(a, b))
    state = md.get_rng_state()
    c = _draws(md)
    md.set_rng_state(state)
    assert all(md.equal(x, y) for x, y in zip(c, _draws(md)))
    md.manual_seed(3)
    with md.random.fork_rng():
        _draws(md)
    assert all(md.equal(x, y) for x, y in zip(a, _draws(md)))
    md.manual_seed(4)
    assert not all(md.equal(x, y) for x, y in zip(a, _draws(md)))
    assert _describe(a) == [("float32", (2, 3)), ("int64", (5,)), ("float32", (4,)), ("float32", (2, 2)),
                            ("float32", (4,)), ("float32", (3, 1)), ("float32", (3,)), ("float32", (2,)),
                            ("int64", (6,)), ("int64", (3,))]
    mu = md.zeros(2, requires_grad=True)
    assert not md.distributions.Normal(mu, 1.).sample().requires_grad
    md.distributions.Normal(mu, 1.).rsample().sum().backward()
    assert mu.grad.tolist() == [1.0, 1.0]


def test_seeded_draws_have_pytorchs_dtypes_and_shapes():
    torch = pytest.importorskip("torch")
    assert _describe(_draws(minidl)) == _describe(_draws(torch))


def _shape_and_check_cases(torch):
    D = torch.distributions
    t = torch.tensor
    N = D.Normal(t([0.0, 1.0]), t([1.0, 2.0]))
    C = D.Categorical(logits=t([[0.5, -1.0, 2.0], [0.0, 0.0, 0.0]]))
    M = D.MultivariateNormal(torch.zeros(2), torch.eye(2))
    mix = D.MixtureSameFamily(D.Categorical(logits=torch.zeros(2, 3)),
                              D.Independent(D.Normal(torch.zeros(2, 3, 2), torch.ones(2, 3, 2)), 1))
    return {
        "normal.shapes": lambda: (tuple(N.batch_shape), tuple(N.event_shape), tuple(N.sample((4, 1)).shape)),
        "normal.expand": lambda: (tuple(N.expand((3, 2)).batch_shape), tuple(N.expand((3, 2)).log_prob(t(0.)).shape)),
        "normal.expand_bad": lambda: N.expand((3,)),
        "normal.neg_scale": lambda: D.Normal(0., -1.),
        "normal.zero_scale": lambda: D.Normal(0., 0.),
        "normal.nan_value": lambda: N.log_prob(t([float("nan"), 0.])),
        "normal.bad_shape": lambda: N.log_prob(t([0.5, 0.5, 0.5])),
        "normal.not_tensor": lambda: N.log_prob([0.5, 0.5]),
        "normal.unchecked": lambda: D.Normal(0., -1., validate_args=False).scale.item(),
        "cat.shapes": lambda: (tuple(C.batch_shape), tuple(C.event_shape), tuple(C.sample((4, 5)).shape)),
        "cat.broadcast": lambda: tuple(C.log_prob(t([[0], [2], [1]])).shape),
        "cat.out_of_range": lambda: C.log_prob(t([3, 0])),
        "cat.fraction": lambda: C.log_prob(t([0.5, 0.0])),
        "cat.both": lambda: D.Categorical(probs=t([0.5, 0.5]), logits=t([0., 0.])),
        "cat.negative_probs": lambda: D.Categorical(probs=t([0.5, -0.1])),
        "bern.half": lambda: D.Bernoulli(logits=t([0.3, -2.0])).log_prob(t([0.5, 0.])),
        "bern.probs": lambda: D.Bernoulli(probs=t([1.5])),
        "ind.shapes": lambda: (tuple(D.Independent(N, 1).batch_shape), tuple(D.Independent(N, 1).event_shape)),
        "ind.too_many": lambda: D.Independent(N, 2),
        "ind.expand": lambda: tuple(D.Independent(N, 1).expand((4,)).batch_shape),
        "mvn.not_pd": lambda: D.MultivariateNormal(torch.zeros(2), t([[1., 2.], [2., 1.]])),
        "mvn.no_matrix": lambda: D.MultivariateNormal(torch.zeros(2)),
        "mvn.two_matrices": lambda: D.MultivariateNormal(torch.zeros(2), torch.eye(2), scale_tril=torch.eye(2)),
        "mvn.scalar_loc": lambda: D.MultivariateNormal(t(0.), torch.eye(2)),
        "mvn.wrong_event": lambda: M.log_prob(torch.zeros(3)),
        "mvn.expand": lambda: tuple(M.expand((3,)).log_prob(torch.zeros(3, 2)).shape),
        "mix.shapes": lambda: (tuple(mix.batch_shape), tuple(mix.event_shape), tuple(mix.sample((3,)).shape)),
        "mix.expand": lambda: tuple(mix.expand((4, 2)).batch_shape),
        "mix.k_mismatch": lambda: D.MixtureSameFamily(D.Categorical(logits=torch.zeros(2, 4)),
                                                      D.Normal(torch.zeros(2, 3), torch.ones(2, 3))),
        "mix.not_categorical": lambda: D.MixtureSameFamily(D.Normal(0., 1.), D.Normal(torch.zeros(3), torch.ones(3))),
        "uniform.outside": lambda: D.Uniform(0., 1.).log_prob(t(1.5)),
        "kl.missing": lambda: D.kl_divergence(D.Categorical(logits=torch.zeros(2)), N),
        "td.outside": lambda: D.TransformedDistribution(D.Normal(torch.zeros(2), torch.ones(2)),
                                                        [D.transforms.TanhTransform()]).log_prob(t([1.5, -0.9])),
    }


def _outcome(fn):
    try:
        return ("ok", fn())
    except Exception as e:   # the error's type is what the cases compare
        return ("raised", type(e))


def test_distribution_shapes_and_argument_checks():
    out = {k: _outcome(fn) for k, fn in _shape_and_check_cases(minidl).items()}
    assert out["normal.shapes"] == ("ok", ((2,), (), (4, 1, 2)))
    assert out["cat.shapes"] == ("ok", ((2,), (), (4, 5, 2))) and out["cat.broadcast"] == ("ok", (3, 2))
    assert out["mix.shapes"] == ("ok", ((2,), (2,), (3, 2, 2))) and out["mvn.expand"] == ("ok", (3,))
    assert out["normal.unchecked"] == ("ok", -1.0)
    for k in ("normal.neg_scale", "normal.zero_scale", "normal.nan_value", "normal.bad_shape", "normal.not_tensor",
              "cat.out_of_range", "cat.fraction", "cat.both", "cat.negative_probs", "bern.half", "bern.probs",
              "ind.too_many", "mvn.not_pd", "mvn.no_matrix", "mvn.two_matrices", "mvn.scalar_loc", "mvn.wrong_event",
              "mix.k_mismatch", "mix.not_categorical", "uniform.outside", "td.outside"):
        assert out[k][0] == "raised" and issubclass(out[k][1], ValueError), (k, out[k])
    assert out["kl.missing"][0] == "raised" and issubclass(out["kl.missing"][1], NotImplementedError)
    assert out["normal.expand_bad"][0] == "raised" and issubclass(out["normal.expand_bad"][1], RuntimeError)


@contextlib.contextmanager
def _validating(*frameworks):
    """Both frameworks at their default, validating distributions' arguments: the setting is
    process-wide in each, and another test in the same worker may have turned it off."""
    before = [fw.distributions.Distribution._validate_args for fw in frameworks]
    for fw in frameworks:
        fw.distributions.Distribution.set_default_validate_args(True)
    try:
        yield
    finally:
        for fw, value in zip(frameworks, before):
            fw.distributions.Distribution.set_default_validate_args(value)


def test_distribution_shapes_and_argument_checks_match_pytorch():
    torch = pytest.importorskip("torch")
    with _validating(minidl, torch):
        ours = {k: _outcome(fn) for k, fn in _shape_and_check_cases(minidl).items()}
        theirs = {k: _outcome(fn) for k, fn in _shape_and_check_cases(torch).items()}
    for k, (kind, value) in theirs.items():
        assert ours[k][0] == kind, (k, ours[k], theirs[k])
        if kind == "ok":
            assert ours[k][1] == value, k
        else:
            assert issubclass(ours[k][1], value), (k, ours[k], theirs[k])


# regressions these scripts turned up --------------------------------------------------------------------------
def _mixture_support_cases(torch):
    D = torch.distributions
    uniforms = D.MixtureSameFamily(D.Categorical(probs=torch.tensor([0.5, 0.5])),
                                   D.Uniform(torch.tensor([0., 0.]), torch.tensor([1., 3.])))
    vectors = D.MixtureSameFamily(D.Categorical(logits=torch.zeros(2, 3)),
                                  D.Independent(D.Normal(torch.zeros(2, 3, 2), torch.ones(2, 3, 2)), 1))
    support = uniforms.support
    return {"name": type(support).__name__, "repr": repr(support).replace(torch.__name__, "torch"),
            "event_dim": (support.event_dim, vectors.support.event_dim), "discrete": support.is_discrete,
            "check": support.check(torch.tensor([0.5, 2.0, -1.0])).tolist(),
            "check_vectors": tuple(vectors.support.check(torch.zeros(5, 2, 2)).shape),
            "inside_all": uniforms.log_prob(torch.tensor(0.5)).item(),
            "inside_one": _outcome(lambda: uniforms.log_prob(torch.tensor(2.0))),
            "too_few_dims": _outcome(lambda: vectors.support.check(torch.tensor(1.))),
            "wrapped": repr(D.constraints.MixtureSameFamilyConstraint(D.constraints.positive)),
            "not_a_constraint": _outcome(lambda: D.constraints.MixtureSameFamilyConstraint(3))}


def test_mixture_support_checks_a_value_against_every_component():
    """MixtureSameFamily.support is MixtureSameFamilyConstraint(component support): the value gets the
    component dim back and must lie in all K components' supports (not merely broadcast with them)."""
    out = _mixture_support_cases(minidl)
    assert out["name"] == "MixtureSameFamilyConstraint" and out["discrete"] is False
    assert out["repr"] == ("MixtureSameFamilyConstraint(Interval(lower_bound=tensor([0., 0.]), "
                           "upper_bound=tensor([1., 3.])))")
    assert out["event_dim"] == (0, 1) and out["check_vectors"] == (5, 2)
    assert out["check"] == [True, False, False]   # 2.0 lies in [0, 3] but not in [0, 1]
    assert abs(out["inside_all"] - math.log(0.5 + 0.5 / 3)) < 1e-6
    assert out["inside_one"] == ("raised", ValueError)
    assert out["too_few_dims"] == ("raised", IndexError)
    assert out["wrapped"] == "MixtureSameFamilyConstraint(GreaterThan(lower_bound=0.0))"
    assert out["not_a_constraint"] == ("raised", AssertionError)


def test_mixture_support_matches_pytorch():
    torch = pytest.importorskip("torch")
    with _validating(minidl, torch):
        ours, theirs = _mixture_support_cases(minidl), _mixture_support_cases(torch)
    assert ours.keys() == theirs.keys()
    for k in theirs:
        if k in ("inside_all",):
            assert abs(ours[k] - theirs[k]) < 1e-6
        elif isinstance(theirs[k], tuple) and theirs[k][:1] == ("raised",):
            assert ours[k][0] == "raised" and issubclass(ours[k][1], theirs[k][1]), k
        else:
            assert ours[k] == theirs[k], k


def _cache_cases(torch):
    D = torch.distributions
    Tr = D.transforms
    out = {}
    tanh = Tr.TanhTransform(cache_size=1)
    x = torch.tensor([0.3, 12.0, -11.0])
    y = tanh(x)
    out["inverse_is_x"] = tanh.inv(y) is x
    out["again_is_y"] = tanh(x) is y
    out["uncached_inverse_is_x"] = Tr.TanhTransform().inv(y) is x
    loc = torch.tensor([0.3, 12.0, -11.0], requires_grad=True)
    scale = torch.tensor([0.5, 0.1, 0.2], requires_grad=True)
    squashed = D.TransformedDistribution(D.Normal(loc, scale), [Tr.TanhTransform(cache_size=1)])
    pre = loc + scale * torch.tensor([0.2, -0.1, 0.4])     # a draw's pre-image, given
    act = squashed.transforms[0](pre)                       # as rsample pushes it through
    lp = squashed.log_prob(act)
    lp.sum().backward()
    out["log_prob"] = lp.detach().numpy().tolist()
    out["grads"] = loc.grad.numpy().tolist() + scale.grad.numpy().tolist()
    out["uncached_saturates"] = [bool(v) for v in torch.isfinite(
        D.TransformedDistribution(D.Normal(loc, scale), [Tr.TanhTransform()]).log_prob(act.detach())).tolist()]
    cached = Tr.ExpTransform().with_cache(1)
    out["with_cache"] = (type(cached).__name__, cached._cache_size, cached.with_cache(1) is cached,
                         Tr.ExpTransform().with_cache(0)._cache_size)
    aff = Tr.AffineTransform(1.0, 2.0).with_cache()
    out["affine_with_cache"] = (aff._cache_size, aff.loc, aff.scale)
    comp = Tr.ComposeTransform([Tr.AffineTransform(0., 2.), Tr.ExpTransform()], cache_size=1)
    v = torch.tensor([1.0])
    out["compose"] = (comp.inv(comp(v)) is v, [p._cache_size for p in comp.parts],
                      comp.with_cache(0)._cache_size, comp.with_cache(1) is comp)
    out["inverse_with_cache"] = Tr.TanhTransform().inv.with_cache(1)._cache_size
    independent = Tr.IndependentTransform(Tr.TanhTransform(), 1).with_cache()
    out["independent_with_cache"] = independent.base_transform._cache_size

    class Scaled(Tr.Transform):
        def __init__(self, a):
            super().__init__()
            self.a = a

    out["custom_init"] = _outcome(lambda: Scaled(2.0).with_cache(1))
    out["bad_size"] = _outcome(lambda: Tr.TanhTransform(cache_size=2))
    return out


# the uncached log_prob at saturation is NaN by design (atanh(1) = inf, inf - inf); NumPy reports it
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_a_cached_transform_inverts_its_own_output_exactly():
    """cache_size=1: a transform called on the same x returns the same y, and its inverse on that y
    returns that x. A squashed policy's log_prob of its own action then stays finite where tanh has
    rounded to +-1 (atanh(1) = inf without the cache), and the gradient flows through the draw."""
    out = _cache_cases(minidl)
    assert out["inverse_is_x"] and out["again_is_y"] and not out["uncached_inverse_is_x"]
    assert out["uncached_saturates"] == [True, False, False]
    assert np.all(np.isfinite(out["log_prob"])) and np.all(np.isfinite(out["grads"]))
    pre = np.array([0.3 + 0.5 * 0.2, 12.0 - 0.1 * 0.1, -11.0 + 0.2 * 0.4])
    scale = np.array([0.5, 0.1, 0.2])
    base = -0.5 * np.array([0.2, -0.1, 0.4]) ** 2 - np.log(scale) - 0.5 * np.log(2 * np.pi)
    log_det = 2 * (np.log(2) - pre - np.logaddexp(0, -2 * pre))    # log(1 - tanh(pre)**2), stably
    np.testing.assert_allclose(out["log_prob"], base - log_det, rtol=1e-5)
    assert out["with_cache"] == ("ExpTransform", 1, True, 0)
    assert out["affine_with_cache"] == (1, 1.0, 2.0)
    assert out["compose"] == (True, [1, 1], 0, True)
    assert out["inverse_with_cache"] == 1 and out["independent_with_cache"] == 1
    assert out["custom_init"] == ("raised", NotImplementedError)
    assert out["bad_size"] == ("raised", ValueError)


# the uncached log_prob at saturation is NaN by design (atanh(1) = inf, inf - inf); NumPy reports it
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_a_cached_transform_matches_pytorch():
    torch = pytest.importorskip("torch")
    ours, theirs = _cache_cases(minidl), _cache_cases(torch)
    for k in theirs:
        if k in ("log_prob", "grads"):
            np.testing.assert_allclose(ours[k], theirs[k], rtol=1e-5, atol=1e-6, err_msg=k)
        else:
            assert ours[k] == theirs[k], k


@pytest.mark.parametrize("shape", [(2.0,), (1, 2.5), ("3",), (np.float64(2.0),)])
def test_size_refuses_what_is_not_an_int(shape):
    """Size(...) takes ints (or anything with __index__) and names the first that is not; int() would
    have truncated 2.5 and read the string "3"."""
    with pytest.raises(TypeError, match=r"minidl\.Size\(\) takes an iterable of 'int' \(item \d is '"):
        minidl.Size(shape)
    with pytest.raises(TypeError, match="takes an iterable of 'int'"):
        minidl.distributions.Normal(minidl.zeros(2), 1.).sample(shape)


def test_size_takes_index_types_and_iterables():
    md = minidl
    assert md.Size((np.int64(2), md.tensor(3), True)) == (2, 3, 1)
    assert md.Size(n for n in (4, 5)) == (4, 5) and md.Size([]) == ()
    with pytest.raises(TypeError, match="item 1 is 'float'"):
        md.Size(n for n in (4, 5.0))
    with pytest.raises(TypeError, match="not iterable"):
        md.Size(3)
    assert tuple(md.distributions.Normal(md.zeros(2), 1.).sample(md.Size([3])).shape) == (3, 2)


def test_size_errors_match_pytorch():
    torch = pytest.importorskip("torch")
    for shape in [(2.0,), (1, 2.5), (np.float64(2.0),), (torch.tensor(2.0),)]:
        with pytest.raises(TypeError) as theirs:
            torch.Size(shape)
        ours_shape = tuple(minidl.tensor(2.0) if isinstance(s, torch.Tensor) else s for s in shape)
        with pytest.raises(TypeError) as ours:
            minidl.Size(ours_shape)
        assert str(ours.value).replace("minidl.Size", "torch.Size") == str(theirs.value)
