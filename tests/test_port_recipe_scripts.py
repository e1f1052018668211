"""Training recipes as whole scripts in PyTorch's idiom, condensed to tiny sizes and a few steps:
SimCLR (two augmented views, NT-Xent, nesterov SGD with warm restarts), knowledge distillation
(KL on softened logits plus hard labels and hooked features, OneCycleLR over parameter groups,
checkpoint and resume), SWA and EMA weight averaging (AveragedModel, SWALR, update_bn) and a tiny
graph network (GCN, mean/max aggregation and GAT attention by scatter_reduce and index_add_,
early stopping on a deep-copied state_dict). Each takes the framework module, so it ports by
changing the import alone. Every script runs on minidl (CI has no torch); with torch installed
both frameworks start from the same weights and data and must agree. At the end: the
regressions these scripts turned up."""
import copy
import os
import warnings

import numpy as np
import pytest

import minidl
from test_port_whole_scripts import _assert_same, _init, _np, _ns, _params


# (a) SimCLR ------------------------------------------------------------------------------------------------
def simclr_script(torch, workdir, log, epochs=3):
    t = _ns(torch)
    nn, F = t.nn, t.F
    rng = np.random.default_rng(1)
    images = torch.from_numpy(rng.standard_normal((12, 3, 10, 10)).astype(np.float32))
    loader = t.data.DataLoader(t.data.TensorDataset(images), batch_size=6, shuffle=False, drop_last=True)

    def augment(x, offsets, flips, noise):
        views = []
        for i in range(x.size(0)):
            oy, ox = int(offsets[i][0]), int(offsets[i][1])
            crop = x[i, :, oy:oy + 8, ox:ox + 8]
            views.append(torch.flip(crop, dims=[2]) if flips[i] else crop)
        out = torch.stack(views, dim=0)
        out = F.interpolate(F.pad(out, (1, 1, 1, 1), mode='reflect'), size=(8, 8), mode='bilinear', align_corners=False)
        gray = (out * torch.tensor([0.299, 0.587, 0.114]).view(1, 3, 1, 1)).sum(1, keepdim=True).expand(-1, 3, -1, -1)
        out = torch.where(torch.from_numpy(flips).view(-1, 1, 1, 1), 0.8 * out + 0.2 * gray, out)
        kernel = torch.tensor([0.25, 0.5, 0.25])
        kernel = (kernel[:, None] * kernel[None, :]).expand(3, 1, 3, 3).contiguous()
        out = F.conv2d(out, kernel, padding=1, groups=3)
        return (out * 1.1).clamp(-3, 3) + 0.05 * torch.from_numpy(noise)

    class SimCLR(nn.Module):
        def __init__(self, feat_dim=8):
            super().__init__()
            self.encoder = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(inplace=True),
                                         nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU(),
                                         nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten())
            self.projector = nn.Sequential(nn.Linear(16, 16, bias=False), nn.BatchNorm1d(16),
                                           nn.ReLU(inplace=True), nn.Linear(16, feat_dim))

        def forward(self, x):
            h = self.encoder(x)
            return h, self.projector(h)

    def info_nce_loss(features, batch_size, n_views=2, temperature=0.5):
        labels = torch.cat([torch.arange(batch_size) for _ in range(n_views)], dim=0)
        labels = (labels.unsqueeze(0) == labels.unsqueeze(1)).float()
        features = F.normalize(features, dim=1)
        similarity_matrix = torch.matmul(features, features.T)
        mask = torch.eye(labels.shape[0], dtype=torch.bool)
        labels = labels[~mask].view(labels.shape[0], -1)
        similarity_matrix = similarity_matrix[~mask].view(similarity_matrix.shape[0], -1)
        positives = similarity_matrix[labels.bool()].view(labels.shape[0], -1)
        negatives = similarity_matrix[~labels.bool()].view(similarity_matrix.shape[0], -1)
        logits = torch.cat([positives, negatives], dim=1)
        return logits / temperature, torch.zeros(logits.shape[0], dtype=torch.long)

    def nt_xent(z1, z2, temperature=0.5):
        z = F.normalize(torch.cat([z1, z2], dim=0), p=2, dim=-1)
        n = z1.shape[0]
        sim = (z @ z.t() / temperature).masked_fill(torch.eye(2 * n, dtype=torch.bool, device=z.device), float('-inf'))
        return F.cross_entropy(sim, torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)]))

    model = SimCLR()
    _init(torch, model, 11, scale=0.3)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.running_var.abs_()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(optimizer, T_0=2, T_mult=2, eta_min=1e-3)
    criterion = torch.nn.CrossEntropyLoss()
    out = {"losses": [], "alt": [], "lr": [], "top1": []}
    iters = len(loader)
    for epoch in range(epochs):
        for i, (images_b,) in enumerate(loader):
            b = images_b.size(0)
            offs, flips = rng.integers(0, 3, size=(2, b, 2)), rng.random((2, b)) < 0.5
            noise = rng.standard_normal((2, b, 3, 8, 8)).astype(np.float32)
            views = [augment(images_b, offs[k], flips[k], noise[k]) for k in range(2)]
            _, z = model(torch.cat(views, dim=0))
            logits, labels = info_nce_loss(z, b)
            loss = criterion(logits, labels)
            alt = nt_xent(*z.chunk(2))
            optimizer.zero_grad()
            (0.5 * loss + 0.5 * alt).backward()
            optimizer.step()
            scheduler.step(epoch + i / iters)
            top1 = (logits.argmax(dim=1) == labels).float().mean().item() * 100
            out["losses"].append(loss.item())
            out["alt"].append(alt.item())
            out["lr"].append(scheduler.get_last_lr()[0])
            out["top1"].append(top1)
            log(f"Epoch: {epoch}\tLoss: {loss.item():.4f}\tTop1 accuracy: {top1:.2f}\t"
                f"lr {optimizer.param_groups[0]['lr']:.5f}")
    model.eval()
    with torch.no_grad():
        out["h"], out["z"] = (_np(v) for v in model(images[:4, :, 1:9, 1:9]))
    out["sched"] = {k: v for k, v in scheduler.state_dict().items() if k in ("T_i", "T_cur", "last_epoch")}
    out.update(_params(model))
    return out


# (b) knowledge distillation, with a checkpoint saved after epoch ``save_at`` and an optional resume ---------
def distill_script(torch, workdir, log, epochs=4, log_target=False, set_to_none=True, resume=False, save_at=1):
    t = _ns(torch)
    nn, F = t.nn, t.F
    rng = np.random.default_rng(2)
    x = torch.from_numpy(rng.standard_normal((24, 10)).astype(np.float32))
    y = torch.from_numpy(rng.integers(0, 5, 24).astype(np.int64))
    loader = t.data.DataLoader(t.data.TensorDataset(x, y), batch_size=8)
    teacher = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Dropout(0.5), nn.Linear(32, 5))
    student = nn.Sequential(nn.Linear(10, 12), nn.LayerNorm(12), nn.Tanh(), nn.Linear(12, 5))
    regressor = nn.Linear(12, 32, bias=False)
    for seed, m in ((21, teacher), (22, student), (23, regressor)):
        _init(torch, m, seed, scale=0.3)
    teacher.eval()
    for p in teacher.parameters():
        p.requires_grad_(False)
    decay, no_decay = [], []
    for name, param in student.named_parameters():
        (no_decay if name.endswith("bias") or "1." in name else decay).append(param)
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05, "lr": 1e-2},
                                   {"params": no_decay, "weight_decay": 0.0, "lr": 5e-3}], lr=1e-2)
    optimizer.add_param_group({"params": regressor.parameters(), "lr": 1e-3, "weight_decay": 0.0})
    log(str(optimizer))
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=[2e-2, 1e-2, 1e-3], epochs=epochs,
                                                    steps_per_epoch=len(loader), pct_start=0.3)
    kl = nn.KLDivLoss(reduction="batchmean", log_target=log_target)
    feats = {}
    hooks = [teacher[1].register_forward_hook(lambda mod, inp, outp: feats.__setitem__("t", outp)),
             student[2].register_forward_hook(lambda mod, inp, outp: feats.__setitem__("s", outp))]
    path, start = os.path.join(workdir, "kd.pt"), 0
    if resume:
        ckpt = torch.load(path, weights_only=True)
        student.load_state_dict(ckpt["student"])
        regressor.load_state_dict(ckpt["regressor"])
        optimizer.load_state_dict(ckpt["optimizer"])
        scheduler.load_state_dict(ckpt["scheduler"])
        start = ckpt["epoch"] + 1
    T, alpha = 4.0, 0.7
    out = {"losses": [], "soft": [], "lr": [], "mom": [], "grad_none": []}
    for epoch in range(start, epochs):
        student.train()
        for xb, yb in loader:
            with torch.no_grad():
                t_logits = teacher(xb)
            s_logits = student(xb)
            t_soft = F.log_softmax(t_logits / T, dim=-1) if log_target else F.softmax(t_logits / T, dim=-1)
            soft = kl(F.log_softmax(s_logits / T, dim=1), t_soft) * (T * T)
            fit = F.mse_loss(regressor(feats["s"]), feats["t"])
            loss = alpha * soft + (1.0 - alpha) * F.cross_entropy(s_logits, yb) + 0.1 * fit
            optimizer.zero_grad(set_to_none=set_to_none)
            out["grad_none"].append(student[0].weight.grad is None)
            loss.backward()
            optimizer.step()
            scheduler.step()
            out["losses"].append(loss.item())
            out["soft"].append(soft.item())
            out["lr"].append([g["lr"] for g in optimizer.param_groups])
            out["mom"].append(optimizer.param_groups[0]["betas"][0])
        log(f"epoch {epoch}: loss {loss.item():.5f} lr {scheduler.get_last_lr()}")
        if epoch == save_at and not resume:
            torch.save({"epoch": epoch, "student": student.state_dict(), "regressor": regressor.state_dict(),
                        "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict()}, path)
    for h in hooks:
        h.remove()
    student.eval()
    with torch.no_grad():
        out["agree"] = student(x).argmax(1).eq(teacher(x).argmax(dim=1)).sum().item()
        out["fn_kl"] = F.kl_div(F.log_softmax(student(x), 1), F.log_softmax(teacher(x), 1), reduction='batchmean',
                                log_target=True).item()
    out["teacher_grad_none"] = [p.grad is None for p in teacher.parameters()]
    out.update(_params(student))
    return out


# (c) SWA and EMA --------------------------------------------------------------------------------------------
def swa_script(torch, workdir, log, epochs=4):
    t = _ns(torch)
    nn, F = t.nn, t.F
    swa_utils = __import__(f"{torch.__name__}.optim.swa_utils", fromlist=["AveragedModel"])
    AveragedModel, SWALR, update_bn = swa_utils.AveragedModel, swa_utils.SWALR, swa_utils.update_bn
    rng = np.random.default_rng(3)
    x = torch.from_numpy(rng.standard_normal((16, 6)).astype(np.float32))
    y = torch.from_numpy(rng.standard_normal((16, 1)).astype(np.float32))
    loader = t.data.DataLoader(t.data.TensorDataset(x, y), batch_size=4)
    model = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 1))
    _init(torch, model, 31)
    with torch.no_grad():
        model[1].running_var.abs_()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    swa_model = AveragedModel(model)
    ema_model = AveragedModel(model, multi_avg_fn=swa_utils.get_ema_multi_avg_fn(0.9), use_buffers=True)
    custom = AveragedModel(model, avg_fn=lambda averaged, current, num_averaged: 0.8 * averaged + 0.2 * current)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=100)
    swa_start, swa_scheduler = 1, SWALR(optimizer, swa_lr=0.01, anneal_epochs=2, anneal_strategy="cos")
    out = {"losses": [], "lr": []}
    snapshots = []
    for epoch in range(epochs):
        for input, target in loader:
            optimizer.zero_grad()
            loss = F.mse_loss(model(input), target)
            loss.backward()
            optimizer.step()
            ema_model.update_parameters(model)
            out["losses"].append(loss.item())
        if epoch > swa_start:
            swa_model.update_parameters(model)
            custom.update_parameters(model)
            snapshots.append([p.detach().clone() for p in model.parameters()])
            swa_scheduler.step()
        else:
            scheduler.step()
        out["lr"].append(optimizer.param_groups[0]["lr"])
    # the SWA average is the plain mean of the snapshots
    for avg, *ps in zip(swa_model.parameters(), *snapshots):
        torch.testing.assert_close(avg, torch.stack(ps).mean(0))
    out["n_averaged"] = [int(swa_model.n_averaged), int(ema_model.n_averaged.item()), custom.n_averaged.item()]
    before = swa_model.module[1].running_mean.clone()
    update_bn(loader, swa_model)
    out["bn_changed"] = not torch.equal(before, swa_model.module[1].running_mean)
    out["bn_momentum_restored"] = swa_model.module[1].momentum
    swa_model.eval()
    ema_model.eval()
    with torch.no_grad():
        out["swa_pred"], out["ema_pred"] = _np(swa_model(x)), _np(ema_model(x))
        out["diffs"] = [(a - b).abs().max().item() for a, b in zip(swa_model.parameters(), model.parameters())]
    out["swa_keys"] = list(swa_model.state_dict().keys())
    path = os.path.join(workdir, "swa.pt")
    torch.save(swa_model.state_dict(), path)
    fresh = AveragedModel(model)
    fresh.load_state_dict(torch.load(path))
    out["reloaded_n"] = int(fresh.n_averaged)
    for name, m in (("swa.", swa_model), ("ema.", ema_model), ("custom.", custom)):
        out.update(_params(m, name))
    log(f"swa n={int(swa_model.n_averaged)} final lr {swa_scheduler.get_last_lr()}")
    return out


# (d) a tiny graph network on a random graph with two isolated nodes -----------------------------------------
def gcn_script(torch, workdir, log, epochs=6, patience=2, p=0.0):
    t = _ns(torch)
    nn, F = t.nn, t.F
    rng = np.random.default_rng(4)
    N, C_in, n_cls = 14, 5, 3
    edge_index = torch.from_numpy(rng.integers(0, N - 2, (2, 30)).astype(np.int64))   # nodes 12, 13: no edges
    edge_index = torch.cat([edge_index, edge_index.flip(0)], dim=1)
    x = torch.from_numpy(rng.standard_normal((N, C_in)).astype(np.float32))
    y = torch.from_numpy(rng.integers(0, n_cls, N).astype(np.int64))
    train_mask = torch.zeros(N, dtype=torch.bool)
    train_mask[:6] = True
    val_mask = torch.zeros(N, dtype=torch.bool)
    val_mask[6:9] = True
    test_mask = ~(train_mask | val_mask)
    out = {}

    def gcn_norm(ei, n):
        row, col = ei
        deg_inv_sqrt = torch.bincount(col, minlength=n).to(torch.float32).pow(-0.5)
        deg_inv_sqrt[torch.isinf(deg_inv_sqrt)] = 0
        return deg_inv_sqrt[row] * deg_inv_sqrt[col]

    def dense_adj(ei, n):
        A = torch.zeros(n, n)   # a repeated edge counts twice, as in the scattered sum
        A.index_put_((ei[0], ei[1]), torch.ones(ei.size(1)), accumulate=True)
        d = (A + torch.eye(n)).sum(dim=1).pow(-0.5)
        d.masked_fill_(d == float('inf'), 0.)
        return d.view(-1, 1) * (A + torch.eye(n)) * d.view(1, -1)

    class GCNConv(nn.Module):
        def __init__(self, cin, cout):
            super().__init__()
            self.lin = nn.Linear(cin, cout, bias=False)
            self.bias = nn.Parameter(torch.empty(cout))
            nn.init.zeros_(self.bias)

        def forward(self, x, ei, norm):
            h = self.lin(x)
            return torch.zeros_like(h).index_add_(0, ei[1], h[ei[0]] * norm.view(-1, 1)) + self.bias

    class SAGE(nn.Module):
        def __init__(self, cin, cout):
            super().__init__()
            self.lin_l, self.lin_r = nn.Linear(cin, cout), nn.Linear(cin, cout, bias=False)

        def forward(self, x, ei):
            idx = ei[1].unsqueeze(-1).expand(-1, x.size(1))
            mean = torch.zeros(x.size(0), x.size(1)).scatter_reduce_(0, idx, x[ei[0]], reduce="mean",
                                                                     include_self=False)
            mx = torch.full((x.size(0), x.size(1)), -1e4).scatter_reduce(0, idx, x[ei[0]], reduce="amax",
                                                                        include_self=False)
            s = torch.zeros_like(x).scatter_add_(0, idx, x[ei[0]])
            return self.lin_l(mean) + self.lin_r(x) + 0.1 * mx.clamp(min=-1) + 0.01 * s

    class GATConv(nn.Module):
        def __init__(self, cin, cout, heads=2):
            super().__init__()
            self.heads, self.cout = heads, cout
            self.lin = nn.Linear(cin, heads * cout, bias=False)
            self.att_src = nn.Parameter(torch.empty(1, heads, cout))
            self.att_dst = nn.Parameter(torch.empty(1, heads, cout))

        def forward(self, x, ei):
            src, dst = ei
            h = self.lin(x).view(-1, self.heads, self.cout)
            e = F.leaky_relu((h * self.att_src).sum(-1)[src] + (h * self.att_dst).sum(-1)[dst], 0.2)
            e_max = torch.full((x.size(0), self.heads), float('-inf')).scatter_reduce(
                0, dst.unsqueeze(-1).expand_as(e), e, reduce='amax', include_self=False)
            w = (e - e_max.index_select(0, dst)).exp()
            alpha = w / (torch.zeros(x.size(0), self.heads).index_add_(0, dst, w)[dst] + 1e-16)
            return torch.zeros_like(h).index_add_(0, dst, h[src] * alpha.unsqueeze(-1)).mean(dim=1)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.sage = GCNConv(C_in, 16), SAGE(16, 16)
            self.gat, self.conv2 = GATConv(16, 16), GCNConv(16, n_cls)

        def forward(self, x, ei, norm):
            x = F.relu(self.conv1(F.dropout(x, p=p, training=self.training), ei, norm))
            x = F.elu(self.sage(x, ei))
            x = F.dropout(x + F.elu(self.gat(x, ei)), p=p, training=self.training)
            return F.log_softmax(self.conv2(x, ei, norm), dim=1)

    ei = torch.cat([edge_index, torch.arange(N, dtype=edge_index.dtype).unsqueeze(0).repeat(2, 1)], dim=1)
    norm = gcn_norm(ei, N)
    out["inf_before_mask"] = int(torch.isinf(torch.bincount(edge_index[1], minlength=N).float().pow(-0.5)).sum())
    out["dense_prop"] = _np(dense_adj(edge_index, N) @ x)   # the dense propagation equals the scattered one
    out["sparse_prop"] = _np(torch.zeros_like(x).index_add_(0, ei[1], x[ei[0]] * norm.unsqueeze(1)))
    deg_row = torch.zeros(N).scatter_add_(0, edge_index[0], torch.ones(edge_index.size(1)))
    deg_inv = 1.0 / deg_row
    deg_inv[deg_inv == float('inf')] = 0
    out["mean_prop"] = _np(torch.zeros_like(x).index_add_(0, edge_index[0], x[edge_index[1]]) * deg_inv.unsqueeze(1))
    out["isolated"] = int((deg_row == 0).sum())
    model = Net()
    _init(torch, model, 41, scale=0.4)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05, weight_decay=5e-4)
    best_val, best_state, bad = -1.0, None, 0
    out.update(losses=[], val=[], stopped=None)
    for epoch in range(epochs):
        model.train()
        optimizer.zero_grad()
        loss = F.nll_loss(model(x, ei, norm)[train_mask], y[train_mask])
        loss.backward()
        optimizer.step()
        model.eval()
        with torch.no_grad():
            pred = model(x, ei, norm).argmax(dim=1)
            accs = [int((pred[m] == y[m]).sum()) / int(m.sum()) for m in (train_mask, val_mask, test_mask)]
        out["losses"].append(loss.item())
        out["val"].append(accs[1])
        log(f"Epoch: {epoch:03d}, Loss: {loss:.4f}, Train: {accs[0]:.4f}, Val: {accs[1]:.4f}, Test: {accs[2]:.4f}")
        if accs[1] > best_val:
            best_val, bad, out["best_epoch"] = accs[1], 0, epoch
            best_state = copy.deepcopy(model.state_dict())
        else:
            bad += 1
            if bad >= patience:
                out["stopped"] = epoch
                break
    out["final"] = _params(model, "final.")
    path = os.path.join(workdir, "best.pt")
    torch.save(best_state, path)
    model.load_state_dict(torch.load(path, weights_only=True))
    out.update(_params(model))
    out["best_val"] = best_val
    return out


SCRIPTS = {"simclr": simclr_script, "distill": distill_script, "swa": swa_script, "gcn": gcn_script}


def _run(torch, name, tmp_path, **kw):
    workdir = tmp_path / torch.__name__
    workdir.mkdir(exist_ok=True)
    lines = []
    torch.manual_seed(0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = SCRIPTS[name](torch, str(workdir), lines.append, **kw)
    out["printed"] = "\n".join(lines)
    out["warnings"] = [str(w.message).replace(torch.__name__, "torch") for w in caught]
    return out


def _sanity(name, out):
    assert out["warnings"] == [], out["warnings"]
    assert np.all(np.isfinite(out["losses"])) and len(out["losses"]) >= 2
    assert all(np.all(np.isfinite(v)) for k, v in out.items() if k.startswith(("p.", "swa.", "ema.", "custom.")))
    if name == "simclr":
        # the two NT-Xent formulations (positives gathered first; the diagonal masked to -inf) are one loss
        np.testing.assert_allclose(out["losses"], out["alt"], rtol=1e-5)
        assert out["h"].shape == (4, 16) and out["z"].shape == (4, 8)
        assert out["lr"][4] == pytest.approx(0.1) and out["sched"]["T_i"] == 4   # the restart at epoch 2
    elif name == "distill":
        assert out["losses"][-1] < out["losses"][0] and out["teacher_grad_none"] == [True] * 4
        assert max(lr[0] for lr in out["lr"]) == pytest.approx(2e-2, rel=0.05) and out["lr"][-1][0] < 1e-3
        assert "\n\nParameter Group 1" in out["printed"]
    elif name == "swa":
        assert out["n_averaged"] == [2, 16, 2] and out["bn_changed"] and out["bn_momentum_restored"] == 0.1
        assert out["reloaded_n"] == 2 and out["swa_keys"][0] == "n_averaged" and max(out["diffs"]) > 0
    elif name == "gcn":
        assert out["isolated"] == 2 and out["inf_before_mask"] == 2   # before the self-loops
        np.testing.assert_allclose(out["dense_prop"], out["sparse_prop"], rtol=1e-5, atol=1e-6)
        assert np.all(out["mean_prop"][-2:] == 0)
        best = {k: v for k, v in out.items() if k.startswith("p.")}
        assert out["stopped"] is None or any(not np.array_equal(v, out["final"]["final." + k[2:]])
                                             for k, v in best.items())


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_recipe_runs_on_minidl_alone(name, tmp_path):
    _sanity(name, _run(minidl, name, tmp_path))


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_recipe_matches_pytorch_from_the_same_weights(name, tmp_path):
    torch = pytest.importorskip("torch")
    _assert_same(_run(minidl, name, tmp_path), _run(torch, name, tmp_path), name)


@pytest.mark.parametrize("name,kw", [("distill", dict(log_target=True)), ("distill", dict(set_to_none=False)),
                                     ("gcn", dict(p=0.5))])
def test_recipe_variants_run_on_minidl(name, kw, tmp_path):
    out = _run(minidl, name, tmp_path, **kw)
    _sanity(name, out)
    if kw.get("set_to_none") is False:   # zeroed in place after the first step, never None again
        assert out["grad_none"] == [True] + [False] * (len(out["grad_none"]) - 1)


def test_distillation_resumed_from_its_checkpoint_ends_where_the_whole_run_does(tmp_path):
    whole = _run(minidl, "distill", tmp_path)
    resumed = _run(minidl, "distill", tmp_path, resume=True)
    assert len(resumed["losses"]) == len(whole["losses"]) // 2
    np.testing.assert_allclose(resumed["losses"], whole["losses"][-len(resumed["losses"]):], rtol=1e-6)
    for k, v in whole.items():
        if k.startswith("p."):
            np.testing.assert_allclose(resumed[k], v, rtol=1e-6, atol=1e-7, err_msg=k)


# regressions ------------------------------------------------------------------------------------------------
def _quietly(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return fn()


@pytest.mark.parametrize("call", [lambda md: md.tensor([0., 1., 4.]).pow(-0.5), lambda md: md.tensor([0., 4.]).rsqrt(),
                                  lambda md: md.tensor([-1., 4.]) ** 0.5, lambda md: md.tensor([0., 2.]).pow_(-1),
                                  lambda md: md.float_power(md.tensor([0., 2.]), -1),
                                  lambda md: 0.0 ** md.tensor([-1., 2.]),
                                  lambda md: md.tensor([0., 2.]) ** md.tensor([-1., -2.])])
def test_pow_at_its_poles_gives_inf_and_nan_without_a_numpy_warning(call):
    """A GCN's deg.pow(-0.5) of an isolated node: inf (masked next), silently, as PyTorch."""
    out = _quietly(lambda: call(minidl)).numpy()
    assert np.isinf(out).any() or np.isnan(out).any()
    torch = pytest.importorskip("torch")
    np.testing.assert_array_equal(out, call(torch).numpy())


def test_batchnorm_eval_with_a_negative_running_var_is_nan_without_a_numpy_warning():
    bn = minidl.nn.BatchNorm1d(2).eval()
    with minidl.no_grad():
        bn.running_var.copy_(minidl.tensor([-2.0, 1.0]))
    y = _quietly(lambda: bn(minidl.ones(3, 2))).detach().numpy()
    assert np.isnan(y[:, 0]).all() and np.isfinite(y[:, 1]).all()


def _schedulers(torch, optimizer):
    S = torch.optim.lr_scheduler
    swa = __import__(f"{torch.__name__}.optim.swa_utils", fromlist=["SWALR"])
    return [S.LambdaLR(optimizer, lambda e: 0.5 ** e), S.MultiplicativeLR(optimizer, lambda e: 0.9),
            S.StepLR(optimizer, 2), S.MultiStepLR(optimizer, [1]), S.ConstantLR(optimizer), S.LinearLR(optimizer),
            S.ExponentialLR(optimizer, 0.9), S.PolynomialLR(optimizer), S.CosineAnnealingLR(optimizer, 4),
            S.CyclicLR(optimizer, 0.01, 0.1), S.CosineAnnealingWarmRestarts(optimizer, 2),
            S.OneCycleLR(optimizer, 0.1, total_steps=5), swa.SWALR(optimizer, swa_lr=0.01)]


def _get_lr_warnings(torch):
    counts = []
    for k in range(13):
        model = torch.nn.Linear(2, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            scheduler = _schedulers(torch, optimizer)[k]   # the others are built (and stepped) quietly
            optimizer.step()
            scheduler.step()
            scheduler.step(1) if k == 10 else None   # warm restarts' fractional-epoch step
            quiet = len(caught)
            scheduler.get_lr()
        counts.append((quiet, [str(w.message) for w in caught[quiet:]]))
    return counts


def test_get_lr_called_by_hand_warns_as_pytorch_and_stepping_does_not():
    ours = _get_lr_warnings(minidl)
    message = "To get the last learning rate computed by the scheduler, please use `get_last_lr()`."
    assert all(quiet == 0 and by_hand == [message] for quiet, by_hand in ours), ours

    class Custom(minidl.optim.lr_scheduler.LRScheduler):   # a user's own get_lr: no warning, as PyTorch
        def get_lr(self):
            return [0.5 for _ in self.optimizer.param_groups]
    scheduler = Custom(minidl.optim.SGD(minidl.nn.Linear(2, 2).parameters(), lr=0.1))
    assert _quietly(scheduler.get_lr) == [0.5]
    torch = pytest.importorskip("torch")
    assert ours == _get_lr_warnings(torch)


def test_optimizer_repr_separates_parameter_groups_by_a_blank_line():
    def make(torch):
        model = torch.nn.Linear(2, 2)
        return repr(torch.optim.SGD([{"params": [model.weight]}, {"params": [model.bias], "lr": 0.5}], lr=0.1))
    ours = make(minidl)
    assert "weight_decay: 0\n\nParameter Group 1\n" in ours and ours.startswith("SGD (\nParameter Group 0\n")
    torch = pytest.importorskip("torch")
    assert ours == make(torch)


_CLOSE_CASES = {
    "equal": (lambda md: md.ones(3), lambda md: md.ones(3) + 1e-7, {}),
    "far": (lambda md: md.tensor([[1., 2.], [3., 4.]]), lambda md: md.tensor([[1., -2.], [3., 4.5]]), {}),
    "ints": (lambda md: md.tensor([1, 2, 3]), lambda md: md.tensor([1, 2, 7]), {}),
    "0-d": (lambda md: md.tensor(1.0), lambda md: md.tensor(1.5), {}),
    "shape": (lambda md: md.ones(2), lambda md: md.ones(3), {}),
    "dtype": (lambda md: md.ones(2), lambda md: md.ones(2, dtype=md.float64), {}),
    "promoted": (lambda md: md.tensor([1, 2]), lambda md: md.tensor([1., 2.5]), {"check_dtype": False}),
    "loose": (lambda md: md.ones(2), lambda md: md.ones(2) * 1.01, {"rtol": 0.1, "atol": 0.0}),
    "one_tolerance": (lambda md: md.ones(2), lambda md: md.ones(2), {"rtol": 0.1}),
    "nan": (lambda md: md.tensor([float("nan")]), lambda md: md.tensor([float("nan")]), {}),
    "equal_nan": (lambda md: md.tensor([float("nan")]), lambda md: md.tensor([float("nan")]), {"equal_nan": True}),
    "nested": (lambda md: {"a": [md.ones(2), 1.0]}, lambda md: {"a": [md.ones(2), 1.5]}, {}),
    "keys": (lambda md: {"a": md.ones(2)}, lambda md: {"b": md.ones(2)}, {}),
    "length": (lambda md: [md.ones(1)], lambda md: [md.ones(1), md.ones(1)], {}),
    "numbers": (lambda md: 1, lambda md: 1.0, {}),
    "none": (lambda md: None, lambda md: 0, {}),
    "arrays": (lambda md: np.ones(2), lambda md: np.ones(2) * 2, {}),
    "msg": (lambda md: [md.ones(2)], lambda md: [md.zeros(2)], {"msg": lambda m: "Header\n" + m}),
}


def _assert_close_outcome(torch, name):
    actual, expected, kw = _CLOSE_CASES[name]
    try:
        torch.testing.assert_close(actual(torch), expected(torch), **kw)
        return "ok"
    except (AssertionError, TypeError, ValueError) as e:
        return f"{type(e).__name__}: {e}".replace("torch.", "minidl.")


@pytest.mark.parametrize("name", sorted(_CLOSE_CASES))
def test_testing_assert_close_as_pytorch(name):
    """torch.testing.assert_close: the comparison tests of averaged weights are written with."""
    ours = _assert_close_outcome(minidl, name)
    expected_kind = {"equal": "ok", "equal_nan": "ok", "promoted": "AssertionError", "one_tolerance": "ValueError",
                     "numbers": "AssertionError", "none": "AssertionError", "loose": "ok"}.get(name, "AssertionError")
    assert ours.split(":")[0] == expected_kind, ours
    if name == "far":
        assert "Mismatched elements: 2 / 4 (50.0%)" in ours
        assert "Greatest absolute difference: 4.0 at index (0, 1)" in ours
    torch = pytest.importorskip("torch")
    assert ours == _assert_close_outcome(torch, name)
