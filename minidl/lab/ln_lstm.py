"""Lab ``ln-lstm``: LSTM vs LayerNorm-LSTM vs recurrent BatchNorm on the character corpus, and
what each does on sequences longer than those it was trained on.

Layer normalization was proposed for recurrent networks (Ba, Kiros and Hinton 2016, Section 3.1):
its statistics are each sample's own at each step, so nothing depends on the time step or the
batch. Recurrent BatchNorm (Cooijmans et al. 2016) needs statistics *per time step* (the
pre-activations' distribution changes over the first steps), so a test sequence longer than
any seen in training reaches steps for which no statistics were ever estimated; Cooijmans et al.
reuse the last trained step's population statistics there. The claims tested:

1. training: both normalized LSTMs reach a lower loss than the plain LSTM in the same steps;
2. length: beyond the training length T, BN-LSTM's loss degrades unless step T's statistics are
   reused, while LN-LSTM (and the plain LSTM) keep the loss they have within T.

Setup: the zoo's ``CharLSTM`` with ``norm="none" | "layer" | "batch"`` (nn.LSTM,
nn.LayerNormLSTM, nn.BatchNormLSTM with gains at 0.1), the same seed, batches and Adam schedule,
trained on windows of T characters of the GPT's corpus (the Python documentation text). Then,
in eval mode, the per-position loss on validation windows of 4 T characters, from a zero state.
BN-LSTM is evaluated twice from the same weights: with the statistics of steps >= T as training
left them (never updated: their initial mean 0 and variance 1), and with step T - 1's statistics
copied into every later step (Cooijmans et al.'s rule; the same as ``max_steps=T``).
"""
import numpy as np

from .. import optim, random
from ..autograd import grad_mode
from ..zoo.char_lstm import CharLSTM
from ._common import LabResult, Table, out_dir, progress, pyplot, save_figure, smooth
from ._gpt import corpus

MODELS = (("none", "LSTM"), ("layer", "LayerNorm-LSTM"), ("batch", "BatchNorm-LSTM"))
BN_NO_STATS, BN_REUSED = "BN-LSTM, no statistics beyond T", "BN-LSTM, last step's statistics reused"
# a change in loss (nats/char) below this is read as "no change": one seed, a few hundred windows
SAME = 0.05


def config(quick):
    if quick:
        return dict(embed=32, hidden=64, layers=1, T=32, batch=16, steps=120, lr=4e-3, eval_batches=4,
                    eval_batch=16)
    return dict(embed=64, hidden=128, layers=1, T=64, batch=32, steps=800, lr=3e-3, eval_batches=8,
                eval_batch=32)


def train(norm, cfg, seed):
    """(model, per-step training losses) for one CharLSTM."""
    data = corpus()
    random.manual_seed(seed)
    model = CharLSTM(data.vocab_size, cfg["embed"], cfg["hidden"], cfg["layers"], norm=norm)
    opt = optim.Adam(model.parameters(), lr=cfg["lr"])
    losses = []
    model.train()
    for t in progress(range(cfg["steps"]), f"{dict(MODELS)[norm]}"):
        x, y = data.batch("train", cfg["batch"], cfg["T"], generator=np.random.default_rng((seed, t)))
        _, loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.item()))
    return model, losses


def position_losses(model, cfg, length):
    """Mean cross-entropy (nats/char) at each position 0..length-1 of fixed validation windows,
    eval mode, each window from a zero state."""
    data = corpus()
    rng = np.random.default_rng(12345)
    model.eval()
    total = np.zeros(length)
    with grad_mode.no_grad():
        for _ in range(cfg["eval_batches"]):
            x, y = data.batch("val", cfg["eval_batch"], length, generator=rng)
            logits, _ = model(x)
            z = logits.numpy().astype(np.float64)
            z -= z.max(axis=-1, keepdims=True)
            logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
            nll = -np.take_along_axis(logp, y.numpy()[..., None], axis=-1)[..., 0]
            total += nll.mean(axis=0)
    model.train()
    return total / cfg["eval_batches"]


def reuse_last_statistics(model, T):
    """Copy BatchNormLSTM's per-step running statistics of step T - 1 into every later step."""
    with grad_mode.no_grad():
        for name, b in model.named_buffers():
            if "running_" in name:
                b[T:] = b[T - 1]


def _window_means(curve, T):
    """(mean loss at positions [T/2, T), [T, 2T), [2T, end)): the second half of the training
    length, where context is already long, and the positions beyond it."""
    return float(np.mean(curve[T // 2:T])), float(np.mean(curve[T:2 * T])), float(np.mean(curve[2 * T:]))


def run(quick=True, out=None, seed=0):
    out = out_dir("ln-lstm", out)
    cfg = config(quick)
    T, length = cfg["T"], 4 * cfg["T"]
    tail = 10 if quick else 50
    runs, curves = {}, {}
    for norm, label in MODELS:
        model, losses = train(norm, cfg, seed)
        runs[label] = losses
        curves[label if norm != "batch" else BN_NO_STATS] = position_losses(model, cfg, length)
        if norm == "batch":
            reuse_last_statistics(model, T)
            curves[BN_REUSED] = position_losses(model, cfg, length)
    arch = (f"CharLSTM (embedding {cfg['embed']}, hidden {cfg['hidden']} x {cfg['layers']}), {cfg['steps']} "
            f"steps of {cfg['batch']} windows of T = {T} characters, Adam lr {cfg['lr']:g}")
    training = Table(f"training: {arch}", ["model", "first loss", f"final loss (mean of last {tail})"])
    for label, losses in runs.items():
        training.add(**{"model": label, "first loss": losses[0],
                        f"final loss (mean of last {tail})": float(np.mean(losses[-tail:]))})
    cols = [f"loss at [{T // 2}, {T})", f"loss at [{T}, {2 * T})", f"loss at [{2 * T}, {length})",
            "change beyond T"]
    longer = Table(f"eval mode on {cfg['eval_batches'] * cfg['eval_batch']} validation windows of {length} "
                   f"characters (nats/char)", ["model"] + cols)
    change = {}
    for label, curve in curves.items():
        within, mid, far = _window_means(curve, T)
        change[label] = float(np.mean(curve[T:])) - within
        longer.add(**{"model": label, cols[0]: within, cols[1]: mid, cols[2]: far, cols[3]: change[label]})

    plt = pyplot()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
    colors = {"LSTM": "C0", "LayerNorm-LSTM": "C1", "BatchNorm-LSTM": "C2", BN_NO_STATS: "C2", BN_REUSED: "C2"}
    for label, losses in runs.items():
        a1.plot(smooth(losses, 10), color=colors[label], label=label)
    a1.set_xlabel("training step")
    a1.set_ylabel("training loss (10-step mean, nats/char)")
    a1.set_title(f"training on windows of {T} characters")
    a1.grid(alpha=0.3)
    a1.legend()
    styles = {"LSTM": "-", "LayerNorm-LSTM": "-", BN_NO_STATS: ":", BN_REUSED: "--"}
    for label, curve in curves.items():
        a2.plot(np.arange(length), smooth(curve, 8), styles[label], color=colors[label], label=label)
    a2.axvline(T, color="gray", lw=1)
    a2.text(T, a2.get_ylim()[1], " training length", va="top", fontsize=8, color="gray")
    a2.set_xlabel("position in the validation window")
    a2.set_ylabel("loss (8-position mean, nats/char)")
    a2.set_title(f"eval mode on windows {length // T}x the training length")
    a2.grid(alpha=0.3)
    a2.legend(fontsize=8)
    path = save_figure(fig, out, "ln-lstm")

    final = {label: float(np.mean(losses[-tail:])) for label, losses in runs.items()}
    conclusion = _conclusion(final, change, T, cfg["steps"])
    return LabResult("ln-lstm", [training, longer], path, conclusion, quick,
                     {"losses": runs, "position_losses": {k: v.tolist() for k, v in curves.items()},
                      "change": change, "final": final, "T": T})


def _conclusion(final, change, T, steps):
    def gain(label):
        d = final["LSTM"] - final[label]
        return f"{abs(d):.3f} {'below' if d >= 0 else 'above'}"
    trains = [label for label in ("LayerNorm-LSTM", "BatchNorm-LSTM") if final["LSTM"] - final[label] > SAME]
    if len(trains) == 2:
        verdict = "both normalized LSTMs train faster, as the papers report"
    elif trains:
        verdict = f"only the {trains[0]} trains visibly faster at this scale"
    else:
        verdict = "neither trains visibly faster at this scale (claim 1 does not reproduce here)"
    ln, plain, none, reused = change["LayerNorm-LSTM"], change["LSTM"], change[BN_NO_STATS], change[BN_REUSED]
    if none > ln + SAME:
        ln_ok = ("while LayerNorm-LSTM does not (reproduces)" if ln < plain + SAME else
                 "but so does LayerNorm-LSTM, more than the plain LSTM (reproduces only in part)")
        fix = "removes" if reused <= ln + SAME else "does not remove"
        length = (f"BN-LSTM degrades beyond the training length without statistics for those steps {ln_ok}; "
                  f"reusing the last trained step's statistics (Cooijmans et al.) {fix} the degradation")
    else:
        length = "BN-LSTM shows no degradation beyond the training length at this scale (claim 2 does not reproduce)"
    return (f"after {steps} steps LayerNorm-LSTM's training loss is {gain('LayerNorm-LSTM')} the LSTM's, "
            f"BatchNorm-LSTM's {gain('BatchNorm-LSTM')} ({verdict}); beyond T = {T} the eval loss changes by "
            f"LSTM {plain:+.3f}, LayerNorm-LSTM {ln:+.3f}, BN-LSTM without statistics {none:+.3f}, "
            f"with the last step's reused {reused:+.3f} nats/char: {length}")
