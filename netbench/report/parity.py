"""The container section of the page: per transport, each MPI's sweep on
the host and inside the image side by side (latency and bandwidth), and
under it one line per MPI with the parity ReFrame judged: the container's
latency and largest-message bandwidth against the host's, beside the bound
the case's record says judged them.

The curves come from the cases' records (section `container`, series
`native` and `container`); the judged figures from their perfvalues, as
the summary table shows them, since a record keeps the reference a figure
was judged by, not the figure."""

from . import plots
from .sections import case_record, container_curves, container_mpi
from .verdict import one_line, perf_entry

#: the figures a container case is judged by, and how a caption says them:
#: latency_slowdown is the container's latency over the host's, bw_slowdown
#: the host's bandwidth over the container's (reframe_checks/container.py)
PARITY_FIGURES = ("latency_slowdown", "bw_slowdown")


def bound_text(reference):
    """"at most 1.05x" from a recorded reference (ReFrame's fractions)."""
    if not reference:
        return ""
    value, lower, upper = reference["value"], reference["lower"], reference["upper"]
    parts = []
    if lower is not None:
        parts.append(f"at least {value * (1 + lower):.2f}x")
    if upper is not None:
        parts.append(f"at most {value * (1 + upper):.2f}x")
    return ", ".join(parts)


def largest_size(rec):
    """The largest message of the record's host sweep (where the
    bandwidth is judged), as read: `1 MiB`; None without one."""
    sizes = [r.get("bytes", 0) for s in rec["series"] if s["name"] == "native"
             for r in s["rows"]]
    return plots.byte_label(max(sizes)) if sizes and max(sizes) > 0 else None


def parity_caption(tc, rec, mpi):
    """One line: the MPI's judged parity, each figure with its bound and
    verdict; or, without the figures (a sanity failure), the case's
    result and reason."""
    figures = {var: perf_entry(tc, var) for var in PARITY_FIGURES}
    parts = []
    for var in PARITY_FIGURES:
        entry = figures[var]
        if not entry or entry["value"] is None:
            continue
        # both as the container's time over the host's: above 1, slower
        if var == "latency_slowdown":
            text = f"latency {entry['value']:.2f}x the host's"
        else:
            size = largest_size(rec) or "largest-message"
            text = f"{size} transfer time {entry['value']:.2f}x the host's"
        bound = bound_text(rec["references"].get(var))
        judged = entry["verdict"] if entry["reference"] is not None else "not judged"
        parts.append(f"{text} ({bound + ': ' if bound else ''}{judged})")
    if parts:
        return f"{mpi}: {'; '.join(parts)}"
    reason = one_line(tc.get("fail_reason") or tc.get("skip_reason"))
    return f"{mpi}: no parity figures ({tc.get('result', '?')}{': ' + reason if reason else ''})"


def container_sections(sessions):
    """What the template shows per transport: [{transport, svg,
    captions}], the transports in order; [] when no case compared the
    container with the host."""
    multi = len(sessions) > 1
    lines, captions = {}, {}
    for s in sessions:
        tag = f"[{s.name}] " if multi else ""
        cases = [(tc, case_record(tc)) for tc in s.testcases]
        cases = [(tc, rec) for tc, rec in cases if rec["section"] == "container"]
        for transport, curves in container_curves(
                [(i, rec) for i, (_, rec) in enumerate(cases)], tag).items():
            lines.setdefault(transport, []).extend(curves)
        for tc, rec in cases:
            transport = rec["provenance"].get("transport") or "unknown transport"
            captions.setdefault(transport, []).append(
                parity_caption(tc, rec, tag + container_mpi(rec)))
    return [{"transport": transport,
             "svg": plots.container_plot(lines[transport],
                                         f"Container vs bare metal over {transport}")
             if lines.get(transport) else "",
             "captions": captions[transport]}
            for transport in sorted(captions)]
