"""What a training run writes besides its checkpoint: metrics.csv (one row per step),
metrics.json (summary, evaluations, arguments) and loss.png (training loss, the evaluations'
losses and, where there is one, test accuracy)."""
import csv
import json
import os

COLUMNS = ("step", "loss", "lr", "seconds", "throughput")


def new_history():
    return {k: [] for k in COLUMNS}


def show(metrics):
    """{"test_loss": 0.04, "test_acc": 0.9889} -> "test loss 0.0400, test acc 98.89%"."""
    return ", ".join(f"{k.replace('_', ' ')} " + (f"{100 * v:.2f}%" if k.endswith("acc") else f"{v:.4f}")
                     for k, v in metrics.items() if k != "step")


def write(out, history, evals, summary, args, title):
    with open(os.path.join(out, "metrics.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(list(history))
        w.writerows(zip(*history.values()))
    with open(os.path.join(out, "metrics.json"), "w") as f:
        json.dump({"summary": summary, "evals": evals, "args": args}, f, indent=2)
    try:
        plot_loss(history, evals, os.path.join(out, "loss.png"), title)
    except ImportError:
        print('matplotlib is not installed: no loss plot (pip install "minidl[plot]")')


def plot_loss(history, evals, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from ..lab._common import smooth
    fig, ax = plt.subplots(figsize=(7, 4))
    if history["step"]:
        ax.plot(history["step"], history["loss"], alpha=0.3, color="C0", label="train loss (batch)")
        ax.plot(history["step"], smooth(history["loss"], 20), color="C0", label="train loss (20-step mean)")
    keys = [k for k in (evals[0] if evals else {}) if k.endswith("loss")]
    for i, k in enumerate(keys):
        ax.plot([e["step"] for e in evals], [e[k] for e in evals], "o-", color=f"C{i + 1}",
                label=k.replace("_", " "))
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper right")
    acc = [k for k in (evals[0] if evals else {}) if k.endswith("acc")]
    if acc:
        ax2 = ax.twinx()
        ax2.plot([e["step"] for e in evals], [100 * e[acc[0]] for e in evals], "s--", color="C5",
                 label=acc[0].replace("_", " "))
        ax2.set_ylabel("accuracy (%)")
        ax2.legend(loc="center right")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
