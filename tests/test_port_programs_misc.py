"""More programs written in PyTorch's idiom that run unchanged on minidl, each exercising many
features at once: a spatial-transformer classifier (affine_grid, grid_sample, bicubic
interpolate, GroupNorm, GELU, RMSprop centered, ReduceLROnPlateau, forward hooks with kwargs
and full backward hooks), a tensor-gymnastics program (a custom autograd.Function, scatter_reduce,
index_add_, masked_scatter, cummax, logcumsumexp, quantile, autograd.functional.jacobian,
autograd.grad with allow_unused and retain_graph, gradient accumulation) and a Conv3d model
(InstanceNorm3d, MaxPool3d, AdaptiveAvgPool3d, SWA with AveragedModel, SWALR and update_bn,
and fuse_conv_bn_eval).

Each program takes the framework module (``torch`` or ``minidl``) and reaches everything through
it. Without torch each runs on minidl alone and its result is checked for sanity; with torch both
frameworks start from the same weights (copied through state_dict as NumPy arrays), see the same
data, and every loss, captured value, gradient and final parameter must agree to float tolerance."""
import importlib
import types

import numpy as np
import pytest

import minidl


def _ns(torch):
    name = torch.__name__
    return types.SimpleNamespace(torch=torch, nn=importlib.import_module(f"{name}.nn"),
                                 F=importlib.import_module(f"{name}.nn.functional"),
                                 optim=importlib.import_module(f"{name}.optim"),
                                 swa=importlib.import_module(f"{name}.optim.swa_utils"),
                                 data=importlib.import_module(f"{name}.utils.data"),
                                 autograd=importlib.import_module(f"{name}.autograd"),
                                 agf=importlib.import_module(f"{name}.autograd.functional"))


def _np(x):
    return x.detach().numpy().copy()


def _load(torch, model, init):
    if init is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in init.items()})


# (1) spatial-transformer classifier -----------------------------------------------------------
def stn_program(torch, steps, data, init=None):
    t = _ns(torch)
    nn, F = t.nn, t.F

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.localization = nn.Sequential(nn.Conv2d(1, 4, 3), nn.MaxPool2d(2), nn.ReLU())
            self.fc_loc = nn.Sequential(nn.Linear(4 * 4 * 4, 8), nn.Tanh(), nn.Linear(8, 6))
            with torch.no_grad():
                self.fc_loc[2].weight.mul_(0.1)
                self.fc_loc[2].bias.copy_(torch.tensor([1.0, 0.1, 0.05, -0.1, 0.9, 0.0]))
            self.features = nn.Sequential(nn.Conv2d(1, 6, 3, padding=1), nn.GroupNorm(2, 6), nn.GELU(),
                                          nn.MaxPool2d(2), nn.Conv2d(6, 8, 3, padding=1), nn.GroupNorm(4, 8),
                                          nn.GELU(approximate="tanh"))
            self.head = nn.Linear(8, 3)

        def stn(self, x):
            theta = self.fc_loc(torch.flatten(self.localization(x), 1)).view(-1, 2, 3)
            grid = F.affine_grid(theta, x.size(), align_corners=False)
            return F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)

        def forward(self, x):
            x = F.interpolate(x, size=(10, 10), mode="bicubic", align_corners=False)
            x = self.stn(x)
            x = self.features(x)
            return self.head(x.mean(dim=(2, 3)))

    model = Net()
    _load(torch, model, init)
    captured = {"gelu": [], "head_kw": [], "grad_in": [], "grad_out": []}

    def forward_hook(module, args, kwargs, output):
        captured["gelu"].append(_np(output))
        captured["head_kw"].append(np.array(len(args) + len(kwargs)))

    def backward_hook(module, grad_input, grad_output):
        captured["grad_in"].append(_np(grad_input[0]))
        captured["grad_out"].append(_np(grad_output[0]))

    handles = [model.features[2].register_forward_hook(forward_hook, with_kwargs=True),
               model.head.register_full_backward_hook(backward_hook)]
    opt = t.optim.RMSprop(model.parameters(), lr=1e-2, alpha=0.9, momentum=0.5, centered=True)
    sched = t.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=0, threshold=0.05)
    x, y = torch.tensor(data["x"]), torch.tensor(data["y"])
    losses, lrs = [], []
    model.train()
    for _ in range(steps):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
        loss.backward()
        opt.step()
        sched.step(loss.item())
        losses.append(loss.item())
        lrs.append(opt.param_groups[0]["lr"])
    for h in handles:
        h.remove()
    with torch.no_grad():
        losses.append(F.cross_entropy(model(x), y, label_smoothing=0.1).item())
    extra = {"lr": np.array(lrs)}
    for key, values in captured.items():
        for i, v in enumerate(values):
            extra[f"{key}{i}"] = v
    extra["n_captured"] = np.array([len(v) for v in captured.values()])
    return model, losses, extra


def _stn_data():
    rng = np.random.default_rng(11)
    return {"x": rng.standard_normal((6, 1, 6, 6)).astype(np.float32), "y": rng.integers(0, 3, 6).astype(np.int64)}


# (2) tensor gymnastics -------------------------------------------------------------------------
def gymnastics_program(torch, steps, data, init=None):
    t = _ns(torch)
    nn = t.nn

    # minidl's Function hands forward and backward the arrays (NumPy), PyTorch hands them Tensors:
    # these bodies use only the operators both have, so the same class runs on either.
    class GateWithMask(torch.autograd.Function):
        """y = x * [x > 0], plus the 0/1 indicator as a float output that is not differentiable."""
        @staticmethod
        def forward(ctx, x):
            mask = x > 0
            indicator = x * 0 + mask
            ctx.save_for_backward(mask)
            ctx.mark_non_differentiable(indicator)
            return x * mask, indicator

        @staticmethod
        def backward(ctx, grad_y, grad_indicator):
            (mask,) = ctx.saved_tensors
            return grad_y * mask

    class SoftSign(torch.autograd.Function):
        """y = c * x / (c + |x|), dy/dx = c**2 / (c + |x|)**2."""
        @staticmethod
        def forward(ctx, x, c):
            ctx.save_for_backward(x)
            ctx.c = c
            return c * x / (c + abs(x))

        @staticmethod
        def backward(ctx, grad_y):
            (x,) = ctx.saved_tensors
            return grad_y * ctx.c ** 2 / (ctx.c + abs(x)) ** 2, None

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(5, 4)
            self.mix = nn.Parameter(torch.ones(4) * 0.5)
            self.unused = nn.Parameter(torch.zeros(3))

        def forward(self, x, seg, mask, src):
            h = SoftSign.apply(self.proj(x), 2.0)
            out = {"h": h}
            out["gate"], out["indicator"] = GateWithMask.apply(h + 0.1)
            out["indicator_requires_grad"] = torch.tensor(out["indicator"].requires_grad)
            index = seg.unsqueeze(1).expand(-1, h.size(1))
            out["amax"] = torch.zeros(3, 4).scatter_reduce(0, index, h, reduce="amax", include_self=False)
            out["smean"] = torch.full((3, 4), 0.5).scatter_reduce(0, index, h * self.mix, reduce="mean")
            acc = torch.zeros(3, 4)
            acc.index_add_(0, seg, h, alpha=0.5)
            out["acc"] = acc
            out["scattered"] = h.masked_scatter(mask, src * self.mix.sum())
            out["cummax"], out["cummax_idx"] = torch.cummax(h, dim=1)
            out["lcse"] = torch.logcumsumexp(h, dim=0)
            out["quant"] = torch.quantile(h, torch.tensor([0.25, 0.5, 0.9]), dim=1)
            out["quant_mid"] = h.quantile(0.3, dim=0, keepdim=True, interpolation="midpoint")
            loss = ((out["gate"] * out["indicator"]).sum() + out["gate"].pow(2).sum() + (out["amax"] ** 2).sum()
                    + out["smean"].sum() + (out["acc"] * acc).mean() + out["scattered"].pow(2).mean()
                    + out["cummax"].sum() * 0.1 + out["lcse"][-1].sum()
                    + (out["quant"] * torch.tensor([[1.0], [2.0], [-1.0]])).sum() + out["quant_mid"].sum())
            return loss, out

    model = Model()
    _load(torch, model, init)
    x, seg = torch.tensor(data["x"]), torch.tensor(data["seg"])
    mask, src = torch.tensor(data["mask"]), torch.tensor(data["src"])
    src.requires_grad_(True)
    res = {}

    loss, out = model(x, seg, mask, src)
    for k, v in out.items():
        res[k] = _np(v)
    res["loss"] = np.array(loss.item())
    params = [model.proj.weight, model.proj.bias, model.mix, model.unused, src]
    grads = torch.autograd.grad(loss, params, allow_unused=True, retain_graph=True)
    res["unused_is_none"] = np.array(grads[3] is None)
    for name, g in zip(["g_w", "g_b", "g_mix", None, "g_src"], grads):
        if name is not None:
            res[name] = _np(g)
    loss.backward()
    res["backward_matches_grad"] = np.array([np.allclose(_np(p.grad), _np(g)) for p, g in
                                             zip([model.proj.weight, model.proj.bias, model.mix], grads[:3])])
    res["unused_grad_is_none"] = np.array(model.unused.grad is None)

    def f(v):
        return torch.sin(v) * torch.cumsum(v, 0) + torch.logcumsumexp(v, 0)
    res["jacobian"] = _np(t.agf.jacobian(f, torch.tensor(data["v"])))

    opt = t.optim.SGD(model.parameters(), lr=0.03, momentum=0.5)
    losses = []
    micro = torch.tensor(data["micro"])
    for step in range(steps):
        opt.zero_grad()
        total = 0.0
        for i in range(3):
            xb = micro[step % 2, i]
            lb, _ = model(xb, seg, mask, src.detach())
            (lb / 3).backward()
            total += lb.item() / 3
        res[f"acc_grad{step}"] = _np(model.proj.weight.grad)
        opt.step()
        losses.append(total)
    return model, losses, res


def _gym_data():
    rng = np.random.default_rng(12)
    mask = rng.uniform(size=(6, 4)) < 0.4
    return {"x": rng.standard_normal((6, 5)).astype(np.float32), "seg": np.array([0, 2, 1, 0, 2, 0], np.int64),
            "mask": mask, "src": rng.standard_normal(24).astype(np.float32),
            "v": rng.standard_normal(4).astype(np.float64),
            "micro": rng.standard_normal((2, 3, 6, 5)).astype(np.float32)}


# (3) Conv3d video-ish model with SWA, update_bn and conv-BN fusion -----------------------------
def video_program(torch, steps, data, init=None):
    t = _ns(torch)
    nn, F = t.nn, t.F

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Conv3d(2, 4, 3, padding=1), nn.InstanceNorm3d(4, affine=True), nn.ReLU(),
                                      nn.MaxPool3d(2), nn.Conv3d(4, 6, (1, 3, 3), padding=(0, 1, 1)),
                                      nn.BatchNorm3d(6), nn.ReLU(), nn.AdaptiveAvgPool3d((1, 2, 1)))
            self.fc = nn.Linear(12, 3)

        def forward(self, x):
            return self.fc(torch.flatten(self.body(x), 1))

    model = Net()
    _load(torch, model, init)
    swa_model = t.swa.AveragedModel(model)
    opt = t.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    swa_sched = t.swa.SWALR(opt, swa_lr=0.02, anneal_epochs=3, anneal_strategy="cos")
    loader = t.data.DataLoader(t.data.TensorDataset(torch.tensor(data["x"]), torch.tensor(data["y"])),
                               batch_size=3, shuffle=False)
    losses, lrs = [], []
    model.train()
    for step in range(steps):
        for xb, yb in loader:
            opt.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        if step >= 1:
            swa_model.update_parameters(model)
            swa_sched.step()
        lrs.append(opt.param_groups[0]["lr"])
    extra = {"lr": np.array(lrs), "n_averaged": swa_model.n_averaged.numpy().copy()}
    t.swa.update_bn(loader, swa_model)
    swa_model.eval()
    with torch.no_grad():
        xs = torch.tensor(data["x"])
        extra["swa_out"] = _np(swa_model(xs))
        losses.append(F.cross_entropy(swa_model(xs), torch.tensor(data["y"])).item())
    for k, v in swa_model.state_dict().items():
        extra["swa." + k] = _np(v)

    conv, bn = nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4)
    _load(torch, conv, data["conv_init"])
    with torch.no_grad():
        bn.weight.copy_(torch.tensor(data["bn_w"]))
        bn.bias.copy_(torch.tensor(data["bn_b"]))
    img = torch.tensor(data["img"])
    for _ in range(2):
        bn(conv(img))  # training mode: accumulates running statistics
    conv.eval(), bn.eval()
    with torch.no_grad():
        extra["unfused"] = _np(bn(conv(img)))
        fused = nn.utils.fuse_conv_bn_eval(conv, bn)
        extra["fused"] = _np(fused(img))
        extra["fused_w"] = _np(fused.weight)
        extra["fused_b"] = _np(fused.bias)
    return model, losses, extra


def _video_data():
    rng = np.random.default_rng(13)
    return {"x": rng.standard_normal((6, 2, 4, 6, 6)).astype(np.float32), "y": rng.integers(0, 3, 6).astype(np.int64),
            "img": rng.standard_normal((2, 3, 5, 5)).astype(np.float32),
            "conv_init": {"weight": (rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32),
                          "bias": rng.standard_normal(4).astype(np.float32)},
            "bn_w": rng.uniform(0.5, 1.5, 4).astype(np.float32), "bn_b": rng.standard_normal(4).astype(np.float32)}


# the checks ----------------------------------------------------------------------------------
PROGRAMS = {"stn": (stn_program, _stn_data), "gymnastics": (gymnastics_program, _gym_data),
            "video": (video_program, _video_data)}
STEPS = 6


def _sanity(name, model, losses, extra):
    assert all(np.isfinite(losses))
    assert all(np.all(np.isfinite(v.numpy())) for v in model.state_dict().values())
    if name == "stn":
        assert losses[-1] < losses[0]
        assert list(extra["n_captured"]) == [STEPS] * 4  # the hooks were removed before the last forward
        assert extra["head_kw0"] == 1
        assert extra["gelu0"].shape == (6, 6, 10, 10) and extra["grad_out0"].shape == (6, 3)
        # cross_entropy's mean over 6 rows: each row of dL/dlogits sums to zero
        np.testing.assert_allclose(extra["grad_out0"].sum(1), 0, atol=1e-6)
        assert np.all(np.diff(extra["lr"]) <= 0) and extra["lr"][0] <= 1e-2
    elif name == "gymnastics":
        assert losses[-1] < losses[0]
        assert bool(extra["unused_is_none"]) and bool(extra["unused_grad_is_none"])
        assert extra["backward_matches_grad"].all()
        h, seg = extra["h"], np.array([0, 2, 1, 0, 2, 0])
        assert not extra["indicator_requires_grad"]
        np.testing.assert_array_equal(extra["indicator"], h + 0.1 > 0)
        np.testing.assert_allclose(extra["gate"], np.maximum(h + 0.1, 0), rtol=1e-6)
        np.testing.assert_allclose(extra["amax"], np.stack([h[seg == s].max(0) for s in range(3)]), rtol=1e-6)
        acc = np.zeros((3, 4), np.float32)
        np.add.at(acc, seg, 0.5 * h)
        np.testing.assert_allclose(extra["acc"], acc, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(extra["cummax"], np.maximum.accumulate(h, axis=1), rtol=1e-6)
        np.testing.assert_allclose(extra["lcse"], np.logaddexp.accumulate(h, axis=0), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(extra["quant"], np.quantile(h, [0.25, 0.5, 0.9], axis=1), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(extra["quant_mid"], np.quantile(h, 0.3, axis=0, keepdims=True,
                                                                   method="midpoint"), rtol=1e-5, atol=1e-6)
        v = _gym_data()["v"]
        eps, jac = 1e-6, np.zeros((4, 4))

        def f(u):
            return np.sin(u) * np.cumsum(u) + np.logaddexp.accumulate(u)
        for j in range(4):
            d = np.zeros(4)
            d[j] = eps
            jac[:, j] = (f(v + d) - f(v - d)) / (2 * eps)
        np.testing.assert_allclose(extra["jacobian"], jac, rtol=1e-6, atol=1e-8)
    else:
        assert int(extra["n_averaged"]) == STEPS - 1
        np.testing.assert_allclose(extra["lr"][-1], 0.02, rtol=1e-6)
        np.testing.assert_allclose(extra["fused"], extra["unfused"], rtol=1e-4, atol=1e-5)
        # update_bn: the averaged model's running mean is that of its own activations over the data
        assert int(extra["swa.module.body.5.num_batches_tracked"]) == 2


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_runs_on_minidl_alone(name):
    program, make_data = PROGRAMS[name]
    minidl.manual_seed(0)
    model, losses, extra = program(minidl, STEPS, make_data())
    _sanity(name, model, losses, extra)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_matches_pytorch_from_the_same_weights(name):
    torch = pytest.importorskip("torch")
    program, make_data = PROGRAMS[name]
    torch.manual_seed(0)
    ref_model, _, _ = program(torch, 0, make_data())
    init = {k: v.detach().numpy().copy() for k, v in ref_model.state_dict().items()}

    t_model, t_losses, t_extra = program(torch, STEPS, make_data(), init)
    m_model, m_losses, m_extra = program(minidl, STEPS, make_data(), init)

    np.testing.assert_allclose(m_losses, t_losses, rtol=2e-4, atol=2e-5)
    assert sorted(m_extra) == sorted(t_extra)
    for key in t_extra:
        a, b = np.asarray(m_extra[key]), np.asarray(t_extra[key])
        assert a.shape == b.shape, key
        if a.dtype.kind in "biu":
            np.testing.assert_array_equal(a, b, err_msg=key)
        else:
            np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-5, err_msg=key)
    t_state, m_state = t_model.state_dict(), m_model.state_dict()
    assert list(m_state) == list(t_state)
    for key in t_state:
        np.testing.assert_allclose(m_state[key].numpy(), t_state[key].detach().numpy(), rtol=1e-3, atol=1e-5,
                                   err_msg=key)
