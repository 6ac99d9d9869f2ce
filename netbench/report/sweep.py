"""The fabric sweep's section of the page: per LinkSweep case, the
node-by-node heat maps of latency and bandwidth, the suspects ranked with
their evidence, and the sweep's wall time; and the session's suspects as
`suspects.json` and `drain.sh` beside the page (publish).  From the cases'
records alone (record field `fleet`)."""

from . import plots
from .sections import case_record


def sweep_cases(sessions):
    """(test case, its record) of every case that swept a fabric."""
    return [(tc, rec) for s in sessions for tc in s.testcases
            for rec in [case_record(tc)] if rec.get("section") == "sweep" and rec.get("fleet")]


def largest_size(fleet):
    sizes = {int(size) for pair in fleet["pairs"] for size in (pair.get("bw_Mbps") or {})}
    return max(sizes, default=None)


def heat_map_svg(fleet):
    size = largest_size(fleet)
    latency = {(p["src"], p["dst"]): p.get("latency_us") for p in fleet["pairs"]}
    bandwidth = {(p["src"], p["dst"]): (p.get("bw_Mbps") or {}).get(str(size))
                 for p in fleet["pairs"]}
    suspects = {name for s in fleet["suspects"] for name in s.get("names", [])}
    panels = [("latency", "us", latency, False)]
    if size:
        panels.append((f"bandwidth at {plots.byte_label(size)}", "Mbit/s", bandwidth, True))
    return plots.heat_maps(fleet["hosts"], panels, highlight=suspects)


def sweep_sections(sessions):
    """What the template shows per sweep: where, the verdict, the suspects
    and findings, the wall time, the heat maps."""
    sections = []
    for tc, rec in sweep_cases(sessions):
        fleet = rec["fleet"]
        sections.append({
            "partition": f"{tc.get('system')}:{tc.get('partition')}",
            "environ": tc.get("environ", ""), "label": rec.get("label", ""),
            "result": tc.get("result", "?"), "nodes": len(fleet["hosts"]),
            "pairs": len(fleet["pairs"]), "suspects": fleet["suspects"],
            "findings": fleet.get("findings") or [],
            "remeasured": fleet.get("remeasured") or [],
            "sweep_seconds": fleet.get("sweep_seconds"),
            "svg": heat_map_svg(fleet)})
    return sections


def session_suspects(session):
    """The content of suspects.json: every sweep of the session and what it
    named, or None when the session swept nothing."""
    cases = sweep_cases([session])
    if not cases:
        return None
    return {"session": session.name,
            "sweeps": [{"partition": f"{tc.get('system')}:{tc.get('partition')}",
                        "environ": tc.get("environ", ""), "label": rec.get("label", ""),
                        "nodes": rec["fleet"]["hosts"],
                        "suspects": rec["fleet"]["suspects"]} for tc, rec in cases]}
