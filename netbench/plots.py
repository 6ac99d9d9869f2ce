"""The report's curves as inline SVG (matplotlib): nothing to fetch, so the
page opens from a file:// URL on an air-gapped login node."""

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

plt.rcParams.update({
    "svg.fonttype": "none",       # text stays text: small files, selectable labels
    "svg.hashsalt": "netbench",   # stable element ids between runs
    "font.size": 9,
    "axes.grid": True,
    "grid.alpha": 0.3,
})
STYLES = ["-", "--", ":", "-."]


def _svg(fig):
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]      # drop the XML prologue for inlining


def curve_plot(series, xlabel, ylabel, title, logy=True, references=(), hlines=()):
    """series: [(label, xs, ys, style index)]; references: [(label, x, y)]
    drawn as markers; hlines: [(label, y)] such as a line rate."""
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for label, xs, ys, style in series:
        ax.plot(xs, ys, STYLES[style % len(STYLES)], marker=".", markersize=3, label=label,
                linewidth=1.2)
    for label, x, y in references:
        ax.plot([x], [y], marker="D", linestyle="none", markersize=6, label=label)
    for label, y in hlines:
        ax.axhline(y, color="grey", linestyle="--", linewidth=1, label=label)
    ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if series or references:
        ax.legend(fontsize=7, loc="best")
    return _svg(fig)


def scaling_plot(series, title):
    """Throughput per process vs number of processes: [(label, ranks, MB/s)]."""
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    for i, (label, xs, ys) in enumerate(series):
        ax.plot(xs, ys, STYLES[i % len(STYLES)], marker="o", label=label)
    ax.set_xlabel("processes")
    ax.set_ylabel("peak throughput per process (MB/s)")
    ax.set_title(title)
    ax.set_xticks(sorted({x for _, xs, _ in series for x in xs}) or [2])
    if series:
        ax.legend(fontsize=7, loc="best")
    return _svg(fig)
