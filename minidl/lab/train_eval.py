"""Lab 3, ``train-eval``: the gap between train-mode and eval-mode outputs during training.

BatchNorm normalizes with the current batch's statistics in training and with its running
averages in evaluation, so the same input gives different outputs in the two modes; the gap
is large early (the running averages, momentum 0.1, lag the changing network) and shrinks as
they catch up. LayerNorm's statistics belong to each sample, so its gap is exactly zero.

At regular steps the experiment takes the batch it just trained on, recomputes the logits in
eval mode and reports the relative gap ||y_train - y_eval|| / ||y_train||, plus the test
accuracy in both modes (train mode on test batches of the training batch size, so BN uses
those batches' statistics; no running statistics are updated by the measurement).
The model: the zoo ResNet with ``norm="batch"`` or ``norm="layer"`` on the digits.
"""
import numpy as np

from .. import optim, random
from ..autograd import grad_mode
from ..data.digits import digits_arrays
from ..nn import functional as F
from ..tensor.factories import tensor
from ..zoo import resnet8
from ._common import LabResult, Table, out_dir, progress, pyplot, save_figure
from ._state import buffers_restored


def accuracy(model, x, y, batch, train_mode):
    correct = 0
    model.train(train_mode)
    with grad_mode.no_grad(), buffers_restored(model):   # no running statistics move
        for i in range(0, len(x) - batch + 1, batch):
            logits = model(tensor(x[i:i + batch])).numpy()
            correct += int((logits.argmax(1) == y[i:i + batch]).sum())
    model.train()
    n = (len(x) // batch) * batch
    return correct / n


def run(quick=True, out=None, seed=0):
    out = out_dir("train-eval", out)
    steps, every, width, batch = (40, 5, 4, 32) if quick else (300, 30, 16, 32)
    xtr, ytr = digits_arrays("train")
    xte, yte = digits_arrays("test")
    gaps, curves = {}, {}
    table = Table(f"ResNet-8 (width {width}) on digits, batch {batch}: train-mode vs eval-mode outputs",
                  ["norm", "step", "relative gap", "test acc (eval mode)", "test acc (train mode)"])
    for norm in ("batch", "layer"):
        random.manual_seed(seed)
        model = resnet8(in_channels=1, num_classes=10, norm=norm, width=width)
        opt = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        rng = np.random.default_rng(seed)
        steps_seen, gap_curve = [], []
        for t in progress(range(1, steps + 1), f"{norm} norm"):
            idx = rng.choice(len(xtr), batch, replace=False)
            xb = tensor(xtr[idx])
            model.train()
            logits = model(xb)
            loss = F.cross_entropy(logits, tensor(ytr[idx]))
            opt.zero_grad()
            loss.backward()
            if t % every == 0 or t == 1:  # before the update, so both modes see the same weights
                y_train = logits.detach().numpy()
                model.eval()
                with grad_mode.no_grad():
                    y_eval = model(xb).numpy()
                model.train()
                gap = float(np.linalg.norm(y_train - y_eval) / max(np.linalg.norm(y_train), 1e-12))
                steps_seen.append(t)
                gap_curve.append(gap)
            opt.step()
        acc_eval = accuracy(model, xte, yte, batch, train_mode=False)
        acc_train = accuracy(model, xte, yte, batch, train_mode=True)
        gaps[norm] = (steps_seen, gap_curve)
        curves[norm] = (acc_eval, acc_train)
        name = "BatchNorm" if norm == "batch" else "LayerNorm"
        for s, g in zip(steps_seen, gap_curve):
            last = s == steps_seen[-1]
            table.add(**{"norm": name, "step": s, "relative gap": g,
                         "test acc (eval mode)": acc_eval if last else "", "test acc (train mode)":
                         acc_train if last else ""})
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for norm, label in (("batch", "BatchNorm"), ("layer", "LayerNorm")):
        s, g = gaps[norm]
        ax.semilogy(s, np.maximum(g, 1e-17), "o-", ms=3, label=f"{label}  (exact 0 drawn at 1e-17)"
                    if norm == "layer" else label)
    ax.set_xlabel("training step")
    ax.set_ylabel("||y_train - y_eval|| / ||y_train||")
    ax.set_title("train-mode vs eval-mode logits on the current batch")
    ax.grid(alpha=0.3, which="both")
    ax.legend()
    path = save_figure(fig, out, "train-eval")
    bn, ln = gaps["batch"][1], gaps["layer"][1]
    conclusion = (f"BatchNorm's train/eval gap is {bn[0]:.2f} at step 1 and {bn[-1]:.2f} at step {steps} "
                  f"({'shrinking' if bn[-1] < bn[0] else 'not shrinking'} as the running averages catch up), "
                  f"LayerNorm's is {max(ln):.1e} throughout; test accuracy BN eval/train mode "
                  f"{100 * curves['batch'][0]:.1f}%/{100 * curves['batch'][1]:.1f}% after {steps} steps")
    return LabResult("train-eval", [table], path, conclusion, quick, {"gaps": gaps, "acc": curves})
