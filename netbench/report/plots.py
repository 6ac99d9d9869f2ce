"""The page's plots as inline SVG (matplotlib): nothing to fetch, so the
page opens from a file:// URL on an air-gapped login node.

build_sections draws every section's plot from the series `sections`
builds of the cases' records.  matplotlib is imported when the first plot
is drawn, not with the package: the ReFrame configuration and the CLI load
netbench.report without drawing anything."""

import dataclasses
import functools
import io
import math
import re

from .sections import (CONTAINER_PANELS, CURVE_PLOTS, RAW_TCP_PANEL, case_record,
                       curve_plot_data, hockney_fits, line_rates, overhead_series,
                       scaling_points)

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
        # every label is plain text: a host name such as `$\foo$` or an
        # MPI's version string is shown as it is, never parsed as math text
        # (which fails on it and took the whole page with it)
        "text.parse_math": False,
        # ...so no default formatter may write math text either (a log
        # axis' `$\\mathdefault{10^{5}}$` would show as that source); each
        # axis sets its own formatter (value_axis), these cover any other
        "axes.formatter.use_mathtext": False,
        "axes.formatter.useoffset": False,
    })
    return plt


def _svg(fig):
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    pyplot().close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]      # drop the XML prologue for inlining


#: lines a panel holds at most; more are split over further panels
PANEL_LINES = 6
#: panels side by side
PANEL_COLUMNS = 2


def byte_label(nbytes):
    """1 B, 16 B, 4 KiB, 1 MiB: message sizes as a person reads them."""
    for factor, unit in ((1 << 20, "MiB"), (1 << 10, "KiB")):
        if nbytes >= factor:
            return f"{nbytes / factor:g} {unit}"
    return f"{nbytes:g} B"


def byte_axis(ax, xs):
    """Log2 message-size axis with ticks every 32x, so that each binary
    unit's 1 (1 B, 1 KiB, 1 MiB) is one, labelled in bytes."""
    top = max(xs, default=1)
    ticks = [1 << k for k in range(0, 31, 5) if (1 << k) <= top * 2]
    ax.set_xscale("log", base=2)
    ax.set_xticks(ticks, [byte_label(t) for t in ticks])
    ax.minorticks_off()


#: the scales a tick of an axis in this unit is written in, largest first:
#: 2 ms rather than 2000 us, 100 Gbit/s rather than 100000 Mbit/s
UNIT_SCALES = {
    "us": ((1e6, "s"), (1e3, "ms"), (1.0, "µs"), (1e-3, "ns")),
    "Mbit/s": ((1e6, "Tbit/s"), (1e3, "Gbit/s"), (1.0, "Mbit/s"), (1e-3, "kbit/s")),
    "MB/s": ((1e6, "TB/s"), (1e3, "GB/s"), (1.0, "MB/s"), (1e-3, "kB/s")),
}


def plain_number(value):
    """A tick's figure as a person writes it: 3 significant digits at most,
    thousands grouped, never an exponent (0.001, 250, 1,000,000)."""
    if value == 0:
        return "0"
    digits = max(2 - math.floor(math.log10(abs(value))), 0)
    text = f"{round(value, digits):,.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def quantity_label(value, unit):
    """A tick of an axis in `unit` in the largest of its UNIT_SCALES that
    keeps the figure at 1 or more (10 µs, 2 ms, 100 Gbit/s); a unit
    without scales (%, x) is the axis label's to name."""
    scales = UNIT_SCALES.get(unit)
    if not scales or value == 0:
        return plain_number(value)
    factor, name = next((s for s in scales if abs(value) >= s[0]), scales[-1])
    return f"{plain_number(value / factor)} {name}"


def axis_unit(label):
    """The unit an axis label names in its closing brackets: "bandwidth
    (Mbit/s)" -> "Mbit/s"; "" where it names none."""
    found = re.search(r"\(([^()]*)\)\s*$", label)
    return found.group(1) if found else ""


#: a log axis spanning less than this ratio labels its 2s and 5s as well:
#: it may hold no power of ten, or just one
NARROW_LOG_RANGE = 30


def value_axis(axis, label, log):
    """Label `axis` (ax.yaxis, a colorbar's) with `label`'s unit on every
    tick, plain text: log axes at powers of ten, and at 2s and 5s where the
    range is narrow; linear axes as plain figures."""
    from matplotlib import ticker
    unit = axis_unit(label)
    major = ticker.FuncFormatter(lambda value, _: quantity_label(value, unit))
    axis.set_major_formatter(major)
    if not log:
        return

    def minor(value, _):
        low, high = sorted(axis.get_view_interval())
        return quantity_label(value, unit) if low > 0 and high / low < NARROW_LOG_RANGE else ""
    axis.set_major_locator(ticker.LogLocator(base=10))
    axis.set_minor_locator(ticker.LogLocator(base=10, subs=(2.0, 5.0)))
    axis.set_minor_formatter(ticker.FuncFormatter(minor))


#: a panel with more lines than this is drawn as their spread instead: a
#: thousand-case session would otherwise draw a figure of hundreds of
#: panels, minutes of matplotlib for a picture nobody can read
SPREAD_ABOVE = 3 * PANEL_LINES
#: lines drawn by name over a spread: those furthest from its median
SPREAD_OUTLIERS = 4


@dataclasses.dataclass(frozen=True)
class Spread:
    """Many lines of a panel as one: at each size, the median and the 10th
    to 90th percentile of the lines that measured it."""
    count: int
    xs: list
    low: list
    median: list
    high: list


def spread_of(lines):
    """(Spread, the SPREAD_OUTLIERS lines furthest from its median) of
    lines [(label, xs, ys, style, panel)]."""
    at = {}
    for _, xs, ys, _, _ in lines:
        for x, y in zip(xs, ys):
            at.setdefault(x, []).append(y)
    xs = sorted(at)
    low, median, high = _percentiles(at, xs)
    centre = dict(zip(xs, median))

    def distance(line):
        _, lxs, lys, _, _ = line
        return max((abs(y - centre[x]) / (abs(centre[x]) or 1.0) for x, y in zip(lxs, lys)),
                   default=0.0)
    outliers = sorted(lines, key=distance, reverse=True)[:SPREAD_OUTLIERS]
    return Spread(len(lines), xs, low, median, high), outliers


def _percentiles(at, xs):
    """([10th], [50th], [90th] percentile) of at[x] for each x of xs."""
    import numpy as np
    table = [np.percentile(at[x], (10, 50, 90)) for x in xs]
    return tuple([float(row[i]) for row in table] for i in range(3))


def panels_of(series, baseline_panel=None):
    """{panel title: (lines, baseline, MPI panel, spread)}: each panel at
    most PANEL_LINES lines, split in parts where it has more, or, beyond
    SPREAD_ABOVE lines, their Spread and the lines furthest from it (spread
    None otherwise); the series of `baseline_panel` (raw TCP) are added to
    every other panel as its baseline."""
    grouped = {}
    for entry in series:
        grouped.setdefault(entry[4], []).append(entry)
    baseline = grouped.pop(baseline_panel, []) if baseline_panel else []
    if not grouped and baseline:
        grouped, baseline = {baseline_panel: baseline}, []
    if len(baseline) > SPREAD_ABOVE:
        baseline = spread_of(baseline)[1]
    panels = {}
    for title, lines in sorted(grouped.items()):
        if len(lines) > SPREAD_ABOVE:
            spread, outliers = spread_of(lines)
            panels[f"{title}: {len(lines)} curves"] = (outliers, baseline, title, spread)
            continue
        room = max(PANEL_LINES - len(baseline), 1)
        parts = [lines[i:i + room] for i in range(0, len(lines), room)] or [[]]
        for n, part in enumerate(parts, 1):
            name = title if len(parts) == 1 else f"{title}, part {n} of {len(parts)}"
            panels[name] = (part, baseline, title, None)
    return panels


def draw_spread(ax, spread):
    """A Spread in a panel: the band shaded, the median a thick grey line."""
    ax.fill_between(spread.xs, spread.low, spread.high, color="grey", alpha=0.25, linewidth=0,
                    label=f"10th to 90th percentile of {spread.count} curves")
    ax.plot(spread.xs, spread.median, color="black", linewidth=1.6,
            label=f"median of {spread.count} curves")


def curve_plot(series, xlabel, ylabel, title, logy=True, references=(), hlines=(),
               baseline_panel=None):
    """Small multiples: one panel per MPI (series' 5th element), at most
    PANEL_LINES lines each, the legend below each panel, outside its data;
    a panel of more than SPREAD_ABOVE lines shows their spread and the
    lines furthest from it.  series: [(label, xs, ys, style index, panel)];
    references: [(label, x, y, panel)] drawn as markers in their panel;
    hlines: [(label, y)] such as a line rate, in every panel."""
    panels = panels_of(series, baseline_panel)
    rows = -(-len(panels) // PANEL_COLUMNS)
    cols = min(len(panels), PANEL_COLUMNS)
    fig, axes = pyplot().subplots(rows, cols, figsize=(5.2 * cols, 3.6 * rows), squeeze=False,
                                  sharey=True)
    for ax, (name, (lines, baseline, panel, spread)) in zip(axes.flat, panels.items()):
        if spread:
            draw_spread(ax, spread)
        for label, xs, ys, style, _ in lines:
            ax.plot(xs, ys, STYLES[style % len(STYLES)], marker=".", markersize=3,
                    label=label, linewidth=1.2)
        for label, xs, ys, _, _ in baseline:
            ax.plot(xs, ys, color="grey", linewidth=1, label=label)
        for label, x, y, where in references:
            if where == panel:
                ax.plot([x], [y], marker="D", linestyle="none", markersize=6, label=label)
        for label, y in hlines:
            ax.axhline(y, color="grey", linestyle="--", linewidth=1, label=label)
        byte_axis(ax, [x for _, xs, _, _, _ in lines + baseline for x in xs]
                  + (spread.xs if spread else []))
        if logy:
            ax.set_yscale("log")
        value_axis(ax.yaxis, ylabel, logy)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1,
                  frameon=False)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    fig.suptitle(title)
    fig.tight_layout()
    return _svg(fig)


def scaling_plot(series, title):
    """Throughput per process vs number of processes, [(label, ranks,
    MB/s)]: one panel per MPI (the label's first word), each line a pattern
    at one or two processes per node (seed 002, Figures 6-9)."""
    panels = {}
    for label, xs, ys in series:
        mpi, _, rest = label.partition(" ")
        panels.setdefault(mpi, []).append((rest or label, xs, ys))
    cols = min(len(panels), PANEL_COLUMNS) or 1
    rows = -(-len(panels) // cols) or 1
    fig, axes = pyplot().subplots(rows, cols, figsize=(5.2 * cols, 3.2 * rows), squeeze=False,
                                  sharey=True)
    for ax, (mpi, lines) in zip(axes.flat, sorted(panels.items())):
        for i, (label, xs, ys) in enumerate(lines[:PANEL_LINES]):
            ax.plot(xs, ys, STYLES[i % len(STYLES)], marker="o", label=label)
        ax.set_xlabel("processes")
        ax.set_ylabel("peak throughput per process (MB/s)")
        ax.set_title(mpi, fontsize=9)
        ax.set_xticks(sorted({x for _, xs, _ in lines for x in xs}) or [2])
        value_axis(ax.xaxis, "processes", log=False)
        value_axis(ax.yaxis, ax.get_ylabel(), log=False)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    fig.suptitle(title)
    fig.tight_layout()
    return _svg(fig)


#: the line of each side of the container section: the host solid, the image dashed
SIDE_STYLES = {"native": "-", "container": "--"}


def container_figure(lines, title):
    """Container vs bare metal over one transport: latency and bandwidth
    against message size side by side, log axes; one colour per MPI, the
    host's sweep solid and the image's dashed, the legend below each panel.
    lines: [(mpi, side, xs, {column: ys})] (sections.container_curves).
    Returns the matplotlib figure (container_plot draws it as SVG)."""
    colours = {mpi: f"C{i}" for i, mpi in enumerate(dict.fromkeys(m for m, *_ in lines))}
    fig, axes = pyplot().subplots(1, len(CONTAINER_PANELS),
                                  figsize=(5.2 * len(CONTAINER_PANELS), 3.6), squeeze=False)
    for ax, (column, ylabel) in zip(axes.flat, CONTAINER_PANELS):
        drawn = [(mpi, side, xs, ys[column]) for mpi, side, xs, ys in lines if column in ys]
        for mpi, side, xs, ys in drawn:
            ax.plot(xs, ys, SIDE_STYLES.get(side, ":"), color=colours[mpi], marker=".",
                    markersize=3, linewidth=1.2, label=f"{mpi} {side}")
        byte_axis(ax, [x for _, _, xs, _ in drawn for x in xs])
        ax.set_yscale("log")
        value_axis(ax.yaxis, ylabel, log=True)
        ax.set_title("latency" if column == "usec" else "bandwidth", fontsize=9)
        ax.set_xlabel("message size")
        ax.set_ylabel(ylabel)
        if drawn:
            ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2,
                      frameon=False)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def container_plot(lines, title):
    """container_figure as inline SVG."""
    return _svg(container_figure(lines, title))


def build_sections(sessions):
    """The page's plots, from the cases' records alone, for one session or
    overlaid for several; and the Hockney fits."""
    multi = len(sessions) > 1
    curves = {name: ([], {}) for name in CURVE_PLOTS}
    fits, losses, speedups, scaling, every_record = [], [], [], [], []
    for s in sessions:
        tag = f"[{s.name}] " if multi else ""
        records = [(i, case_record(tc)) for i, tc in enumerate(s.testcases)]
        every_record += records
        for name, plot in CURVE_PLOTS.items():
            series, points = curve_plot_data(plot, records, tag)
            curves[name][0].extend(series)
            curves[name][1].update(points)
        fits += hockney_fits(records, tag)
        loss, speedup = overhead_series(records, tag)
        losses += loss
        speedups += speedup
        scaling += [(line, [x for x, _ in sorted(p)], [y for _, y in sorted(p)])
                    for line, p in scaling_points(records, tag).items()]
    svg = {}
    for name, (series, points) in curves.items():
        plot = CURVE_PLOTS[name]
        if series:
            svg[name] = curve_plot(
                series, "message size", plot.ylabel, plot.title, logy=plot.logy,
                references=[(label, x, y, panel) for (label, panel), (x, y) in points.items()],
                hlines=line_rates(every_record) if plot.line_rates else (),
                baseline_panel=RAW_TCP_PANEL)
    if losses:
        svg["overhead"] = curve_plot(losses, "message size", "MPI loss against raw TCP (%)",
                                     "MPI vs raw TCP over the network transports: the loss "
                                     "(seed 000, Figures 2 and 4)", logy=False)
    if speedups:
        svg["shm_speedup"] = curve_plot(speedups, "message size",
                                        "MPI bandwidth / raw TCP bandwidth (x)",
                                        "Shared memory against TCP loopback: a speed-up, "
                                        "not a loss", logy=True)
    if scaling:
        svg["scaling"] = scaling_plot(scaling, "Throughput vs processes "
                                               "(seed 002, Figures 6-9)")
    return svg, fits


def heat_maps(hosts, panels, highlight=()):
    """Node-by-node heat maps side by side: panels [(title, unit, n x n
    array, low_is_bad)] in `hosts` order; the row is the sender, the column
    the receiver, every cell's figure written in it; suspects' names
    (`highlight`) in red.  Good is green whichever way the metric runs, so
    a slow node's row and column stand out on both maps."""
    import numpy as np
    plt = pyplot()
    n = len(hosts)
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 0.45 * n + 2.2),
                             squeeze=False)
    for ax, (title, unit, grid, low_is_bad) in zip(axes.flat, panels):
        image = ax.imshow(grid, cmap="RdYlGn" if low_is_bad else "RdYlGn_r")
        for i, j in zip(*np.nonzero(~np.isnan(grid))):
            ax.text(j, i, f"{grid[i, j]:.3g}", ha="center", va="center", fontsize=7)
        ax.set_xticks(range(n), hosts, rotation=45, ha="right", fontsize=7)
        ax.set_yticks(range(n), hosts, fontsize=7)
        _mark_suspects(ax, highlight)
        _label_heat_map(fig, ax, image, title, unit)
    fig.tight_layout()
    return _svg(fig)


def _mark_suspects(ax, highlight):
    for label in ax.get_xticklabels() + ax.get_yticklabels():
        if label.get_text() in highlight:
            label.set_color("#b00")
            label.set_fontweight("bold")


def _label_heat_map(fig, ax, image, title, unit):
    ax.set_xlabel("receiver")
    ax.set_ylabel("sender")
    ax.set_title(f"{title} ({unit})", fontsize=9)
    ax.grid(False)
    bar = fig.colorbar(image, ax=ax, shrink=0.8)
    value_axis(bar.ax.yaxis, f"({unit})", log=False)


#: colours of a large fleet's raster: few, so that a healthy fleet's noise
#: is one or two flat colours (a small PNG) and a slow row stands apart
RASTER_LEVELS = 9
#: hosts named on a raster's axes at most (the suspects first)
RASTER_NAMES = 24


def raster_dpi(fig, ax, n):
    """Dots per inch that give each of n x n cells of `ax` a pixel at least:
    fewer, and nearest-neighbour sampling would drop whole rows, a slow
    node's among them."""
    fig.canvas.draw()
    box = ax.get_window_extent()                        # pixels at fig.dpi
    inches = min(box.width, box.height) / fig.dpi
    return max(100, math.ceil(n / inches))


def heat_map_raster(hosts, panels, highlight=()):
    """heat_maps for a large fleet: one pixel or more per pair, colours
    alone, as an inline PNG (<img>, base64); the axes name the suspects
    (`highlight`) in red at their rows and columns, and a few other hosts
    for orientation.  Returns the <img> markup."""
    import base64

    import matplotlib
    plt = pyplot()
    n = len(hosts)
    fig, axes = plt.subplots(1, len(panels), figsize=(7 * len(panels), 7.5), squeeze=False)
    named = [i for i, h in enumerate(hosts) if h in highlight][:RASTER_NAMES]
    step = max(n // max(RASTER_NAMES - len(named), 1), 1)
    # the regular ticks, less those that would overprint a suspect's name
    ticks = sorted(set(named) | {i for i in range(0, n, step)
                                 if all(abs(i - j) >= step / 2 for j in named)})
    for ax, (title, unit, grid, low_is_bad) in zip(axes.flat, panels):
        cmap = matplotlib.colormaps["RdYlGn" if low_is_bad else "RdYlGn_r"].resampled(
            RASTER_LEVELS)
        image = ax.imshow(grid, cmap=cmap, interpolation="nearest")
        ax.set_xticks(ticks, [hosts[i] for i in ticks], rotation=90, fontsize=6)
        ax.set_yticks(ticks, [hosts[i] for i in ticks], fontsize=6)
        _mark_suspects(ax, highlight)
        _label_heat_map(fig, ax, image, title, unit)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=raster_dpi(fig, axes.flat[0], n),
                metadata={"Software": None})
    plt.close(fig)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    names = ", ".join(panel[0] for panel in panels)
    return (f'<img class="raster" alt="heat maps ({names}) of {n} nodes, sender by '
            f'receiver" src="data:image/png;base64,{data}">')
