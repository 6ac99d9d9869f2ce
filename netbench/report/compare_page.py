"""`netbench compare`'s outputs: the Comparison (compare.py) as text for
the terminal and as an HTML page, reports/compare-<A>-<B>/index.html, in
the report's style (templates/compare.html.j2)."""

import contextlib
import datetime
import os
from pathlib import Path

from .. import paths
from ..datafiles import DataError
from . import compare, page, reasons
from ..safefile import atomic_write
from ..textsafe import printable
from .publish import check_output_folder

#: the ANSI colour of each call in a terminal (NO_COLOR: none)
COLOURS = {compare.WORSE: "\033[31m", compare.BETTER: "\033[32m"}
RESET = "\033[0m"
#: the factor of each unit reasons.readable shows a figure in
SHOWN_AS = {("Mbit/s", "Gbit/s"): 1e-3, ("B", "KiB"): 1 / 1024, ("B", "MiB"): 1 / (1 << 20)}


def size_text(nbytes):
    return "" if nbytes is None else reasons.readable(nbytes, "B").replace(".0 ", " ")


def css_class(change):
    """better, worse, noise or plain: what the page colours a row by."""
    call = change.call
    if call in (compare.WORSE, compare.BETTER):
        return call
    if change.significance in (compare.NO_INTERVAL, compare.FEW_LAUNCHES,
                               compare.HOSTS_DIFFERED) and \
            change.direction in (compare.WORSE, compare.BETTER):
        return f"{change.direction}-maybe"
    return "noise"


def why(change):
    """The model's reason behind a change's call, in words (reasons.py);
    "" where no decision made it (within noise, no interval)."""
    decided = change.decision
    return "" if decided is None else reasons.render(decided.code, decided.numbers)


def interval_text(e, unit):
    """"0.35 us (0.349-0.363)": the figure and its interval in the unit a
    person reads it in (reasons.readable)."""
    shown = reasons.readable(e.value, unit)
    if compare.is_point(e):
        return shown
    number, _, shown_unit = shown.partition(" ")
    scale = SHOWN_AS.get((unit, shown_unit), 1.0)
    return f"{number} ({e.lo * scale:.3g}-{e.hi * scale:.3g}) {shown_unit}".rstrip()


#: the worst changes the terminal shows without --all, and the page shows
#: in detail: a comparison of 10,000 cases has half a million changes, so
#: the rest are counted (terminal) or summarised per case (page)
WORST_SHOWN = 20
WORST_ON_PAGE = 200
#: the cases of one side only that the terminal names without --all
UNMATCHED_SHOWN = 10


def change_line(change, colour):
    """A change as a terminal line: the figure's name and unit come from the
    records, so they pass through printable; the colour is added after."""
    pct = "" if change.pct is None else f"{change.pct:+.1f} %"
    call = change.call
    if colour and change.direction in COLOURS and call != compare.NOISE:
        call = f"{COLOURS[change.direction]}{call}{RESET}"
    return printable(
        f"  {change.figure:12} {size_text(change.bytes):>8}  "
        f"{interval_text(change.a, change.unit):>28}  "
        f"{interval_text(change.b, change.unit):>28}  {pct:>9}  ") + call


def table_header():
    return (f"  {'figure':12} {'size':>8}  {'A (interval)':>28}  "
            f"{'B (interval)':>28}  {'change':>9}  call")


def every_case_lines(comparison, colour):
    """Per case every figure and every size (--all)."""
    lines = []
    for case in comparison.cases:
        lines.extend(["", printable(case.key), table_header()])
        lines.extend(change_line(c, colour) for c in case.figures + case.sizes)
    for label, keys in (("only in A", comparison.only_a), ("only in B", comparison.only_b)):
        lines.extend(printable(f"{label}: {key}") for key in keys)
    return lines


def worst_lines(comparison, limit, colour):
    """The `limit` worst changes, under their cases, and the cases of one
    side only (the first UNMATCHED_SHOWN of each side)."""
    worst = comparison.worst(limit)
    total = sum(comparison.counts().values())
    lines = []
    if worst:
        lines.extend([f"the {len(worst)} worst of {total} changes in "
                      f"{len(comparison.cases)} cases in common, worst first "
                      f"(--all shows every case and size):", table_header()])
    by_case = {}
    for key, change in worst:
        by_case.setdefault(key, []).append(change)
    for key, changes in by_case.items():
        lines.append(printable(key))
        lines.extend(change_line(c, colour) for c in changes)
    for label, keys in (("only in A", comparison.only_a), ("only in B", comparison.only_b)):
        lines.extend(printable(f"{label}: {key}") for key in keys[:UNMATCHED_SHOWN])
        if len(keys) > UNMATCHED_SHOWN:
            lines.append(f"{label}: ... and {len(keys) - UNMATCHED_SHOWN} more "
                         f"(--all lists them)")
    return lines


def counts_text(counts):
    return ", ".join(f"{n} {call}" for call, n in sorted(counts.items(), key=lambda kv: -kv[1]))


def text(comparison, every_size=False, colour=False, worst=WORST_SHOWN):
    """The comparison as lines for the terminal: the `worst` worst changes
    under their cases (every case and size: `every_size`), then the count
    of each call in one line."""
    lines = [printable(f"netbench compare: A {comparison.a}  ->  B {comparison.b}")]
    lines.extend(every_case_lines(comparison, colour) if every_size
                 else worst_lines(comparison, worst, colour))
    counts = comparison.counts()
    lines.append("")
    if counts:
        lines.append(f"netbench compare: {counts_text(counts)}")
    else:
        lines.append(f"netbench compare: no case in common: nothing to compare "
                     f"({len(comparison.only_a)} cases only in A, "
                     f"{len(comparison.only_b)} only in B; exit "
                     f"{compare.EXIT_NOTHING_IN_COMMON})")
    return lines


def case_summary(summary):
    """One row of the page's table of every case (compare.Tally's): its
    figures' changes, the count of each call over its sizes, its worst."""
    return {**summary, "sizes": counts_text(summary["sizes"])}


def render(comparison):
    env = page.environment()
    env.filters["size"] = size_text
    env.filters["interval"] = interval_text
    env.filters["css"] = css_class
    env.filters["why"] = why
    counts = comparison.counts()
    return env.get_template("compare.html.j2").render(
        comparison=comparison, counts=counts, total=sum(counts.values()),
        worst=comparison.worst(WORST_ON_PAGE),
        summaries=map(case_summary, comparison.tally.cases),
        generated=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))


def default_folder(comparison, reports_dir=paths.REPORTS):
    """reports/compare-<A>-<B>: the sessions' folder names, built from parsed
    values (sessions.session_folder_name), never from the command line."""
    return Path(reports_dir) / f"compare-{comparison.a}-{comparison.b}"


def write(comparison, outdir):
    """The page as OUTDIR/index.html (OUTDIR: a folder, or a new one in an
    existing folder); nothing else is written or removed."""
    outdir = Path(outdir)
    if outdir.is_symlink():
        raise DataError(outdir, None, "is a symlink: not written through")
    check_output_folder(outdir)
    # drawn before the folder is made: a Ctrl-C or SIGTERM while it is
    # drawn leaves nothing behind
    html = render(comparison)
    created = False
    try:
        if not outdir.is_dir():
            outdir.mkdir()
            created = True
        atomic_write(outdir / "index.html", html)
    except BaseException as err:
        if created:
            with contextlib.suppress(OSError):
                outdir.rmdir()
        if isinstance(err, OSError):
            raise DataError(outdir, None, f"cannot write: {err.strerror}") from err
        raise
    return outdir / "index.html"


def colour_wanted(stream):
    """Colours in a terminal, unless NO_COLOR is set (no-color.org)."""
    return stream.isatty() and not os.environ.get("NO_COLOR")
