"""The page's plots as inline SVG (matplotlib): nothing to fetch, so the
page opens from a file:// URL on an air-gapped login node.

build_sections draws every section's plot from the series `sections`
builds of the cases' records.  matplotlib is imported when the first plot
is drawn, not with the package: the ReFrame configuration and the CLI load
netbench.report without drawing anything."""

import functools
import io

from .sections import (CURVE_PLOTS, case_record, curve_plot_data, hockney_fits,
                       line_rates, overhead_series, scaling_points)

STYLES = ["-", "--", ":", "-."]


@functools.cache
def pyplot():
    """matplotlib's pyplot, headless, with the page's style (once)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams.update({
        "svg.fonttype": "none",       # text stays text: small files, selectable labels
        "svg.hashsalt": "netbench",   # stable element ids between runs
        "font.size": 9,
        "axes.grid": True,
        "grid.alpha": 0.3,
    })
    return plt


def _svg(fig):
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    pyplot().close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]      # drop the XML prologue for inlining


def curve_plot(series, xlabel, ylabel, title, logy=True, references=(), hlines=()):
    """series: [(label, xs, ys, style index)]; references: [(label, x, y)]
    drawn as markers; hlines: [(label, y)] such as a line rate."""
    fig, ax = pyplot().subplots(figsize=(6.4, 3.6))
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
    fig, ax = pyplot().subplots(figsize=(6.4, 3.2))
    for i, (label, xs, ys) in enumerate(series):
        ax.plot(xs, ys, STYLES[i % len(STYLES)], marker="o", label=label)
    ax.set_xlabel("processes")
    ax.set_ylabel("peak throughput per process (MB/s)")
    ax.set_title(title)
    ax.set_xticks(sorted({x for _, xs, _ in series for x in xs}) or [2])
    if series:
        ax.legend(fontsize=7, loc="best")
    return _svg(fig)


def build_sections(sessions):
    """The page's plots, from the cases' records alone, for one session or
    overlaid for several; and the Hockney fits."""
    multi = len(sessions) > 1
    curves = {name: ([], {}) for name in CURVE_PLOTS}
    fits, overhead, scaling, every_record = [], [], [], []
    for s in sessions:
        tag = f"[{s.name}] " if multi else ""
        records = [(i, case_record(tc)) for i, tc in enumerate(s.testcases)]
        every_record += records
        for name, plot in CURVE_PLOTS.items():
            series, points = curve_plot_data(plot, records, tag)
            curves[name][0].extend(series)
            curves[name][1].update(points)
        fits += hockney_fits(records, tag)
        overhead += overhead_series(records, tag)
        scaling += [(line, [x for x, _ in sorted(p)], [y for _, y in sorted(p)])
                    for line, p in scaling_points(records, tag).items()]
    svg = {}
    for name, (series, points) in curves.items():
        plot = CURVE_PLOTS[name]
        if series:
            svg[name] = curve_plot(
                series, "message size (bytes)", plot.ylabel, plot.title, logy=plot.logy,
                references=[(label, *xy) for label, xy in points.items()],
                hlines=line_rates(every_record) if plot.line_rates else ())
    if overhead:
        svg["overhead"] = curve_plot(overhead, "message size (bytes)",
                                     "MPI loss against raw TCP (%)",
                                     "MPI vs TCP overhead (seed 000, Figures 2 and 4)",
                                     logy=False)
    if scaling:
        svg["scaling"] = scaling_plot(scaling, "Throughput vs processes "
                                               "(seed 002, Figures 6-9)")
    return svg, fits
