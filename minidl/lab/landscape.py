"""Lab, ``landscape``: how BatchNorm changes the loss landscape along the gradient (Santurkar et
al. 2018, "How does batch normalization help optimization?").

Santurkar et al. argue that BatchNorm helps because it makes the loss and its gradient smoother
along the directions training moves in, not because it reduces "internal covariate shift". Two
measurements, here on a small VGG (``zoo.vgg``) with and without BatchNorm trained on the colour
shapes of ``minidl.data.shapes``:

1. Every EVERY steps, at the current weights w with the batch's gradient g, the loss and the
   gradient are evaluated at w - eta g for step sizes eta in ETAS x the learning rate, on the same
   batch (train mode, no running statistic moved):
   - loss variation: max_eta L(w - eta g) - min_eta L(w - eta g);
   - gradient predictiveness: max_eta ||grad L(w) - grad L(w - eta g)|| (how far the gradient one
     step away is from the one we stepped with);
   - "effective beta-smoothness": max_eta ||grad L(w) - grad L(w - eta g)|| / ||eta g||.
2. "Noisy BatchNorm": after every BatchNorm a random per-channel scale and shift, drawn afresh
   at every step (scale from exp(N(0, NOISE)), shift from N(0, NOISE)), so the distribution of
   each layer's input keeps moving (large covariate shift by construction). The paper finds it
   trains about as fast as BatchNorm, and far faster than no normalization.
"""
import numpy as np

from .. import nn, optim, random
from ..autograd import grad_mode
from ..data.shapes import shapes_arrays
from ..nn import functional as F
from ..nn import init as nn_init
from ..tensor.factories import tensor
from ..zoo.vgg import VGG
from ._common import LabResult, Table, eval_accuracy, out_dir, progress, pyplot, save_figure, smooth
from ._state import buffers_restored

ETAS = (0.5, 1.0, 2.0, 4.0)
NOISE = 0.5
LR = 0.05
DIFFICULTY = 0.2
BATCH = 32
# (train images, test images, image size, steps, measure every, VGG cfg) per mode
QUICK = (800, 300, 16, 150, 25, (16, "M", 32, "M", 64))
FULL = (3000, 500, 16, 1200, 100, (32, 32, "M", 64, 64, "M", 128))


class NoisyBatchNorm2d(nn.BatchNorm2d):
    """BatchNorm2d followed, in training, by a per-channel scale exp(N(0, noise)) and shift
    N(0, noise), drawn anew at every forward (shared by the batch)."""

    def __init__(self, num_features, noise=NOISE, rng=None):
        super().__init__(num_features)
        self.noise = noise
        self.rng = rng if rng is not None else np.random.default_rng(0)

    def forward(self, x):
        y = super().forward(x)
        if not self.training:
            return y
        c = self.num_features
        scale = np.exp(self.rng.normal(0.0, self.noise, (1, c, 1, 1))).astype(np.float32)
        shift = self.rng.normal(0.0, self.noise, (1, c, 1, 1)).astype(np.float32)
        return y * tensor(scale) + tensor(shift)


def build(kind, cfg, seed):
    """The VGG for ``kind`` ("none", "batch" or "noisy"), its convolutions He-initialised
    (kaiming normal, fan_out, as torchvision's VGG) so that the unnormalized network trains too."""
    random.manual_seed(seed)
    if kind == "noisy":
        rng = np.random.default_rng((seed, 11))
        model = VGG(cfg, in_channels=3, num_classes=10, norm=lambda c: NoisyBatchNorm2d(c, rng=rng))
    else:
        model = VGG(cfg, in_channels=3, num_classes=10, norm=kind)
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn_init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            if m.bias is not None:
                nn_init.zeros_(m.bias)
    return model


def _grads(model):
    return [p.grad.numpy().astype(np.float64).ravel() for p in model.parameters()]


def loss_and_grad(model, x, y):
    model.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    return float(loss.item()), np.concatenate(_grads(model))


def probe(model, x, y, g, lr):
    """(loss variation, gradient predictiveness, beta-smoothness) along -g from the current weights."""
    params = list(model.parameters())
    saved = [p.detach().clone() for p in params]
    sizes = [p.numel() for p in params]
    offsets = np.cumsum([0] + sizes)
    losses, deltas, betas = [], [], []
    with buffers_restored(model):
        for eta in ETAS:
            step = eta * lr
            with grad_mode.no_grad():
                for p, s, lo, hi in zip(params, saved, offsets[:-1], offsets[1:]):
                    p.copy_(s - tensor((step * g[lo:hi]).reshape(p.shape).astype(np.float32)))
            loss, g2 = loss_and_grad(model, x, y)
            losses.append(loss)
            deltas.append(float(np.linalg.norm(g - g2)))
            betas.append(deltas[-1] / max(step * float(np.linalg.norm(g)), 1e-12))
        with grad_mode.no_grad():
            for p, s in zip(params, saved):
                p.copy_(s)
    model.zero_grad()
    return max(losses) - min(losses), max(deltas), max(betas)


def train(kind, cfg, xtr, ytr, steps, every, seed, measure):
    model = build(kind, cfg, seed)
    opt = optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    rng = np.random.default_rng(seed)
    losses, probes = [], []
    model.train()
    for t in progress(range(steps), kind):
        idx = rng.choice(len(xtr), BATCH, replace=False)
        x, y = tensor(xtr[idx]), tensor(ytr[idx])
        if measure and t % every == 0:
            with buffers_restored(model):
                _, g = loss_and_grad(model, x, y)
            if np.isfinite(g).all():
                probes.append((t, *probe(model, x, y, g, LR)))
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(float(loss.item()))
    return model, losses, probes


MODELS = (("standard (no norm)", "none", True), ("BatchNorm", "batch", True), ("noisy BatchNorm", "noisy", False))


def run(quick=True, out=None, seed=0):
    out = out_dir("landscape", out)
    n_train, n_test, size, steps, every, cfg = QUICK if quick else FULL
    (xtr, ytr), (xte, yte) = [shapes_arrays(split, n, 10, DIFFICULTY, size) for split, n in
                              (("train", n_train), ("test", n_test))]
    xtr, xte = (xtr - 0.5) / 0.25, (xte - 0.5) / 0.25
    t1 = Table(f"VGG {cfg} on shapes ({size}x{size}), SGD lr {LR:g} momentum 0.9, batch {BATCH}, {steps} steps: "
               f"along -grad, step sizes {', '.join(f'{e:g}' for e in ETAS)} x lr (medians over the run)",
               ["model", "loss variation", "gradient predictiveness", "beta-smoothness"])
    t2 = Table("Training speed", ["model", "loss after 1/3 of the steps", "final train loss", "test acc"])
    curves, probes, summary = {}, {}, {}
    for name, kind, measure in MODELS:
        model, curves[name], probes[name] = train(kind, cfg, xtr, ytr, steps, every, seed, measure)
        third = float(np.mean(curves[name][max(0, steps // 3 - 10):steps // 3]))
        summary[name] = {"third": third, "final": float(np.mean(curves[name][-20:])),
                         "acc": eval_accuracy(model, xte, yte)}
        if measure:
            p = np.array([row[1:] for row in probes[name]])
            med = np.median(p, axis=0)
            summary[name].update(variation=float(med[0]), predictiveness=float(med[1]), beta=float(med[2]))
            t1.add(**{"model": name, "loss variation": med[0], "gradient predictiveness": med[1],
                      "beta-smoothness": med[2]})
        t2.add(**{"model": name, "loss after 1/3 of the steps": third, "final train loss": summary[name]["final"],
                  "test acc": summary[name]["acc"]})
    path = plot(curves, probes, out)
    return LabResult("landscape", [t1, t2], path, conclude(summary), quick,
                     {"losses": curves, "probes": probes, "summary": summary})


def conclude(s):
    std, bn, noisy = s["standard (no norm)"], s["BatchNorm"], s["noisy BatchNorm"]
    if max(m["acc"] for m in s.values()) < 0.25:
        return (f"every model stayed near chance (best test accuracy {100 * max(m['acc'] for m in s.values()):.1f}%, "
                f"chance 10%): too little training to compare landscapes (quick mode only checks that the "
                f"measurements run)")
    ratio = {k: std[k] / max(bn[k], 1e-12) for k in ("variation", "predictiveness", "beta")}
    smoother = [k for k, r in ratio.items() if r > 1.0]
    head = (f"along the gradient, the loss varies {ratio['variation']:.2f}x, the gradient changes "
            f"{ratio['predictiveness']:.2f}x and the effective beta-smoothness is {ratio['beta']:.2f}x as large "
            f"without BatchNorm as with it (medians)")
    if len(smoother) == 3:
        verdict = "BatchNorm's landscape is smoother on all three measures, as Santurkar et al. report"
    elif smoother:
        verdict = (f"smoother with BatchNorm on {', '.join(smoother)} only; the claim holds partly at this scale "
                   f"(a few hundred steps of a small VGG)")
    else:
        verdict = "the smoothing claim does not reproduce at this scale (a few hundred steps of a small VGG)"
    gap_bn = std["third"] - bn["third"]
    gap_noisy = noisy["third"] - bn["third"]
    if gap_bn > 0.05 and gap_noisy < 0.5 * gap_bn:
        noise = (f"noisy BatchNorm trains about as fast as BatchNorm (loss after a third of the run "
                 f"{noisy['third']:.3f} "
                 f"vs {bn['third']:.3f}, no norm {std['third']:.3f}): covariate shift injected on purpose does not "
                 f"undo BatchNorm's benefit")
    else:
        noise = (f"noisy BatchNorm's loss after a third of the run is {noisy['third']:.3f} vs BatchNorm "
                 f"{bn['third']:.3f} "
                 f"and no norm {std['third']:.3f}: " + ("BatchNorm did not train clearly faster than no norm here"
                                                        if gap_bn <= 0.05 else "the noise slowed training here"))
    return f"{head}: {verdict}; {noise}"


def plot(curves, probes, out):
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    for k, (name, p) in enumerate(probes.items()):
        if not p:
            continue
        p = np.array(p)
        axes[0].semilogy(p[:, 0], p[:, 1], "o-", ms=3, color=f"C{k}", label=name)
        axes[1].semilogy(p[:, 0], p[:, 2], "o-", ms=3, color=f"C{k}", label=name)
    for k, (name, losses) in enumerate(curves.items()):
        axes[2].plot(np.arange(1, len(losses) + 1), smooth(losses, 20), color=f"C{k}", label=name)
    for ax, ylabel, title in ((axes[0], "max - min of L(w - eta g)", "loss variation along the gradient"),
                              (axes[1], "max ||g(w) - g(w - eta g)||", "gradient predictiveness"),
                              (axes[2], "training loss (moving average of 20)", "training speed")):
        ax.set_xlabel("training step")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
    fig.suptitle("VGG with and without BatchNorm: the loss landscape along the gradient; noisy BatchNorm",
                 fontsize=11)
    return save_figure(fig, out, "landscape")
