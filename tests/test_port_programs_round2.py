"""Small programs in PyTorch's idiom on second-order gradients and the tooling around training,
each a function of the framework module ``T`` (``torch`` or ``minidl``) run unchanged under both:
MAML on sine regression (inner steps with create_graph), a WGAN-GP (a gradient penalty),
Newton-CG on logistic regression through autograd.functional.hvp, iterative magnitude pruning,
activation offloading through saved_tensors_hooks, DP-SGD with per-sample gradients from
func.vmap(func.grad_and_value), a profiled training loop, a SummaryWriter logging loop read back with
tensorboard's EventAccumulator, and a parameter server over two threaded ranks.

Every bit of randomness comes from NumPy: data, noise and initial weights are NumPy arrays loaded
into both frameworks. Without torch each program still runs on minidl and its torch-free properties
are checked (a closed form holds, a loss falls, a NumPy reference agrees); with torch the two
frameworks' losses per step, final parameters and gradients must agree. The profiled loop maps
each framework's op names to common ones (minidl names an op by its Function, PyTorch by its aten
kernel) and compares counts, nesting and shapes, never times. The parameter server runs on minidl
alone (its ranks are threads, which torch's process groups are not) against a NumPy reference."""
import importlib
import types

import numpy as np
import pytest

import minidl


def _ns(T):
    name = T.__name__
    mods = ("nn", "nn.functional", "optim", "autograd", "autograd.functional", "autograd.graph", "func",
            "nn.utils.prune")
    m = {k: importlib.import_module(f"{name}.{k}") for k in mods}
    return types.SimpleNamespace(T=T, nn=m["nn"], F=m["nn.functional"], optim=m["optim"], autograd=m["autograd"],
                                 agf=m["autograd.functional"], graph=m["autograd.graph"], func=m["func"],
                                 prune=m["nn.utils.prune"])


def _np(t):
    return t.detach().numpy().copy()


def _load(T, module, arrays):
    module.load_state_dict({k: T.tensor(v) for k, v in arrays.items()})


def _init_like(shapes, seed, scale=0.4):
    rng = np.random.default_rng(seed)
    return {k: (scale * rng.standard_normal(s)).astype(np.float32) for k, s in shapes.items()}


def _mlp_shapes(sizes, prefix=""):
    shapes = {}
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        shapes[f"{prefix}{2 * i}.weight"] = (b, a)
        shapes[f"{prefix}{2 * i}.bias"] = (b,)
    return shapes


# (1) MAML on sine regression: an nn.Module called on fast weights through func.functional_call, two inner
# SGD steps whose gradients keep their graph (autograd.grad(create_graph=True)), the query loss
# differentiated through them into an outer Adam.
def maml_program(T, d):
    t = _ns(T)
    nn = t.nn
    model = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1))
    _load(T, model, d["init"])
    opt = t.optim.Adam(model.parameters(), lr=0.01)
    meta_losses, inner_losses, first_grads = [], [], None
    for tasks in d["tasks"]:
        meta = 0.0
        for xs, ys, xq, yq in tasks:
            xs, ys, xq, yq = (T.tensor(a) for a in (xs, ys, xq, yq))
            fast = dict(model.named_parameters())
            for _ in range(2):
                inner = t.F.mse_loss(t.func.functional_call(model, fast, (xs,)), ys)
                grads = t.autograd.grad(inner, list(fast.values()), create_graph=True)
                fast = {k: w - 0.1 * g for (k, w), g in zip(fast.items(), grads)}
                inner_losses.append(_np(inner))
            meta = meta + t.F.mse_loss(t.func.functional_call(model, fast, (xq,)), yq)
        meta = meta / len(tasks)
        opt.zero_grad()
        meta.backward()
        if first_grads is None:
            first_grads = {f"grad.{k}": _np(p.grad) for k, p in model.named_parameters()}
        opt.step()
        meta_losses.append(_np(meta))
    out = {"meta_losses": np.stack(meta_losses), "inner_losses": np.stack(inner_losses)}
    out.update(first_grads)
    out.update({k: _np(v) for k, v in model.state_dict().items()})
    return out


def _maml_data():
    rng = np.random.default_rng(0)
    init = {k: (rng.standard_normal(s) / np.sqrt(s[-1] if len(s) == 2 else 4)).astype(np.float32)
            for k, s in _mlp_shapes([1, 16, 16, 1]).items()}
    tasks = []
    for _ in range(4):
        batch = []
        for _ in range(3):
            amp, phase = rng.uniform(0.5, 2.0), rng.uniform(0, np.pi)
            xs, xq = rng.uniform(-3, 3, (8, 1)), rng.uniform(-3, 3, (8, 1))
            batch.append(tuple(a.astype(np.float32) for a in (xs, amp * np.sin(xs + phase), xq,
                                                              amp * np.sin(xq + phase))))
        tasks.append(batch)
    return {"init": init, "tasks": tasks}


def _maml_check(out, d):
    assert out["meta_losses"].shape == (4,) and out["inner_losses"].shape == (24,)
    # the inner SGD steps lower each task's support loss
    inner = out["inner_losses"].reshape(12, 2)
    assert (inner[:, 1] < inner[:, 0]).mean() > 0.5
    # the first support loss, of the initial weights, in NumPy
    w = d["init"]
    xs, ys = d["tasks"][0][0][:2]
    h = np.maximum(np.tanh(xs @ w["0.weight"].T + w["0.bias"]) @ w["2.weight"].T + w["2.bias"], 0)
    np.testing.assert_allclose(out["inner_losses"][0], ((h @ w["4.weight"].T + w["4.bias"] - ys) ** 2).mean(),
                               rtol=1e-5)
    grads = [v for k, v in out.items() if k.startswith("grad.")]
    assert len(grads) == 6 and all(np.isfinite(g).all() and np.abs(g).sum() > 0 for g in grads)


# (2) WGAN-GP on a 2-D ring: MLP generator and critic, the gradient penalty ||grad_x D(x_hat)|| - 1
# differentiated into the critic's weights, two critic steps per generator step, Adam(betas=(0.5, 0.9)).
def wgan_program(T, d):
    t = _ns(T)
    nn = t.nn
    G = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 2))
    D = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
    _load(T, G, d["G"])
    _load(T, D, d["D"])
    opt_g = t.optim.Adam(G.parameters(), lr=2e-3, betas=(0.5, 0.9))
    opt_d = t.optim.Adam(D.parameters(), lr=2e-3, betas=(0.5, 0.9))
    d_losses, g_losses, gps = [], [], []
    k = 0
    for it in range(3):
        for _ in range(2):
            real, z, eps = T.tensor(d["real"][k]), T.tensor(d["z"][k]), T.tensor(d["eps"][k])
            k += 1
            fake = G(z).detach()
            x_hat = (eps * real + (1 - eps) * fake).requires_grad_(True)
            score = D(x_hat)
            g, = t.autograd.grad(score, x_hat, grad_outputs=T.ones_like(score), create_graph=True)
            gp = ((g.norm(2, dim=1) - 1) ** 2).mean()
            loss_d = D(fake).mean() - D(real).mean() + 10.0 * gp
            opt_d.zero_grad()
            loss_d.backward()
            opt_d.step()
            d_losses.append(_np(loss_d))
            gps.append(_np(gp))
        z = T.tensor(d["z"][k])
        k += 1
        loss_g = -D(G(z)).mean()
        opt_g.zero_grad()
        loss_g.backward()
        opt_g.step()
        g_losses.append(_np(loss_g))
    out = {"d_losses": np.stack(d_losses), "g_losses": np.stack(g_losses), "gps": np.stack(gps),
           "grad_d0": _np(D[0].weight.grad), "grad_g0": _np(G[0].weight.grad)}
    out.update({f"G.{k}": _np(v) for k, v in G.state_dict().items()})
    out.update({f"D.{k}": _np(v) for k, v in D.state_dict().items()})
    return out


def _wgan_data():
    rng = np.random.default_rng(3)
    angle = rng.uniform(0, 2 * np.pi, (9, 12))
    real = np.stack([np.cos(angle), np.sin(angle)], -1) * 2 + 0.05 * rng.standard_normal((9, 12, 2))
    return {"G": _init_like(_mlp_shapes([2, 16, 2]), 4), "D": _init_like(_mlp_shapes([2, 16, 16, 1]), 5),
            "real": real.astype(np.float32), "z": rng.standard_normal((9, 12, 2)).astype(np.float32),
            "eps": rng.uniform(size=(9, 12, 1)).astype(np.float32)}


def _wgan_check(out, d):
    assert out["d_losses"].shape == (6,) and out["g_losses"].shape == (3,)
    assert (out["gps"] >= 0).all() and np.isfinite(out["d_losses"]).all()
    assert np.abs(out["grad_d0"]).sum() > 0 and np.abs(out["grad_g0"]).sum() > 0
    # the first penalty in NumPy: grad_x D = W1^T diag(1 - tanh^2) W2^T diag(leaky') W3^T at x_hat
    G, D = ({k: v.astype(np.float64) for k, v in d[n].items()} for n in ("G", "D"))
    fake = np.maximum(d["z"][0] @ G["0.weight"].T + G["0.bias"], 0) @ G["2.weight"].T + G["2.bias"]
    x_hat = d["eps"][0] * d["real"][0] + (1 - d["eps"][0]) * fake
    h1 = np.tanh(x_hat @ D["0.weight"].T + D["0.bias"])
    a2 = h1 @ D["2.weight"].T + D["2.bias"]
    d2 = D["4.weight"] * np.where(a2 > 0, 1.0, 0.2)                  # dD/da2, per sample
    grad_x = ((d2 @ D["2.weight"]) * (1 - h1 ** 2)) @ D["0.weight"]
    gp = ((np.linalg.norm(grad_x, axis=1) - 1) ** 2).mean()
    np.testing.assert_allclose(out["gps"][0], gp, rtol=1e-4)


# (3) Newton-CG on L2-regularised logistic regression in float64: the Newton direction solved by
# conjugate gradients whose matrix products are autograd.functional.hvp, then a full step.
def newton_cg_program(T, d):
    t = _ns(T)
    X, y = T.tensor(d["X"]), T.tensor(d["y"])
    lam = 0.1

    def loss_fn(w):
        p = T.sigmoid(X @ w)
        return -(y * T.log(p) + (1 - y) * T.log(1 - p)).mean() + 0.5 * lam * (w * w).sum()

    w = T.zeros(X.shape[1], dtype=T.float64)
    losses, cg_iters, directions = [], [], []
    for _ in range(4):
        w_ = w.clone().requires_grad_(True)
        loss = loss_fn(w_)
        g, = t.autograd.grad(loss, w_)
        losses.append(_np(loss))
        # CG on H p = -g
        p = T.zeros_like(g)
        r = -g
        s = r.clone()
        rs = (r * r).sum()
        n = 0
        for n in range(1, 11):
            _, Hs = t.agf.hvp(loss_fn, w, s)
            alpha = rs / (s * Hs).sum()
            p = p + alpha * s
            r = r - alpha * Hs
            rs_new = (r * r).sum()
            if rs_new.sqrt().item() < 1e-10:
                break
            s = r + (rs_new / rs) * s
            rs = rs_new
        cg_iters.append(n)
        if not directions:
            # the first direction again, exactly: the Hessian solved by linalg.solve
            directions = [_np(p), _np(T.linalg.solve(t.agf.hessian(loss_fn, w), -g))]
        w = w + p
    vhp_val, vhp = t.agf.vhp(loss_fn, w, T.tensor(d["v"]))
    H = t.agf.hessian(loss_fn, w)
    return {"losses": np.stack(losses), "w": _np(w), "cg_iters": tuple(cg_iters), "cg_direction": directions[0],
            "solved_direction": directions[1], "vhp": _np(vhp),
            "vhp_val": _np(vhp_val), "H": _np(H)}


def _newton_data():
    rng = np.random.default_rng(7)
    X = np.concatenate([np.ones((60, 1)), rng.standard_normal((60, 3))], 1)
    y = (X @ [0.2, 1.5, -1.0, 0.5] + rng.standard_normal(60) > 0).astype(np.float64)
    return {"X": X, "y": y, "v": rng.standard_normal(4)}


def _newton_check(out, d):
    X, y, lam = d["X"], d["y"], 0.1
    w = out["w"]
    s = 1 / (1 + np.exp(-X @ w))
    H = X.T @ (X * (s * (1 - s))[:, None]) / len(y) + lam * np.eye(4)
    np.testing.assert_allclose(out["H"], H, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(out["vhp"], d["v"] @ H, rtol=1e-10, atol=1e-12)
    # CG on a 4 x 4 positive-definite system ends at the exact solution within 4 iterations
    np.testing.assert_allclose(out["cg_direction"], out["solved_direction"], rtol=1e-8, atol=1e-12)
    assert max(out["cg_iters"]) <= 4
    # four Newton steps reach the optimum: the gradient vanishes
    grad = X.T @ (s - y) / len(y) + lam * w
    assert np.abs(grad).max() < 1e-10
    assert (np.diff(out["losses"]) < 0).all()


# (4) iterative magnitude pruning: three rounds of l1_unstructured (20% of what is left each round,
# the second and third going through a PruningContainer), fine-tuning with SGD + momentum between
# rounds, a global_unstructured pass over both layers, then prune.remove to make it permanent.
def pruning_program(T, d):
    t = _ns(T)
    nn, prune = t.nn, t.prune
    model = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 3))
    _load(T, model, d["init"])
    opt = t.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = T.tensor(d["x"]), T.tensor(d["y"])
    losses, kept = [], []
    for _ in range(3):
        for layer in (model[0], model[2]):
            prune.l1_unstructured(layer, name="weight", amount=0.2)
        # the optimizer keeps training weight_orig: the same Parameter object as before pruning
        for _ in range(3):
            loss = t.F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(_np(loss))
        kept.append(int(model[0].weight_mask.sum().item()) + int(model[2].weight_mask.sum().item()))
    trained_mask0 = _np(model[0].weight_mask)
    prune.global_unstructured([(model[0], "weight"), (model[2], "weight")], pruning_method=prune.L1Unstructured,
                              amount=5)
    kept.append(int(model[0].weight_mask.sum().item()) + int(model[2].weight_mask.sum().item()))
    pruned_keys = tuple(sorted(model.state_dict()))
    out = {"losses": np.stack(losses), "kept": tuple(kept), "mask0": _np(model[0].weight_mask),
           "mask2": _np(model[2].weight_mask), "grad_orig0": _np(model[0].weight_orig.grad),
           "trained_mask0": trained_mask0,
           "is_pruned": prune.is_pruned(model), "pruned_keys": pruned_keys}
    for layer in (model[0], model[2]):
        prune.remove(layer, "weight")
    out["removed_keys"] = tuple(sorted(model.state_dict()))
    out["is_pruned_after"] = prune.is_pruned(model)
    out["final_loss"] = _np(t.F.cross_entropy(model(x), y))
    out.update({k: _np(v) for k, v in model.state_dict().items()})
    return out


def _pruning_data():
    rng = np.random.default_rng(11)
    x = rng.standard_normal((24, 6)).astype(np.float32)
    return {"init": _init_like(_mlp_shapes([6, 12, 3]), 12), "x": x,
            "y": (x[:, :3] @ rng.standard_normal((3, 3))).argmax(1).astype(np.int64)}


def _pruning_check(out, d):
    # 72 + 36 weights; each round removes round(0.2 * left) of each layer, then 5 more globally
    left0, left2, kept = 72, 36, []
    for _ in range(3):
        left0 -= round(0.2 * left0)
        left2 -= round(0.2 * left2)
        kept.append(left0 + left2)
    assert out["kept"] == tuple(kept) + (kept[-1] - 5,)
    assert out["is_pruned"] and not out["is_pruned_after"]
    assert out["pruned_keys"] == ("0.bias", "0.weight_mask", "0.weight_orig", "2.bias", "2.weight_mask",
                                  "2.weight_orig")
    assert out["removed_keys"] == ("0.bias", "0.weight", "2.bias", "2.weight")
    # remove leaves the pruned entries at zero; the gradient of pruned entries was zero while pruned
    for i in (0, 2):
        assert ((out[f"{i}.weight"] == 0) == (out[f"mask{i}"] == 0)).all()
    assert (out["grad_orig0"][out["trained_mask0"] == 0] == 0).all()
    assert (out["grad_orig0"][out["trained_mask0"] == 1] != 0).mean() > 0.5
    assert out["losses"][-1] < out["losses"][0]


# (5) activation offloading: saved_tensors_hooks whose pack copies what the forward keeps into NumPy
# arrays (the host copy an offloader would make) and whose unpack rebuilds tensors from them. The
# gradients equal those of the plain program exactly, even after the input is overwritten in place
# between the forward and the backward (the backward reads the copies).
def offload_program(T, d):
    t = _ns(T)
    nn = t.nn
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 16), nn.Sigmoid(), nn.Linear(16, 4))
    _load(T, model, d["init"])
    x, y = T.tensor(d["x"]), T.tensor(d["y"])
    stats = {"packed": 0, "unpacked": 0}

    def pack(tensor):
        stats["packed"] += 1
        return tensor.detach().numpy().copy()

    def unpack(array):
        stats["unpacked"] += 1
        return T.from_numpy(array)

    def step(hooks, overwrite):
        model.zero_grad()
        xi = x.clone()
        scale = T.tensor(d["scale"], requires_grad=True)
        if hooks:
            with t.graph.saved_tensors_hooks(pack, unpack):
                loss = t.F.cross_entropy(model(xi * scale).softmax(-1).log(), y)
        else:
            loss = t.F.cross_entropy(model(xi * scale).softmax(-1).log(), y)
        if overwrite:
            with T.no_grad():
                xi.zero_()
        loss.backward()
        return [_np(loss), _np(scale.grad)] + [_np(p.grad) for p in model.parameters()]

    # one hook when every parameter's gradient of a backward is ready (how DDP-style bucketing waits)
    ready = []
    handle = t.graph.register_multi_grad_hook(list(model.parameters()),
                                              lambda grads: ready.append(sum(g is not None for g in grads)))
    plain = step(False, False)
    hooked = step(True, True)
    handle.remove()
    step(False, False)
    out = {"plain_loss": plain[0], "hooked_loss": hooked[0]}
    out.update({f"plain{i}": g for i, g in enumerate(plain[1:])})
    out.update({f"hooked{i}": g for i, g in enumerate(hooked[1:])})
    out["multi_grad_hook_calls"] = tuple(ready)
    out["packed_some"] = stats["packed"] > 0
    out["unpacked_some"] = stats["unpacked"] > 0
    return out


def _offload_data():
    rng = np.random.default_rng(13)
    return {"init": _init_like(_mlp_shapes([8, 16, 16, 4]), 14), "x": rng.standard_normal((10, 8)).astype(np.float32),
            "y": rng.integers(0, 4, 10), "scale": rng.uniform(0.5, 1.5, 8).astype(np.float32)}


def _offload_check(out, d):
    assert out["packed_some"] and out["unpacked_some"] and out["multi_grad_hook_calls"] == (6, 6)
    np.testing.assert_array_equal(out["hooked_loss"], out["plain_loss"])
    for i in range(7):
        np.testing.assert_array_equal(out[f"hooked{i}"], out[f"plain{i}"])
    # the input's gradient reads the saved input: with the overwrite seen, it would be zero
    assert np.abs(out["hooked0"]).sum() > 0


# (6) DP-SGD: per-sample gradients and losses of a functional_call'd MLP from
# func.vmap(func.grad_and_value(loss)), each gradient clipped to norm C, summed, noised with fixed NumPy
# Gaussian noise, averaged and applied by SGD.
def dpsgd_program(T, d):
    t = _ns(T)
    nn, func = t.nn, t.func
    model = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 1))
    _load(T, model, d["init"])
    opt = t.optim.SGD(model.parameters(), lr=0.5)
    C, sigma = 0.5, 0.3

    def loss_one(params, x, y):
        logit = func.functional_call(model, params, (x.unsqueeze(0),)).squeeze()
        return T.log1p(T.exp(-y * logit))

    per_sample = func.vmap(func.grad_and_value(loss_one), in_dims=(None, 0, 0))
    norms_log, losses, sample_losses = [], [], []
    for step in range(4):
        x, y = T.tensor(d["x"][step]), T.tensor(d["y"][step])
        params = {k: v.detach() for k, v in model.named_parameters()}
        grads, values = per_sample(params, x, y)
        sample_losses.append(_np(values))
        flat = T.cat([g.reshape(g.shape[0], -1) for g in grads.values()], dim=1)
        norms = flat.norm(2, dim=1)
        factor = (C / (norms + 1e-6)).clamp(max=1.0)
        batch = x.shape[0]
        for k, p in model.named_parameters():
            g = grads[k]
            clipped = (g * factor.reshape(-1, *[1] * (g.dim() - 1))).sum(0)
            p.grad = (clipped + sigma * C * T.tensor(d["noise"][step][k])) / batch
        opt.step()
        norms_log.append(_np(norms))
        with T.no_grad():
            losses.append(_np(T.log1p(T.exp(-y * model(x).squeeze(1))).mean()))
    # per-sample gradients checked against one backward per sample, on the last batch
    loop = []
    for i in range(x.shape[0]):
        model.zero_grad()
        loss_one(dict(model.named_parameters()), x[i], y[i]).backward()
        loop.append(_np(model[0].weight.grad))
    last = func.vmap(func.grad(loss_one), in_dims=(None, 0, 0))(
        {k: v.detach() for k, v in model.named_parameters()}, x, y)
    out = {"norms": np.stack(norms_log), "losses": np.stack(losses), "sample_losses": np.stack(sample_losses),
           "loop_g0": np.stack(loop),
           "vmap_g0": _np(last["0.weight"])}
    out.update({k: _np(v) for k, v in model.state_dict().items()})
    return out


def _dpsgd_data():
    rng = np.random.default_rng(17)
    init = _init_like(_mlp_shapes([5, 8, 1]), 18, scale=0.8)
    w = rng.standard_normal(5)
    x = rng.standard_normal((4, 12, 5)).astype(np.float32)
    y = np.sign(x @ w + 0.3 * rng.standard_normal((4, 12))).astype(np.float32)
    noise = [{k: rng.standard_normal(s).astype(np.float32) for k, s in _mlp_shapes([5, 8, 1]).items()}
             for _ in range(4)]
    return {"init": init, "x": x, "y": y, "noise": noise}


def _dpsgd_check(out, d):
    assert out["norms"].shape == (4, 12) and (out["norms"] > 0).all() and out["sample_losses"].shape == (4, 12)
    np.testing.assert_allclose(out["vmap_g0"], out["loop_g0"], rtol=1e-5, atol=1e-7)
    # the clipping is active (some per-sample norms exceed C = 0.5) and the losses are the logistic ones
    assert (out["norms"] > 0.5).any() and (out["sample_losses"] > 0).all()


# (7) a profiled training loop: autograd.profiler.profile(record_shapes=True) around three steps with
# record_function regions, then torch.profiler.profile with a wait/warmup/active schedule and an
# on_trace_ready handler. The op names differ (minidl names an op by its Function, PyTorch by its aten
# kernel), so the program maps them to common names and compares counts, nesting and input shapes.
_OP_NAMES = {"minidl": {"Linear": "linear", "Relu": "relu", "MSELoss": "mse_loss"},
             "torch": {"aten::linear": "linear", "aten::relu": "relu", "aten::mse_loss": "mse_loss"}}
_REGIONS = ("forward", "backward", "optimizer", "Optimizer.step#SGD.step", "Optimizer.zero_grad#SGD.zero_grad")


def profiler_program(T, d):
    t = _ns(T)
    ap, prof_mod = t.autograd.profiler, importlib.import_module(f"{T.__name__}.profiler")
    names = dict(_OP_NAMES[T.__name__], **{r: r for r in _REGIONS})
    model = t.nn.Sequential(t.nn.Linear(4, 8), t.nn.ReLU(), t.nn.Linear(8, 1))
    _load(T, model, d["init"])
    opt = t.optim.SGD(model.parameters(), lr=0.05)
    x, y = T.tensor(d["x"]), T.tensor(d["y"])
    losses = []

    def train_step():
        with ap.record_function("forward"):
            loss = t.F.mse_loss(model(x), y)
        with ap.record_function("backward"):
            opt.zero_grad()
            loss.backward()
        with ap.record_function("optimizer"):
            opt.step()
        losses.append(_np(loss))

    with ap.profile(record_shapes=True) as prof:
        for _ in range(3):
            train_step()
    counts = {names[e.key]: e.count for e in prof.key_averages() if e.key in names}
    shapes = sorted((names[e.key], str(e.input_shapes)) for e in prof.key_averages(group_by_input_shape=True)
                    if e.key in names and names[e.key] in ("linear", "mse_loss"))
    forward = next(e for e in prof.function_events if e.name == "forward")
    children = [names[c.name] for c in forward.cpu_children if c.name in names]
    bench = importlib.import_module(f"{T.__name__}.utils.benchmark")
    timer = bench.Timer(stmt="model(x)", globals={"model": model, "x": x}, label="mlp", sub_label="16x4")
    m = timer.timeit(4)
    measured = (type(m).__name__, m.number_per_run, len(m.times), m.task_spec.stmt, m.title, bool(m.mean > 0))
    ready = []

    def on_ready(p):
        steps = [e for e in p.events() if e.name.startswith("ProfilerStep")]
        ready.append((p.step_num, len(steps), sum(e.count for e in p.key_averages() if e.key == "forward")))

    sched = prof_mod.schedule(wait=1, warmup=1, active=2, repeat=1)
    with prof_mod.profile(activities=[prof_mod.ProfilerActivity.CPU], schedule=sched, on_trace_ready=on_ready) as p:
        for _ in range(6):
            train_step()
            p.step()
    return {"losses": np.stack(losses), "counts": tuple(sorted(counts.items())), "shapes": tuple(shapes),
            "forward_children": tuple(children), "ready": tuple(ready), "timer": measured,
            "table_has_calls": "# of Calls" in prof.key_averages().table(sort_by="cpu_time_total", row_limit=5)}


def _profiler_data():
    rng = np.random.default_rng(19)
    return {"init": _init_like(_mlp_shapes([4, 8, 1]), 20), "x": rng.standard_normal((16, 4)).astype(np.float32),
            "y": rng.standard_normal((16, 1)).astype(np.float32)}


def _profiler_check(out, d):
    assert dict(out["counts"]) == {"linear": 6, "relu": 3, "mse_loss": 3, "forward": 3, "backward": 3,
                                   "optimizer": 3, "Optimizer.step#SGD.step": 3,
                                   "Optimizer.zero_grad#SGD.zero_grad": 3}
    assert out["shapes"] == (("linear", "[[16, 4], [8, 4], [8]]"), ("linear", "[[16, 8], [1, 8], [1]]"),
                             ("mse_loss", "[[16, 1], [16, 1], []]"))
    assert out["forward_children"] == ("linear", "relu", "linear", "mse_loss")
    # steps 0..5: wait, warmup, record, record-and-save, then nothing: one trace, of steps 2 and 3
    assert out["ready"] == ((4, 2, 2),) and out["table_has_calls"]
    assert out["timer"] == ("Measurement", 4, 1, "model(x)", "mlp: 16x4", True)
    assert out["losses"].shape == (9,) and out["losses"][-1] < out["losses"][0]


# (8) a SummaryWriter logging loop (add_scalar, add_scalars' run directories, add_histogram, add_text)
# read back with tensorboard's EventAccumulator.
def tensorboard_program(T, d):
    t = _ns(T)
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    SummaryWriter = importlib.import_module(f"{T.__name__}.utils.tensorboard").SummaryWriter
    logdir = d["tmp"] / T.__name__
    model = t.nn.Linear(3, 1)
    _load(T, model, d["init"])
    opt = t.optim.SGD(model.parameters(), lr=0.1)
    sched = t.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    x, y = T.tensor(d["x"]), T.tensor(d["y"])
    writer = SummaryWriter(log_dir=str(logdir))
    for step in range(5):
        loss = t.F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        writer.add_scalar("loss/train", loss.item(), step)
        writer.add_scalars("curves", {"loss": loss.item(), "lr": opt.param_groups[0]["lr"]}, step)
        if step % 2 == 0:
            writer.add_histogram("weight", model.weight, step)
            writer.add_histogram("grad", model.weight.grad, step)
        sched.step()
    writer.add_text("notes", "trained 5 steps", 4)
    writer.close()
    keep_all = {"scalars": 0, "histograms": 0, "tensors": 0}    # the default keeps one histogram per tag
    ea = EventAccumulator(str(logdir), size_guidance=keep_all)
    ea.Reload()
    tags = ea.Tags()
    out = {"scalar_tags": tuple(sorted(tags["scalars"])), "histogram_tags": tuple(sorted(tags["histograms"]))}
    loss_events = ea.Scalars("loss/train")
    out["loss_steps"] = tuple(e.step for e in loss_events)
    out["loss_values"] = np.array([e.value for e in loss_events], np.float32)
    for tag in ("weight", "grad"):
        hists = ea.Histograms(tag)
        out[f"{tag}_steps"] = tuple(h.step for h in hists)
        stats = [(h.histogram_value.min, h.histogram_value.max, h.histogram_value.num, h.histogram_value.sum,
                  h.histogram_value.sum_squares) for h in hists]
        out[f"{tag}_stats"] = np.array(stats, np.float32)    # of float32 values: compared as float32
        out[f"{tag}_counts"] = np.array([sum(h.histogram_value.bucket) for h in hists])
    runs = sorted(p.name for p in logdir.iterdir() if p.is_dir())
    out["runs"] = tuple(runs)
    for run in runs:
        sub = EventAccumulator(str(logdir / run), size_guidance=keep_all)
        sub.Reload()
        out[f"{run}_values"] = np.array([e.value for e in sub.Scalars("curves")], np.float32)
    text = ea.Tensors("notes/text_summary")
    out["text"] = tuple(v.tensor_proto.string_val[0].decode() for v in text)
    out["final_weight"] = _np(model.weight)
    return out


def _tensorboard_data():
    rng = np.random.default_rng(23)
    x = rng.standard_normal((20, 3)).astype(np.float32)
    return {"init": {"weight": np.zeros((1, 3), np.float32), "bias": np.zeros(1, np.float32)}, "x": x,
            "y": (x @ [[1.0], [-2.0], [0.5]] + 0.3).astype(np.float32)}


def _tensorboard_check(out, d):
    assert out["scalar_tags"] == ("loss/train",) and out["histogram_tags"] == ("grad", "weight")
    assert out["loss_steps"] == (0, 1, 2, 3, 4) and (np.diff(out["loss_values"]) < 0).all()
    assert out["weight_steps"] == (0, 2, 4) and (out["weight_counts"] == 3).all()
    assert out["runs"] == ("curves_loss", "curves_lr")
    np.testing.assert_array_equal(out["curves_loss_values"], out["loss_values"])
    np.testing.assert_allclose(out["curves_lr_values"], [0.1, 0.1, 0.05, 0.05, 0.025])
    assert out["text"] == ("trained 5 steps",)
    # the first histogram is of the zero initial weights after one SGD step: w = -lr * grad
    w0, g0 = out["weight_stats"][0], out["grad_stats"][0]
    np.testing.assert_allclose([w0[0], w0[1]], [-0.1 * g0[1], -0.1 * g0[0]], rtol=1e-5)


PROGRAMS = {
    "maml": (maml_program, _maml_data, _maml_check),
    "wgan_gp": (wgan_program, _wgan_data, _wgan_check),
    "newton_cg": (newton_cg_program, _newton_data, _newton_check),
    "pruning": (pruning_program, _pruning_data, _pruning_check),
    "offload": (offload_program, _offload_data, _offload_check),
    "dp_sgd": (dpsgd_program, _dpsgd_data, _dpsgd_check),
    "profiler": (profiler_program, _profiler_data, _profiler_check),
    "tensorboard": (tensorboard_program, _tensorboard_data, _tensorboard_check),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_runs_on_minidl_and_its_references_hold(name, tmp_path):
    program, make_data, check = PROGRAMS[name]
    d = dict(make_data(), tmp=tmp_path)
    check(program(minidl, d), d)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_matches_pytorch(name, tmp_path):
    torch = pytest.importorskip("torch")
    program, make_data, _ = PROGRAMS[name]
    ref = program(torch, dict(make_data(), tmp=tmp_path))
    got = program(minidl, dict(make_data(), tmp=tmp_path))
    assert list(got) == list(ref)
    for key, want in ref.items():
        have = got[key]
        if isinstance(want, np.ndarray):
            assert have.dtype == want.dtype and have.shape == want.shape, (key, have.dtype, want.dtype)
            tol = dict(rtol=1e-9, atol=1e-11) if want.dtype == np.float64 else dict(rtol=2e-4, atol=2e-5)
            np.testing.assert_allclose(have, want, err_msg=key, **tol)
        else:
            assert have == want, key


# (9) a parameter server over two threaded ranks (minidl only: torch's process groups are not threads):
# rank 0 serves the weights and trains on shard 0, rank 1 trains on shard 1. The run's settings go out
# with broadcast_object_list, the weights each step with broadcast, rank 1's gradients come back with
# send/recv, and both ranks' losses are collected with all_gather_object. Equal shards make the server's
# averaged gradient the full batch's, so the run must equal full-batch gradient descent in NumPy.
def _parameter_server(rank, data):
    import minidl.distributed as dist
    import minidl.nn as nn
    import minidl.nn.functional as F
    import minidl.optim as optim

    config = [{"lr": 0.2, "steps": 5, "shards": [(0, 8), (8, 16)]} if rank == 0 else None]
    dist.broadcast_object_list(config, src=0)
    config = config[0]
    lo, hi = config["shards"][rank]
    x, y = minidl.tensor(data["x"][lo:hi]), minidl.tensor(data["y"][lo:hi])
    model = nn.Linear(3, 1)
    with minidl.no_grad():
        model.weight.zero_()
        model.bias.zero_()
    opt = optim.SGD(model.parameters(), lr=config["lr"]) if rank == 0 else None
    history = []
    for _ in range(config["steps"]):
        for p in model.parameters():
            dist.broadcast(p.data, src=0)
        model.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        losses = [None, None]
        dist.all_gather_object(losses, {"rank": rank, "loss": loss.item()})
        history.append(losses)
        if rank == 1:
            for p in model.parameters():
                dist.send(p.grad, dst=0)
        else:
            for p in model.parameters():
                remote = minidl.empty_like(p.grad)
                dist.recv(remote, src=1)
                p.grad = (p.grad + remote) / 2
            opt.step()
    return history, [p.detach().numpy().copy() for p in model.parameters()]


def test_parameter_server_matches_full_batch_gradient_descent_in_numpy():
    from minidl.distributed.testing import run_ranks
    rng = np.random.default_rng(29)
    x = rng.standard_normal((16, 3)).astype(np.float32)
    data = {"x": x, "y": (x @ [[0.5], [-1.0], [2.0]] - 0.25).astype(np.float32)}
    (history0, params0), (history1, params1) = run_ranks(2, _parameter_server, data)
    assert history0 == history1
    X, Y = data["x"].astype(np.float64), data["y"].astype(np.float64)
    w, b = np.zeros((1, 3)), np.zeros(1)
    for step in range(5):
        shard_losses = [np.mean((X[s] @ w.T + b - Y[s]) ** 2) for s in (slice(0, 8), slice(8, 16))]
        assert [h["rank"] for h in history0[step]] == [0, 1]
        np.testing.assert_allclose([h["loss"] for h in history0[step]], shard_losses, rtol=1e-5)
        r = X @ w.T + b - Y
        w, b = w - 0.2 * 2 * r.T @ X / 16, b - 0.2 * 2 * r.sum(0) / 16
    np.testing.assert_allclose(params0[0], w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(params0[1], b, rtol=1e-5, atol=1e-6)
    # the server's weights after the last update have not been broadcast: rank 1 holds the previous ones
    assert not np.allclose(params1[0], params0[0])
