"""Probabilistic models and RL as users write them with torch.distributions, condensed to tiny sizes and
a few steps: PPO (CleanRL's loop) on a hand-written corridor with a Categorical and with a diagonal
Gaussian policy; a tanh-squashed Gaussian actor (SAC's log-det correction, also through
TransformedDistribution); a VAE written with Normal/Bernoulli/Independent and kl_divergence; a mixture
density network (MixtureSameFamily). The flows, the distribution checks and the regressions are in
test_port_probabilistic_flows.py, which runs its scripts through the harness here.

Each script takes the framework module, so it ports by changing ``import torch`` alone. Random
streams differ between the frameworks, so minidl's draws (actions, noise, permutations, samples) are
recorded on a tape and replayed into torch as tensors: from the same weights both must then compute
the same log-probabilities, entropies, KLs, losses and final parameters. Without torch every script
still runs and its results are checked against closed forms and against each other."""
import importlib
import math
import re
import types
import warnings

import numpy as np
import pytest

import minidl


def _ns(torch):
    name = torch.__name__
    return types.SimpleNamespace(nn=importlib.import_module(f"{name}.nn"),
                                 F=importlib.import_module(f"{name}.nn.functional"),
                                 optim=importlib.import_module(f"{name}.optim"),
                                 data=importlib.import_module(f"{name}.utils.data"),
                                 D=importlib.import_module(f"{name}.distributions"))


def _np(t):
    return t.detach().numpy().copy()


def _init(torch, model, seed, scale=0.3, skip=()):
    """Load the same pseudo-random weights into either framework's model (by state_dict order); the
    entries whose name contains one of ``skip`` (masks, fixed buffers) keep their values."""
    rng = np.random.default_rng(seed)
    arrays = {}
    for k, v in model.state_dict().items():
        a = v.detach().numpy()
        fresh = a.dtype.kind == "f" and not any(s in k for s in skip)
        arrays[k] = (rng.standard_normal(a.shape) * scale).astype(a.dtype) if fresh else a.copy()
    model.load_state_dict({k: torch.from_numpy(v) for k, v in arrays.items()})


def _params(model):
    return {"p." + k: _np(v) for k, v in model.state_dict().items()}


class _Tape:
    """Records each draw on the first run; hands the recorded values back, in order, on a replay."""

    def __init__(self, torch, replay=None):
        self.torch, self.replay, self.record = torch, replay, []

    def __call__(self, draw):
        if self.replay is None:
            value = draw()
            self.record.append(_np(value))
            return value
        return self.torch.from_numpy(self.replay.pop(0).copy())


class Corridor:
    """Six cells; the agent starts in cell 2 and moves left or right; +1 for reaching cell 5, -0.1 a
    step, at most 10 steps. Observation: one-hot cell, time, a little noise."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def reset(self):
        self.pos, self.t = 2, 0
        return self._obs()

    def _obs(self):
        cell = np.eye(6, dtype=np.float32)[self.pos]
        return np.concatenate([cell, [self.t / 10.0, self.rng.standard_normal() * 0.1]]).astype(np.float32)

    def step(self, a):
        self.pos = min(5, max(0, self.pos + (1 if a == 1 else -1)))
        self.t += 1
        return self._obs(), 1.0 if self.pos == 5 else -0.1, self.pos == 5 or self.t >= 10


# (1) PPO: CleanRL's rollout buffers, GAE by a reversed loop, clipped surrogate and value loss, randperm
# minibatches, advantage normalisation, clip_grad_norm_, Adam(eps=1e-5) with lr annealing ---------------------
def ppo_script(torch, log, replay=None, continuous=False, updates=2):
    t = _ns(torch)
    nn, F, D = t.nn, t.F, t.D
    tape = _Tape(torch, replay)
    num_steps, obs_dim, n_act = 16, 8, 2
    gamma, gae_lambda, clip_coef, ent_coef, vf_coef, max_grad_norm = 0.99, 0.95, 0.2, 0.01, 0.5, 0.5
    minibatch, epochs, lr = 8, 2, 2.5e-3

    def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
        torch.nn.init.orthogonal_(layer.weight, std)
        torch.nn.init.constant_(layer.bias, bias_const)
        return layer

    class Agent(nn.Module):
        def __init__(self):
            super().__init__()
            self.critic = nn.Sequential(layer_init(nn.Linear(obs_dim, 16)), nn.Tanh(),
                                        layer_init(nn.Linear(16, 1), std=1.0))
            self.actor = nn.Sequential(layer_init(nn.Linear(obs_dim, 16)), nn.Tanh(),
                                       layer_init(nn.Linear(16, 1 if continuous else n_act), std=0.01))
            if continuous:
                self.actor_logstd = nn.Parameter(torch.zeros(1, 1))

        def get_value(self, x):
            return self.critic(x)

        def get_action_and_value(self, x, action=None):
            if continuous:
                action_mean = self.actor(x)
                action_std = torch.exp(self.actor_logstd.expand_as(action_mean))
                probs = D.Independent(D.Normal(action_mean, action_std), 1)
            else:
                probs = D.Categorical(logits=self.actor(x))
            if action is None:
                action = tape(lambda: probs.sample())
            return action, probs.log_prob(action), probs.entropy(), self.critic(x)

    agent = Agent()
    _init(torch, agent, 3)
    optimizer = t.optim.Adam(agent.parameters(), lr=lr, eps=1e-5)
    env = Corridor(7)
    obs = torch.zeros((num_steps, obs_dim))
    actions = torch.zeros((num_steps, 1)) if continuous else torch.zeros((num_steps,))
    logprobs, rewards = torch.zeros((num_steps,)), torch.zeros((num_steps,))
    dones, values = torch.zeros((num_steps,)), torch.zeros((num_steps,))
    next_obs, next_done = torch.Tensor(env.reset()), torch.zeros(1)
    out = {k: [] for k in ("pg", "v", "ent", "kl", "old_kl", "gn", "clipfrac", "ev", "lr", "adv", "returns",
                           "rewards", "values", "dones", "next_value", "next_done")}
    out["logstd0"] = _np(agent.actor_logstd) if continuous else None
    for update in range(1, updates + 1):
        frac = 1.0 - (update - 1.0) / updates
        optimizer.param_groups[0]["lr"] = frac * lr
        for step in range(num_steps):
            obs[step] = next_obs
            dones[step] = next_done
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs.unsqueeze(0))
                values[step] = value.flatten()
            actions[step] = action.squeeze(0) if continuous else action
            logprobs[step] = logprob
            a = action.item()
            o, reward, done = env.step(int(a > 0) if continuous else a)
            if done:
                o = env.reset()
            rewards[step] = torch.tensor(reward).view(-1)
            next_obs, next_done = torch.Tensor(o), torch.Tensor([float(done)])
        with torch.no_grad():
            next_value = agent.get_value(next_obs.unsqueeze(0)).reshape(1, -1)
            advantages = torch.zeros_like(rewards)
            lastgaelam = 0
            for t_ in reversed(range(num_steps)):
                if t_ == num_steps - 1:
                    nextnonterminal = 1.0 - next_done
                    nextvalues = next_value
                else:
                    nextnonterminal = 1.0 - dones[t_ + 1]
                    nextvalues = values[t_ + 1]
                delta = rewards[t_] + gamma * nextvalues * nextnonterminal - values[t_]
                advantages[t_] = lastgaelam = delta + gamma * gae_lambda * nextnonterminal * lastgaelam
            returns = advantages + values
        for k, v in (("adv", advantages), ("returns", returns), ("rewards", rewards), ("values", values),
                     ("dones", dones), ("next_value", next_value), ("next_done", next_done)):
            out[k].append(_np(v))
        b_obs, b_logprobs = obs.reshape((-1, obs_dim)), logprobs.reshape(-1)
        b_actions = actions.reshape((-1, 1)) if continuous else actions.reshape(-1)
        b_advantages, b_returns, b_values = advantages.reshape(-1), returns.reshape(-1), values.reshape(-1)
        clipfracs = []
        for epoch in range(epochs):
            b_inds = tape(lambda: torch.randperm(num_steps))
            for start in range(0, num_steps, minibatch):
                mb_inds = b_inds[start:start + minibatch]
                _, newlogprob, entropy, newvalue = agent.get_action_and_value(
                    b_obs[mb_inds], b_actions[mb_inds] if continuous else b_actions.long()[mb_inds])
                logratio = newlogprob - b_logprobs[mb_inds]
                ratio = logratio.exp()
                with torch.no_grad():
                    old_approx_kl = (-logratio).mean()
                    approx_kl = ((ratio - 1) - logratio).mean()
                    clipfracs += [((ratio - 1.0).abs() > clip_coef).float().mean().item()]
                mb_advantages = b_advantages[mb_inds]
                mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)
                pg_loss1 = -mb_advantages * ratio
                pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)
                pg_loss = torch.max(pg_loss1, pg_loss2).mean()
                newvalue = newvalue.view(-1)
                if continuous:   # the plain variant: smooth L1 to the returns, no value clipping
                    v_loss = F.smooth_l1_loss(newvalue, b_returns[mb_inds])
                else:
                    v_loss_unclipped = (newvalue - b_returns[mb_inds]) ** 2
                    v_clipped = b_values[mb_inds] + torch.clamp(newvalue - b_values[mb_inds], -clip_coef, clip_coef)
                    v_loss_clipped = (v_clipped - b_returns[mb_inds]) ** 2
                    v_loss = 0.5 * torch.max(v_loss_unclipped, v_loss_clipped).mean()
                entropy_loss = entropy.mean()
                loss = pg_loss - ent_coef * entropy_loss + v_loss * vf_coef
                optimizer.zero_grad()
                loss.backward()
                grad_norm = nn.utils.clip_grad_norm_(agent.parameters(), max_grad_norm)
                optimizer.step()
                for k, v in (("pg", pg_loss), ("v", v_loss), ("ent", entropy_loss), ("kl", approx_kl),
                             ("old_kl", old_approx_kl), ("gn", grad_norm)):
                    out[k].append(v.item())
        y_pred, y_true = b_values.cpu().numpy(), b_returns.cpu().numpy()
        var_y = np.var(y_true)
        explained_var = np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y
        out["ev"].append(float(explained_var))
        out["clipfrac"].append(float(np.mean(clipfracs)))
        out["lr"].append(optimizer.param_groups[0]["lr"])
        log(f"update={update} value_loss={v_loss.item():.5f} policy_loss={pg_loss.item():.5f} "
            f"entropy={entropy_loss.item():.5f} approx_kl={approx_kl.item():.6f} ev={explained_var:.4f}")
    out.update(_params(agent), tape=tape.record)
    return out


# (2) a tanh-squashed Gaussian actor (SAC): log pi = log N(x) - log(scale (1 - tanh(x)**2) + 1e-6), and the same
# law as TransformedDistribution(Independent(Normal), [TanhTransform(cache_size=1), AffineTransform]) ----------
def squashed_policy_script(torch, log, replay=None):
    t = _ns(torch)
    nn, F, D = t.nn, t.F, t.D
    tape = _Tape(torch, replay)
    LOG_STD_MIN, LOG_STD_MAX = -5, 2

    class Actor(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(3, 16), nn.Linear(16, 16)
            self.fc_mean, self.fc_logstd = nn.Linear(16, 2), nn.Linear(16, 2)
            self.register_buffer("action_scale", torch.tensor([2.0, 0.5], dtype=torch.float32))
            self.register_buffer("action_bias", torch.tensor([0.0, 0.5], dtype=torch.float32))

        def forward(self, x):
            x = F.relu(self.fc2(F.relu(self.fc1(x))))
            log_std = torch.tanh(self.fc_logstd(x))
            return self.fc_mean(x), LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (log_std + 1)

        def get_action(self, x):
            mean, log_std = self(x)
            std = log_std.exp()
            normal = D.Normal(mean, std)
            eps = tape(lambda: (normal.rsample() - mean).detach() / std.detach())
            x_t = mean + std * eps
            y_t = torch.tanh(x_t)
            action = y_t * self.action_scale + self.action_bias
            log_prob = normal.log_prob(x_t)
            log_prob -= torch.log(self.action_scale * (1 - y_t.pow(2)) + 1e-6)
            log_prob = log_prob.sum(1, keepdim=True)
            squashed = D.TransformedDistribution(
                D.Independent(D.Normal(mean, std), 1),
                [D.transforms.TanhTransform(cache_size=1),
                 D.transforms.AffineTransform(self.action_bias, self.action_scale, event_dim=1)])
            return action, log_prob, torch.tanh(mean) * self.action_scale + self.action_bias, squashed

    actor = Actor()
    _init(torch, actor, 11, skip=("action_",))
    opt = t.optim.Adam(list(actor.parameters()), lr=3e-3)
    alpha, obs_rng = 0.2, np.random.default_rng(4)
    out = {"loss": [], "logp": [], "logp_td": [], "act": [], "ent": [], "mean_act": []}
    for it in range(3):
        obs = torch.tensor(obs_rng.standard_normal((5, 3)), dtype=torch.float32)
        action, log_prob, mean_action, squashed = actor.get_action(obs)
        q = -((action - torch.tensor([1.0, 0.25])) ** 2).sum(-1, keepdim=True)   # a critic's stand-in
        loss = ((alpha * log_prob) - q).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            out["logp_td"].append(_np(squashed.log_prob(action.detach())))
            out["ent"].append(_np(squashed.base_dist.entropy()))
        out["loss"].append(loss.item())
        out["logp"].append(_np(log_prob))
        out["act"].append(_np(action))
        out["mean_act"].append(_np(mean_action))
        log("iter {} loss {:.4f} mean logp {:.4f}".format(it, loss.item(), log_prob.mean().item()))
    out["support"] = repr(squashed.support)
    out["shapes"] = [tuple(squashed.batch_shape), tuple(squashed.event_shape)]
    out.update(_params(actor), tape=tape.record)
    return out


# (5) a VAE in distributions: q = Normal(mu, std) with rsample, p(x|z) = Independent(Bernoulli(logits), 1),
# kl_divergence against the prior beside the closed form, an importance weight from the same z ---------------
def vae_dist_script(torch, log, replay=None, iters=3):
    t = _ns(torch)
    nn, F, D = t.nn, t.F, t.D
    tape = _Tape(torch, replay)

    class VAE(nn.Module):
        def __init__(self, x_dim=12, z_dim=3):
            super().__init__()
            self.enc = nn.Sequential(nn.Linear(x_dim, 16), nn.ReLU())
            self.mu, self.logvar = nn.Linear(16, z_dim), nn.Linear(16, z_dim)
            self.dec = nn.Sequential(nn.Linear(z_dim, 16), nn.ReLU(), nn.Linear(16, x_dim))

        def forward(self, x):
            h = self.enc(x)
            mu, logvar = self.mu(h), self.logvar(h)
            std = torch.exp(0.5 * logvar)
            q = D.Normal(mu, std)
            eps = tape(lambda: ((q.rsample() - mu) / std).detach())
            z = mu + std * eps
            return D.Independent(D.Bernoulli(logits=self.dec(z)), 1), q, z, mu, logvar

    model = VAE()
    _init(torch, model, 21, 0.3)
    optimizer = t.optim.Adam(model.parameters(), lr=1e-2)
    data = (np.random.default_rng(3).uniform(size=(24, 12)) < 0.3).astype(np.float32)
    prior = D.Normal(torch.zeros(3), torch.ones(3))
    out = {"loss": [], "kl": [], "kl_closed": [], "kl_ind": [], "rec": [], "rec_bce": [], "logw": []}
    for it in range(iters):
        x = torch.from_numpy(data[it * 8:(it + 1) * 8])
        p_x, q, z, mu, logvar = model(x)
        rec = -p_x.log_prob(x).sum()
        kl = D.kl_divergence(q, prior).sum()
        kl_ind = D.kl.kl_divergence(D.Independent(q, 1), D.Independent(D.Normal(torch.zeros_like(mu),
                                                                                  torch.ones_like(mu)), 1))
        kl_closed = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        loss = (rec + kl) / x.size(0)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            out["logw"].append(_np(p_x.log_prob(x) + prior.log_prob(z).sum(-1) - q.log_prob(z).sum(-1)))
        out["rec_bce"].append(F.binary_cross_entropy_with_logits(p_x.base_dist.logits, x, reduction="sum").item())
        for k, v in (("loss", loss), ("kl", kl), ("kl_closed", kl_closed), ("rec", rec)):
            out[k].append(v.item())
        out["kl_ind"].append(_np(kl_ind))
        log(f"it {it}: loss={loss.item():.4f} kl={kl.item():.4f}")
    qi = D.Independent(q, 1)
    out["shapes"] = [tuple(p_x.batch_shape), tuple(p_x.event_shape), tuple(q.batch_shape), tuple(q.event_shape),
                     tuple(qi.batch_shape), tuple(qi.event_shape), tuple(p_x.mean.shape)]
    out["ent"] = _np(qi.entropy())
    out["std"] = _np(q.stddev)
    out.update(_params(model), tape=tape.record)
    return out


# (6) a mixture density network: MixtureSameFamily(Categorical(logits), Independent(Normal(mu, sigma), 1)), its
# nll beside a logsumexp by hand, samples, mean and variance --------------------------------------------------
def mdn_script(torch, log, replay=None, iters=4):
    t = _ns(torch)
    nn, F, D = t.nn, t.F, t.D
    tape = _Tape(torch, replay)
    K, out_dim = 3, 2

    class MDN(nn.Module):
        def __init__(self):
            super().__init__()
            self.hidden = nn.Sequential(nn.Linear(1, 16), nn.Tanh())
            self.pi, self.mu, self.sigma = nn.Linear(16, K), nn.Linear(16, K * out_dim), nn.Linear(16, K * out_dim)

        def forward(self, x):
            h = self.hidden(x)
            mu = self.mu(h).view(-1, K, out_dim)
            sigma = F.softplus(self.sigma(h)).view(-1, K, out_dim) + 1e-3
            return D.MixtureSameFamily(D.Categorical(logits=self.pi(h)), D.Independent(D.Normal(mu, sigma), 1))

    model = MDN()
    _init(torch, model, 31, 0.4)
    optimizer = t.optim.RMSprop(model.parameters(), lr=5e-3)
    rng = np.random.default_rng(8)
    xs = rng.uniform(-1, 1, (40, 1)).astype(np.float32)
    ys = np.concatenate([np.sin(3 * xs), np.cos(3 * xs) * np.sign(rng.standard_normal((40, 1)))], 1)
    ys = (ys + 0.05 * rng.standard_normal(ys.shape)).astype(np.float32)
    out = {"loss": [], "manual": []}
    for it in range(iters):
        x, y = torch.from_numpy(xs[it * 10:(it + 1) * 10]), torch.from_numpy(ys[it * 10:(it + 1) * 10])
        gmm = model(x)
        loss = -gmm.log_prob(y).mean()
        comp = gmm.component_distribution.base_dist
        comp_lp = D.Normal(comp.loc, comp.scale).log_prob(y.unsqueeze(1)).sum(-1)
        manual = -torch.logsumexp(torch.log_softmax(gmm.mixture_distribution.logits, -1) + comp_lp, dim=-1).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        out["loss"].append(loss.item())
        out["manual"].append(manual.item())
        log("it %d nll %.5f" % (it, loss.item()))
    with torch.no_grad():
        gmm = model(torch.linspace(-1, 1, 5).unsqueeze(1))
        s = tape(lambda: gmm.sample((7,)))
        out.update(s_lp=_np(gmm.log_prob(s)), mean=_np(gmm.mean), var=_np(gmm.variance),
                   shapes=[tuple(gmm.batch_shape), tuple(gmm.event_shape), tuple(s.shape)],
                   probs=_np(gmm.mixture_distribution.probs), support=repr(gmm.support))
        cm = gmm.component_distribution
        w = gmm.mixture_distribution.probs.unsqueeze(-1)
        out["mean_by_hand"] = _np((w * cm.mean).sum(1))
        out["var_by_hand"] = _np((w * (cm.variance + cm.mean ** 2)).sum(1) - (w * cm.mean).sum(1) ** 2)
    out.update(_params(model), tape=tape.record)
    return out


SCRIPTS = {"ppo": ppo_script, "ppo_gaussian": lambda torch, log, **kw: ppo_script(torch, log, continuous=True, **kw),
           "squashed": squashed_policy_script, "vae": vae_dist_script, "mdn": mdn_script}


def _run(torch, script, seed=0, **kw):
    """Run ``script`` under ``torch`` (either framework) from ``seed``, with its log lines and warnings."""
    lines = []
    torch.manual_seed(seed)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = script(torch, lines.append, **kw)
    out["printed"] = "\n".join(lines)
    out["warnings"] = [str(w.message) for w in caught]
    return out


def _compare_with_pytorch(torch, script, ours_kw=None, theirs_kw=None):
    """minidl runs first; torch replays its tape of draws; every recorded value must agree."""
    ours = _run(minidl, script, **(ours_kw or {}))
    tape = [a.copy() for a in ours["tape"]]
    theirs = _run(torch, script, replay=tape, **(theirs_kw or {}))
    assert tape == []   # every draw replayed
    theirs["tape"] = ours["tape"]
    _assert_same(ours, theirs)


def _check_seeding(script):
    """The same seed repeats a run bit for bit; another seed draws other values."""
    first, again, other = (_run(minidl, script, seed=s) for s in (5, 5, 6))
    _assert_same(first, again, rtol=0, atol=0)
    assert any(not np.array_equal(a, b) for a, b in zip(first["tape"], other["tape"]))


_NUMBER = re.compile(r"-?\d+\.?\d*(?:e[-+]?\d+)?")


def _assert_same(ours, theirs, key="", rtol=2e-4, atol=2e-5):
    """Equal structure; numbers (also those inside printed text) equal within the tolerance."""
    if isinstance(theirs, dict):
        assert sorted(ours) == sorted(theirs), key
        for k in theirs:
            _assert_same(ours[k], theirs[k], f"{key}.{k}", rtol, atol)
    elif isinstance(theirs, str):
        assert _NUMBER.sub("#", ours) == _NUMBER.sub("#", theirs), (key, ours, theirs)
        np.testing.assert_allclose([float(v) for v in _NUMBER.findall(ours)],
                                   [float(v) for v in _NUMBER.findall(theirs)], rtol=rtol, atol=atol, err_msg=key)
    elif isinstance(theirs, (list, tuple)) and not all(isinstance(v, (int, float)) for v in theirs):
        assert len(ours) == len(theirs), key
        for i, (a, b) in enumerate(zip(ours, theirs)):
            _assert_same(a, b, f"{key}[{i}]", rtol, atol)
    elif theirs is None or isinstance(theirs, bool):
        assert ours is theirs, key
    else:
        a, b = np.asarray(ours), np.asarray(theirs)
        assert a.shape == b.shape and a.dtype == b.dtype, (key, a.shape, b.shape, a.dtype, b.dtype)
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=key)


def _gae(rewards, values, dones, next_value, next_done, gamma=0.99, lam=0.95):
    """GAE(gamma, lambda) written forward, as a sum of discounted TD errors (no reversed recursion)."""
    n = len(rewards)
    nonterminal = 1.0 - np.append(dones[1:], next_done)
    next_values = np.append(values[1:], next_value)
    deltas = rewards + gamma * next_values * nonterminal - values
    adv = np.zeros(n)
    for t in range(n):
        weight = 1.0
        for k in range(t, n):
            adv[t] += weight * deltas[k]
            weight *= gamma * lam * nonterminal[k]
    return adv


def _sanity(name, out):
    losses = "pg" if name.startswith("ppo") else "loss"
    assert len(out[losses]) >= 3 and np.all(np.isfinite(out[losses]))
    assert all(np.all(np.isfinite(v)) for k, v in out.items() if k.startswith("p."))
    assert out["warnings"] == [], out["warnings"]
    if name.startswith("ppo"):
        np.testing.assert_allclose(out["lr"], [2.5e-3, 1.25e-3])
        for adv, ret, r, v, d, nv, nd in zip(*(out[k] for k in ("adv", "returns", "rewards", "values", "dones",
                                                                 "next_value", "next_done"))):
            np.testing.assert_allclose(adv, _gae(r, v, d, nv.item(), nd.item()), rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(ret, adv + v, rtol=1e-6, atol=1e-6)
        # the first minibatch sees the rollout's own policy: ratio 1, both KL estimates 0
        assert abs(out["kl"][0]) < 1e-6 and abs(out["old_kl"][0]) < 1e-6
        assert min(out["kl"]) > -1e-7   # (r - 1) - log r >= 0
        assert all(0 < g for g in out["gn"]) and all(0 <= c <= 1 for c in out["clipfrac"])
        if name == "ppo":
            assert all(0 < e <= math.log(2) + 1e-6 for e in out["ent"])   # a 2-way Categorical
        else:   # a 1-D Gaussian with std exp(logstd): 0.5 log(2 pi e) + logstd, before the first step
            np.testing.assert_allclose(out["ent"][0], 0.5 * math.log(2 * math.pi * math.e) + out["logstd0"].item(),
                                       rtol=1e-5)
    elif name == "squashed":
        for lp, lp_td, act in zip(out["logp"], out["logp_td"], out["act"]):
            np.testing.assert_allclose(lp[:, 0], lp_td, atol=2e-3)   # the + 1e-6 inside the log is all that differs
            assert np.all(np.abs(act - [0.0, 0.5]) <= [2.0, 0.5])
        assert out["shapes"] == [(5,), (2,)]
        assert out["support"] == "IndependentConstraint(Real(), 1)"   # the last transform's codomain
    elif name == "vae":
        np.testing.assert_allclose(out["kl"], out["kl_closed"], rtol=1e-5)
        np.testing.assert_allclose(out["rec"], out["rec_bce"], rtol=1e-5)
        np.testing.assert_allclose(out["kl_ind"][-1].sum(), out["kl"][-1], rtol=1e-5)
        assert out["shapes"] == [(8,), (12,), (8, 3), (), (8,), (3,), (8, 12)]
        np.testing.assert_allclose(out["ent"], (0.5 * np.log(2 * np.pi * np.e * out["std"] ** 2)).sum(-1), rtol=1e-5)
    elif name == "mdn":
        np.testing.assert_allclose(out["loss"], out["manual"], rtol=1e-5)
        np.testing.assert_allclose(out["mean"], out["mean_by_hand"], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(out["var"], out["var_by_hand"], rtol=1e-4, atol=1e-6)
        assert out["shapes"] == [(5,), (2,), (7, 5, 2)] and np.all(np.isfinite(out["s_lp"]))
        assert out["support"] == "MixtureSameFamilyConstraint(IndependentConstraint(Real(), 1))"


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_script_runs_on_minidl_alone(name):
    _sanity(name, _run(minidl, SCRIPTS[name]))


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_script_matches_pytorch_given_minidls_draws(name):
    _compare_with_pytorch(pytest.importorskip("torch"), SCRIPTS[name])


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_seeded_runs_repeat_exactly_and_another_seed_draws_otherwise(name):
    _check_seeding(SCRIPTS[name])
