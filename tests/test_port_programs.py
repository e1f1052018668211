"""Small training programs written in PyTorch's idiom that run unchanged on minidl: each
program takes the framework module (``torch`` or ``minidl``) and uses only
``torch.nn``, ``torch.nn.functional``, ``torch.optim`` and ``torch.utils.data`` through it.
Every program runs on minidl alone (CI has no torch); with torch installed, both frameworks
start from the same weights (copied through state_dict as NumPy arrays) and see the same
data, and their losses and final parameters must agree to float tolerance."""
import math
import types

import numpy as np
import pytest

import minidl


def _ns(torch):
    import importlib
    name = torch.__name__
    return types.SimpleNamespace(torch=torch, nn=importlib.import_module(f"{name}.nn"),
                                 F=importlib.import_module(f"{name}.nn.functional"),
                                 optim=importlib.import_module(f"{name}.optim"),
                                 data=importlib.import_module(f"{name}.utils.data"))


# (d) BatchNorm from scratch, d2l style ------------------------------------------------------
def batch_norm_program(torch, steps, data, init=None):
    t = _ns(torch)
    nn, F = t.nn, t.F

    def batch_norm(X, gamma, beta, moving_mean, moving_var, eps, momentum):
        if not torch.is_grad_enabled():
            X_hat = (X - moving_mean) / torch.sqrt(moving_var + eps)
        else:
            mean = X.mean(dim=0)
            var = ((X - mean) ** 2).mean(dim=0)
            X_hat = (X - mean) / torch.sqrt(var + eps)
            moving_mean = (1.0 - momentum) * moving_mean + momentum * mean
            moving_var = (1.0 - momentum) * moving_var + momentum * var
        return gamma * X_hat + beta, moving_mean.data, moving_var.data

    class BatchNorm(nn.Module):
        def __init__(self, num_features):
            super().__init__()
            self.gamma = nn.Parameter(torch.ones((1, num_features)))
            self.beta = nn.Parameter(torch.zeros((1, num_features)))
            self.moving_mean = torch.zeros((1, num_features))
            self.moving_var = torch.ones((1, num_features))

        def forward(self, X):
            Y, self.moving_mean, self.moving_var = batch_norm(
                X, self.gamma, self.beta, self.moving_mean, self.moving_var, eps=1e-5, momentum=0.1)
            return Y

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(4, 6)
            self.bn = BatchNorm(6)
            self.fc2 = nn.Linear(6, 3)

        def forward(self, x):
            return self.fc2(torch.relu(self.bn(self.fc1(x))))

    model = Net()
    if init is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in init.items()})
    opt = optim_sgd(t, model, lr=0.1)
    x, y = torch.tensor(data["x"]), torch.tensor(data["y"])
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        losses.append(F.cross_entropy(model(x), y).item())
    return model, losses, [model.bn.moving_mean.numpy(), model.bn.moving_var.numpy()]


def optim_sgd(t, model, lr):
    return t.optim.SGD(model.parameters(), lr=lr)


def _bn_data():
    rng = np.random.default_rng(0)
    return {"x": rng.standard_normal((8, 4)).astype(np.float32), "y": rng.integers(0, 3, 8).astype(np.int64)}


# (b) CNN with BatchNorm2d, SGD momentum, StepLR, DataLoader ------------------------------------
def cnn_program(torch, steps, data, init=None):
    t = _ns(torch)
    nn, F = t.nn, t.F

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                                          nn.MaxPool2d(2))
            self.fc = nn.Linear(4 * 4 * 4, 3)

        def forward(self, x):
            return self.fc(torch.flatten(self.features(x), 1))

    model = Net()
    if init is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in init.items()})
    opt = t.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    sched = t.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    loader = t.data.DataLoader(t.data.TensorDataset(torch.tensor(data["x"]), torch.tensor(data["y"])),
                               batch_size=4, shuffle=False)
    losses = []
    model.train()
    for _ in range(steps):
        for xb, yb in loader:
            opt.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        sched.step()
    return model, losses, [np.array(opt.param_groups[0]["lr"])]


def _cnn_data():
    rng = np.random.default_rng(1)
    return {"x": rng.standard_normal((8, 1, 8, 8)).astype(np.float32), "y": rng.integers(0, 3, 8).astype(np.int64)}


# (c) VAE with BCE and the reparameterisation trick ---------------------------------------------
def vae_program(torch, steps, data, init=None):
    t = _ns(torch)
    nn, F = t.nn, t.F

    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(6, 5)
            self.fc21 = nn.Linear(5, 2)
            self.fc22 = nn.Linear(5, 2)
            self.fc3 = nn.Linear(2, 5)
            self.fc4 = nn.Linear(5, 6)

        def encode(self, x):
            h = F.relu(self.fc1(x))
            return self.fc21(h), self.fc22(h)

        def reparameterize(self, mu, logvar):
            std = torch.exp(0.5 * logvar)
            eps = torch.randn_like(std)
            return mu + eps * std

        def forward(self, x):
            mu, logvar = self.encode(x)
            z = self.reparameterize(mu, logvar)
            return torch.sigmoid(self.fc4(F.relu(self.fc3(z)))), mu, logvar

    model = VAE()
    if init is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in init.items()})
    opt = t.optim.Adam(model.parameters(), lr=1e-2)
    x = torch.tensor(data["x"])
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        recon, mu, logvar = model(x)
        bce = F.binary_cross_entropy(recon, x, reduction="sum")
        kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        loss = bce + kld
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return model, losses, []


def _vae_data():
    rng = np.random.default_rng(2)
    return {"x": rng.uniform(0, 1, (4, 6)).astype(np.float32)}


# (a) GPT with weight tying, AdamW decay/no-decay groups, cosine LambdaLR ----------------------
def gpt_program(torch, steps, data, init=None):
    t = _ns(torch)
    nn, F = t.nn, t.F
    V, T, C, H = 11, 6, 8, 2

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            # no bias: a key bias gets only rounding noise as gradient, which Adam would amplify
            self.c_attn = nn.Linear(C, 3 * C, bias=False)
            self.c_proj = nn.Linear(C, C)
            self.register_buffer("bias", torch.tril(torch.ones(T, T)).view(1, 1, T, T))

        def forward(self, x):
            B, L, _ = x.size()
            q, k, v = self.c_attn(x).split(C, dim=2)
            q = q.view(B, L, H, C // H).transpose(1, 2)
            k = k.view(B, L, H, C // H).transpose(1, 2)
            v = v.view(B, L, H, C // H).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :L, :L] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(B, L, C)
            return self.c_proj(y)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(C)
            self.attn = CausalSelfAttention()
            self.ln_2 = nn.LayerNorm(C)
            self.mlp = nn.Sequential(nn.Linear(C, 4 * C), nn.GELU(), nn.Linear(4 * C, C))

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = nn.ModuleDict(dict(wte=nn.Embedding(V, C), wpe=nn.Embedding(T, C),
                                                  h=nn.ModuleList([Block() for _ in range(2)]),
                                                  ln_f=nn.LayerNorm(C)))
            self.lm_head = nn.Linear(C, V, bias=False)
            self.transformer.wte.weight = self.lm_head.weight

        def forward(self, idx, targets):
            pos = torch.arange(0, idx.size(1), dtype=torch.long)
            x = self.transformer.wte(idx) + self.transformer.wpe(pos)
            for block in self.transformer.h:
                x = block(x)
            logits = self.lm_head(self.transformer.ln_f(x))
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

        def configure_optimizers(self, weight_decay, learning_rate, betas):
            param_dict = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
            decay = [p for p in param_dict.values() if p.dim() >= 2]
            nodecay = [p for p in param_dict.values() if p.dim() < 2]
            groups = [{"params": decay, "weight_decay": weight_decay}, {"params": nodecay, "weight_decay": 0.0}]
            return t.optim.AdamW(groups, lr=learning_rate, betas=betas)

    model = GPT()
    if init is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in init.items()})
    opt = model.configure_optimizers(0.1, 3e-3, (0.9, 0.95))

    def cosine(it):
        return 0.5 * (1.0 + math.cos(math.pi * it / max(steps, 1)))

    sched = t.optim.lr_scheduler.LambdaLR(opt, cosine)
    idx, targets = torch.tensor(data["idx"]), torch.tensor(data["targets"])
    losses = []
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = model(idx, targets)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
    return model, losses, [np.array([g["lr"] for g in opt.param_groups])]


def _gpt_data():
    rng = np.random.default_rng(3)
    tokens = rng.integers(0, 11, (3, 7)).astype(np.int64)
    return {"idx": tokens[:, :-1].copy(), "targets": tokens[:, 1:].copy()}


# the checks ----------------------------------------------------------------------------------
PROGRAMS = {"gpt": (gpt_program, _gpt_data), "cnn": (cnn_program, _cnn_data),
            "vae": (vae_program, _vae_data), "batch_norm": (batch_norm_program, _bn_data)}
STEPS = 4


def _fixed_noise(framework, monkeypatch):
    """randn_like draws the same numbers in both frameworks: a fixed sequence from NumPy."""
    rng = np.random.default_rng(7)

    def randn_like(x, **kw):
        return framework.tensor(rng.standard_normal(tuple(x.shape)).astype(np.float32))
    monkeypatch.setattr(framework, "randn_like", randn_like)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_runs_on_minidl_alone_and_learns(name, monkeypatch):
    program, make_data = PROGRAMS[name]
    minidl.manual_seed(0)
    _fixed_noise(minidl, monkeypatch)
    model, losses, _ = program(minidl, STEPS, make_data())
    assert len(losses) >= STEPS and all(np.isfinite(losses))
    assert losses[-1] < losses[0]
    assert all(np.all(np.isfinite(v.numpy())) for v in model.state_dict().values())


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_matches_pytorch_from_the_same_weights(name, monkeypatch):
    torch = pytest.importorskip("torch")
    program, make_data = PROGRAMS[name]
    minidl.manual_seed(0)
    _, _, _ = program(minidl, 0, make_data())
    torch.manual_seed(0)
    ref_model, _, _ = program(torch, 0, make_data())
    init = {k: v.detach().numpy().copy() for k, v in ref_model.state_dict().items()}

    _fixed_noise(torch, monkeypatch)
    t_model, t_losses, t_extra = program(torch, STEPS, make_data(), init)
    _fixed_noise(minidl, monkeypatch)
    m_model, m_losses, m_extra = program(minidl, STEPS, make_data(), init)

    np.testing.assert_allclose(m_losses, t_losses, rtol=2e-4, atol=2e-5)
    t_state, m_state = t_model.state_dict(), m_model.state_dict()
    assert list(m_state) == list(t_state)
    for key in t_state:
        np.testing.assert_allclose(m_state[key].numpy(), t_state[key].detach().numpy(), rtol=1e-3, atol=1e-5,
                                   err_msg=key)
    for a, b in zip(m_extra, t_extra):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-6)
