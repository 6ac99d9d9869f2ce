"""The fabric sweep's section of the page: per LinkSweep case, the
node-by-node heat maps of latency and bandwidth, the suspects ranked with
their evidence, and the sweep's wall time; and the session's suspects as
`suspects.json` and `drain.sh` beside the page (publish).  From the cases'
records alone (record field `fleet`)."""

import warnings

from ..fleet.reasons import CONFIRMATION_WORDS
from . import plots
from .sections import case_record


def sweep_cases(sessions):
    """(test case, its record) of every case that swept a fabric."""
    return [(tc, rec) for s in sessions for tc in s.testcases
            for rec in [case_record(tc)] if rec.get("section") == "sweep" and rec.get("fleet")]


#: fleets up to this many nodes get the full matrix, every cell's figure
#: written in it (SVG text); larger ones a raster of colours (PNG), the
#: per-node table and the suspects' pairs: 96 nodes' 18,432 text cells
#: made a 26 s, 6.9 MB SVG, and 1024 nodes would make 800 MB
CELL_TEXT_NODES = 24
#: a suspect's pairs listed on the page at most; all are in suspects.json
EVIDENCE_SHOWN = 12


def largest_size(fleet):
    sizes = {int(size) for pair in fleet["pairs"] for size in (pair.get("bw_Mbps") or {})}
    return max(sizes, default=None)


def matrices(fleet):
    """{"latency": n x n, "bandwidth": n x n or None} in fleet["hosts"]
    order (row: sender, column: receiver; NaN where nothing was
    measured), and the largest message size."""
    import numpy as np
    hosts = fleet["hosts"]
    index = {host: i for i, host in enumerate(hosts)}
    size = largest_size(fleet)
    key = str(size)
    latency = np.full((len(hosts), len(hosts)), np.nan)
    bandwidth = np.full((len(hosts), len(hosts)), np.nan) if size else None
    for pair in fleet["pairs"]:
        i, j = index.get(pair["src"]), index.get(pair["dst"])
        if i is None or j is None:
            continue
        if pair.get("latency_us") is not None:
            latency[i, j] = pair["latency_us"]
        value = (pair.get("bw_Mbps") or {}).get(key)
        if size and value is not None:
            bandwidth[i, j] = value
    return {"latency": latency, "bandwidth": bandwidth}, size


def heat_map(fleet, grids, size):
    """The heat maps' markup: SVG with every cell's figure for a fleet of
    up to CELL_TEXT_NODES nodes, else a PNG of colours alone."""
    suspects = {name for s in fleet["suspects"] for name in s.get("names", [])}
    panels = [("latency", "us", grids["latency"], False)]
    if size:
        panels.append((f"bandwidth at {plots.byte_label(size)}", "Mbit/s", grids["bandwidth"],
                       True))
    if len(fleet["hosts"]) <= CELL_TEXT_NODES:
        return plots.heat_maps(fleet["hosts"], panels, highlight=suspects)
    return plots.heat_map_raster(fleet["hosts"], panels, highlight=suspects)


def node_table(fleet, grids):
    """Per node: the median of what it sends and receives at the largest
    size, its median latency, and whether it is a suspect; suspects first,
    then the lowest bandwidth either way (the rows a person reads first)."""
    import numpy as np
    suspects = {name for s in fleet["suspects"] for name in s.get("names", [])}
    latency, bandwidth = grids["latency"], grids["bandwidth"]
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)      # all-NaN rows: no figure
        lat = np.nanmedian(np.hstack([latency, latency.T]), axis=1)
        sent = np.nanmedian(bandwidth, axis=1) if bandwidth is not None else None
        received = np.nanmedian(bandwidth, axis=0) if bandwidth is not None else None
    rows = []
    for i, host in enumerate(fleet["hosts"]):
        rows.append({"host": host, "suspect": host in suspects,
                     "latency": _figure(lat[i]),
                     "sent": _figure(sent[i]) if sent is not None else None,
                     "received": _figure(received[i]) if received is not None else None})
    return sorted(rows, key=lambda r: (not r["suspect"], min(
        (v for v in (r["sent"], r["received"]) if v is not None), default=float("inf"))))


def _figure(value):
    return None if value != value else float(value)          # NaN: not measured


def shown_suspects(suspects):
    """Suspects as the page lists them: at most EVIDENCE_SHOWN pairs of
    each, the furthest from the fleet first; how many more there are."""
    shown = []
    for s in suspects:
        evidence = s.get("evidence", [])
        if len(evidence) > EVIDENCE_SHOWN:
            median = _number(s.get("fleet_median"))
            evidence = sorted(evidence, key=lambda e: -abs(_number(e.get("value")) - median))
        shown.append({**s, "evidence": evidence[:EVIDENCE_SHOWN],
                      "more_evidence": max(len(s.get("evidence", [])) - EVIDENCE_SHOWN, 0),
                      **confirmation_shown(s.get("confirmation"))})
    return shown


def confirmation_shown(confirmation):
    """The page's words for a suspect's confirmation against healthy
    partners (fleet.confirm's code), and at most EVIDENCE_SHOWN of its
    figures; nothing for a suspect without one."""
    if not isinstance(confirmation, dict) or confirmation.get("code") not in CONFIRMATION_WORDS:
        return {}
    evidence = confirmation.get("evidence") or []
    return {"confirmed_words": CONFIRMATION_WORDS[confirmation["code"]],
            "confirmation_shown": evidence[:EVIDENCE_SHOWN]}


def _number(value):
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value == value
    return float(value) if ok else 0.0


def by_topology(fleet):
    """The fleet with its hosts in the topology's order when the record has
    one (`leaves`: node -> leaf switch, in that order), so that a leaf's
    pairs are a block of the heat map; the others after them, sorted."""
    leaves = fleet.get("leaves")
    if not isinstance(leaves, dict) or not leaves:
        return fleet
    position = {host: i for i, host in enumerate(leaves)}
    return {**fleet, "hosts": sorted(fleet["hosts"],
                                     key=lambda h: (position.get(h, len(position)), h))}


def sweep_sections(sessions):
    """What the template shows per sweep: where, the verdict, the suspects
    and findings, the wall time, the heat maps, and for a fleet too large
    for every cell's figure, a table per node."""
    sections = []
    for tc, rec in sweep_cases(sessions):
        fleet = by_topology(rec["fleet"])
        grids, size = matrices(fleet)
        large = len(fleet["hosts"]) > CELL_TEXT_NODES
        sections.append({
            "partition": f"{tc.get('system')}:{tc.get('partition')}",
            "environ": tc.get("environ", ""), "label": rec.get("label", ""),
            "result": tc.get("result", "?"), "nodes": len(fleet["hosts"]),
            "pairs": len(fleet["pairs"]), "suspects": shown_suspects(fleet["suspects"]),
            # outside the band in every pass on a contended host, or within
            # the band the fleet's own spread widened: not drained, and why
            "unconfirmed": shown_suspects(fleet.get("unconfirmed") or []),
            # a record before the fleet kept it: the inconclusive verdict's
            "unconfirmed_why": fleet.get("unconfirmed_why") or (
                (rec.get("verdicts") or {}).get("suspects") or {}).get("reason"),
            "host": rec.get("host") or {},
            "findings": fleet.get("findings") or [],
            "remeasured": fleet.get("remeasured") or [],
            "sweep_seconds": fleet.get("sweep_seconds"),
            "rounds": fleet.get("rounds"), "order": fleet.get("order"),
            "size": plots.byte_label(size) if size else None,
            "heat_map": heat_map(fleet, grids, size),
            "node_table": node_table(fleet, grids) if large else []})
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
