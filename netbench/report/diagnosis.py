"""The likely cause of a curve that falls short, named from its signature.
Pure: a session's cases (their records) in, Diagnoses out.

The rules are data (netbench/data/diagnosis.yaml): each states its
signature, its threshold, the setting to change and its source; this
module holds one function per rule id that reads the signature from a
case's curve (each size's best launch with its interval, as
report.sides reads it) and, where the record carries it, the nodes'
tuning state (`node_state`, netbench/probe/nodestate.py: per node its sysctls,
and per interface its MTU, offloads, coalescing, rings and addresses).
A rule that needs the node state and finds none says nothing; a setting
the node could not read (null) is unknown, and compared with nothing.
"""

import dataclasses
import functools
import ipaddress

from .. import paths
from ..datafiles import load_yaml, validate
from ..judgement.figures import row_estimate
from . import reasons
from .sides import size_figures

# the package's own copy: an installed netbench's home is the current folder,
# whose netbench/data/ is nobody's promise
RULES_FILE = paths.DATA / "diagnosis.yaml"
RULES_SCHEMA = {
    "type": "object", "required": ["rules"], "additionalProperties": False,
    "properties": {"rules": {"type": "array", "items": {
        "type": "object", "additionalProperties": False,
        "required": ["id", "cause", "signature", "threshold", "setting", "source",
                     "profile_keys"],
        "properties": {"id": {"type": "string"}, "cause": {"type": "string"},
                       "signature": {"type": "string"},
                       "threshold": {"type": "object",
                                     "additionalProperties": {"type": "number"}},
                       "setting": {"type": ["string", "object"]},
                       "profile_keys": {"type": "array", "items": {"type": "string"}},
                       "flavour": {"type": "string"},
                       # {mpi family: {transport: [protocol switch sizes]}}
                       "defaults": {"type": "object", "additionalProperties": {
                           "type": "object", "additionalProperties": {
                               "type": "array", "items": {"type": "integer"}}}},
                       "source": {"type": "string"}}}}},
}
TCP_TRANSPORTS = ("tcp", "ofi-tcp", "ucx-tcp", "raw-tcp")


@dataclasses.dataclass(frozen=True)
class Diagnosis:
    rule: str
    case: str
    cause: str
    evidence: str
    setting: str
    source: str

    def as_dict(self):
        return dataclasses.asdict(self)


@functools.cache
def load_rules(path=RULES_FILE):
    data = validate(load_yaml(path), RULES_SCHEMA, path)
    return {rule["id"]: rule for rule in data["rules"]}


# ---- a case's curve ----------------------------------------------------------

@dataclasses.dataclass
class Curve:
    """A case's figures: per size the best launch's time (us) and rate
    (Mbit/s) Estimates, and what the record says of where it ran."""
    key: str
    provenance: dict
    times: dict
    rates: dict
    node_state: dict | None
    params: dict
    #: the environment the job set for its launches (ReFrame's env_vars:
    #: the transport's MCA/CVAR variables and any a site or `-S` added)
    env: dict = dataclasses.field(default_factory=dict)
    #: per size every launch's rate Estimate (the best is in `rates`)
    rate_launches: dict = dataclasses.field(default_factory=dict)
    #: the layers below the MPI measured beside it (record `layers`)
    layers: dict = dataclasses.field(default_factory=dict)

    @property
    def line_rate(self):
        return self.provenance.get("line_rate_mbps")

    @property
    def internode(self):
        return self.provenance.get("placement") == "internode"

    @property
    def over_tcp(self):
        return self.provenance.get("transport") in TCP_TRANSPORTS


def curve_of(key, tc, record):
    times, rates = {}, {}
    for (_, column), (unit, per_size) in size_figures(record).items():
        if column == "usec" and unit == "us":
            times = per_size
        elif column == "Mbps":
            rates = per_size
    # ReFrame's run report writes each parameter of a case (TcpStreams'
    # `connections`) at the top level of its testcase
    return Curve(key, record.get("provenance") or {}, times, rates, record.get("node_state"),
                 tc, tc.get("env_vars") or {}, rate_launches(record), record.get("layers") or {})


def rate_launches(record):
    """{bytes: [Estimate of each launch]} of the record's first series with
    a Mbps column (its launches where the record has them)."""
    runs = record.get("runs") or {}
    for series in record.get("series", []):
        if not any(y["column"] == "Mbps" for y in series["y"]):
            continue
        found = {}
        for rows in [launch["rows"] for launch in runs.get(series["name"], [])] or \
                [series["rows"]]:
            for row in rows:
                if "Mbps" in row and "bytes" in row:
                    found.setdefault(row["bytes"], []).append(row_estimate(row, "Mbps"))
        return found
    return {}


def sized(figures, at_least=0, at_most=float("inf")):
    return [(b, e) for b, e in sorted(figures.items()) if at_least <= b <= at_most]


def mib(nbytes):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:g} {unit}"
    return f"{nbytes:g} B"


def node_values(curve, *path):
    """{node: value} of a path into each node's state (None: no state)."""
    if not curve.node_state:
        return None
    found = {}
    for node, state in sorted(curve.node_state.items()):
        value = state
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        found[node] = value
    return found


def node_links(curve):
    """{node: {interface: its state}} of every interface but lo, or None."""
    links = node_values(curve, "interfaces")
    if links is None:
        return None
    return {node: {name: v for name, v in (ifs if isinstance(ifs, dict) else {}).items()
                   if isinstance(v, dict) and name != "lo"}
            for node, ifs in links.items()}


def networks_of(link):
    """The networks of an interface's recorded addresses."""
    found = set()
    for address in link.get("addresses") or []:
        try:
            found.add(ipaddress.ip_interface(str(address)).network)
        except ValueError:
            continue
    return found


def path_mtus(curve):
    """[(network or "", {node: [known MTUs of its interfaces there]})] of
    the links the traffic between the nodes takes, or None where that cannot
    be told.  The data path is an interface with an address in a network an
    interface of another node has an address in too (the nodes reach each
    other across it); an interface off it (a management port, a bridge of
    its own) has no say.  Records from before addresses were recorded: a
    node's only interface but lo is its path, and a node with several
    leaves it untold (None).  An MTU the node could not read (null) is
    unknown and left out."""
    links = node_links(curve)
    if not links or len(links) < 2:
        return None
    if not any("addresses" in link for ifs in links.values() for link in ifs.values()):
        if all(len(ifs) == 1 for ifs in links.values()):
            return [("", {node: known_mtus(ifs.values()) for node, ifs in links.items()})]
        return None
    on = {}
    for node, ifs in links.items():
        for link in ifs.values():
            for network in networks_of(link):
                on.setdefault(network, {}).setdefault(node, []).append(link)
    shared = [(str(network), {node: known_mtus(found) for node, found in sorted(nodes.items())})
              for network, nodes in sorted(on.items(), key=lambda kv: str(kv[0]))
              if len(nodes) > 1]
    return shared or None


def known_mtus(links):
    return sorted({v["mtu"] for v in links if isinstance(v.get("mtu"), int)})


#: said where the nodes' MTUs could not be compared
MTUS_NOT_COMPARED = ("the nodes' MTUs were not compared: their node state does not tell "
                     "which interface carries the traffic between them")


# ---- the rules -----------------------------------------------------------------

def socket_buffer_plateau(curve, t):
    if not (curve.internode and curve.over_tcp):
        return None
    return buffer_plateau(curve, t) or buffers_capped(curve, t)


def buffer_plateau(curve, t):
    """The curve's signature: the largest sizes flat below the line rate."""
    if not curve.line_rate:
        return None
    large = sized(curve.rates, t["from_bytes"])
    if len(large) < t["min_sizes"]:
        return None
    best = max(e.value for _, e in large)
    first, last = large[0][1].value, large[-1][1].value
    # a window-bound stream gains nothing from longer messages
    if best < t["below_line_rate"] * curve.line_rate and last <= (1 + t["rising_by"]) * first:
        return (f"bandwidth from {mib(large[0][0])} to {mib(large[-1][0])} flat at "
                f"{min(first, last):.0f}-{best:.0f} Mbit/s, at most {best / curve.line_rate:.0%} "
                f"of the {curve.line_rate:g} Mbit/s line rate (threshold "
                f"{t['below_line_rate']:.0%})" + rmem_text(curve))
    return None


def buffers_capped(curve, t):
    """The node state's signature: a node whose TCP buffers (the maxima of
    tcp_rmem and tcp_wmem, what autotuning may grow to) are smaller than
    `node_max_below`.  Where the link's bandwidth-delay product is smaller
    still the large sizes reach the line rate anyway, and the cap costs the
    middle sizes (each message crosses in several windows), which no curve
    of an emulated link can tell from its token bucket's bursts."""
    capped = {}
    for key in ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"):
        for node, value in (node_values(curve, "sysctl", key) or {}).items():
            limit = buffer_maximum(value)
            if limit is not None and limit < t["node_max_below"]:
                capped.setdefault(node, []).append(f"{key.rsplit('.', 1)[1]} max {limit}")
    if not capped:
        return None
    return (f"TCP buffers capped below {t['node_max_below']:.0f} bytes: "
            + "; ".join(f"{node} {', '.join(v)}" for node, v in capped.items()))


def buffer_maximum(value):
    """The third field of a "min default max" sysctl (bytes), or None."""
    fields = str(value or "").split()
    return int(fields[2]) if len(fields) == 3 and fields[2].isdigit() else None


def rmem_text(curve):
    rmem = node_values(curve, "sysctl", "net.ipv4.tcp_rmem")
    if not rmem:
        return ""
    return "; tcp_rmem " + ", ".join(f"{n}: {v}" for n, v in rmem.items())


def mtu_path_mismatch(curve, t):
    if not curve.internode:
        return None
    paths = path_mtus(curve)
    for network, mtus in paths or []:
        known = {node: v for node, v in mtus.items() if v}
        if len({tuple(v) for v in known.values()}) > 1:
            return "the nodes' MTUs differ: " + ", ".join(
                f"{node} {'/'.join(map(str, v))}" for node, v in known.items()) + (
                f" (on {network})" if network else "")
    collapse = mtu_collapse(curve, t)
    if collapse and paths is None and node_links(curve):
        return f"{collapse}; {MTUS_NOT_COMPARED}"
    return collapse


def mtu_collapse(curve, t):
    """The curve's signature of an MTU black hole: small messages cross,
    large ones barely."""
    if not curve.line_rate:
        return None
    large = sized(curve.rates, t["from_bytes"])
    small = sized(curve.times, 0, t["small_bytes"])
    if len(large) < t["min_sizes"] or not small:
        return None
    best = max(e.hi for _, e in large)
    if best < t["collapse_below"] * curve.line_rate:
        return (f"small messages cross, but every size from {mib(large[0][0])} stays below "
                f"{best:.1f} Mbit/s, under {t['collapse_below']:.0%} of the "
                f"{curve.line_rate:g} Mbit/s line rate")
    return None


def jumbo_frames_missing(curve, t):
    paths = path_mtus(curve)
    if not (paths and curve.internode and curve.line_rate
            and curve.line_rate >= t["min_line_rate_mbps"] and curve.rates):
        return None
    mtus = [v for _, by_node in paths for v in by_node.values()]
    if all(v == [t["standard_mtu"]] for v in mtus):
        size, last = max(curve.rates.items())
        if last.value < t["below_line_rate"] * curve.line_rate:
            return (f"every node at MTU {t['standard_mtu']:g} and {mib(size)} at "
                    f"{last.value:.0f} Mbit/s, {last.value / curve.line_rate:.0%} of the line rate")
    return None


def interrupt_coalescing_floor(curve, t):
    if not curve.internode:
        return None
    small = sized(curve.times, 0, t["small_bytes"])
    if len(small) < t["min_sizes"]:
        return None
    # noise only adds time: the fastest small message is the floor
    floor = min(e.lo for _, e in small)
    if floor >= t["floor_us"]:
        coalesce = node_values(curve, "interfaces")
        usecs = ""
        if coalesce:
            usecs = "; rx-usecs " + ", ".join(
                f"{n}: {'/'.join(str((v or {}).get('coalesce', {}).get('rx-usecs')) for v in (ifs or {}).values())}"
                for n, ifs in coalesce.items())
        return (f"every size up to {mib(t['small_bytes'])} takes at least {floor:.0f} us "
                f"(threshold {t['floor_us']:g} us){usecs}")
    return None


def eager_rendezvous_step(curve, t):
    rule = load_rules()["eager_rendezvous_step"]
    family, transport = curve.provenance.get("mpi_family"), curve.provenance.get("transport")
    switches = ((rule.get("defaults") or {}).get(family) or {}).get(transport) or []
    moved = eager_variable_moved(curve, rule, switches)
    step = eager_step(curve, t, switches)
    if moved:
        return moved + (f"; {step}" if step else "")
    return step


def eager_variable_moved(curve, rule, switches):
    """Words naming the eager-limit variable the job set away from the
    MPI's default, else ""."""
    setting = rule["setting"].get(curve.provenance.get("mpi_family")) or {}
    variable = setting.get(curve.provenance.get("transport"))
    value = curve.env.get(variable) if variable else None
    if value is None or not switches:
        return ""
    try:
        moved = int(str(value).strip()) != switches[0]
    except ValueError:
        moved = True
    default = "the provider's" if switches[0] < 0 else f"{switches[0]}"
    return f"the job set {variable}={value} (default {default})" if moved else ""


def eager_step(curve, t, switches):
    """The step in the curve, where the default would not put it, else ""."""
    # a token bucket's bursts and waits make steps of their own (measured: a
    # 2 KiB message at 1.8 Gbit/s, 4 KiB at 0.18, on a 1 Gbit/s tbf link);
    # shared memory on a busy host swings as much between neighbours
    if curve.provenance.get("line_rate_source") == "tbf" or not curve.internode:
        return ""
    rates = sized(curve.rates, t["from_bytes"], t["to_bytes"])
    for (small, a), (large, b) in zip(rates, rates[1:]):
        if any(small <= s < large for s in switches):
            continue                    # the MPI's own switch: a dip there is its default
        launches = curve.rate_launches.get(large) or []
        # every launch below, apart by the intervals: not one launch's stall
        if len(launches) >= t["min_launches"] and all(e.hi < t["drop_to"] * a.lo
                                                      for e in launches):
            regained = [s for s, e in sized(curve.rates, large + 1) if e.value >= a.value]
            if regained:
                return (f"bandwidth falls from {a.value:.0f} Mbit/s at {mib(small)} to "
                        f"{b.value:.0f} at {mib(large)} in all {len(launches)} launches and "
                        f"regains it at {mib(regained[0])}")
    return ""


def single_copy_excluded(env):
    """Words naming the variable of `env` that leaves Open MPI's shared
    memory without CMA: OMPI_MCA_smsc excluding it (5.x: "^cma", or a list
    without it), OMPI_MCA_btl_sm_single_copy_mechanism=none (4.x); else ""."""
    smsc = env.get("OMPI_MCA_smsc")
    if smsc is not None:
        names = [n.strip() for n in str(smsc).lstrip("^").split(",")]
        if str(smsc).startswith("^") == ("cma" in names):
            return f"OMPI_MCA_smsc={smsc}"
    mechanism = env.get("OMPI_MCA_btl_sm_single_copy_mechanism")
    if mechanism is not None and str(mechanism).strip() == "none":
        return f"OMPI_MCA_btl_sm_single_copy_mechanism={mechanism}"
    return ""


def shm_without_single_copy(curve, t):
    # from the run's settings only: on a VM, process_vm_readv can be slower
    # than copy-in copy-out (tests/test_baselines.py measured 72 us with CMA
    # and 24 us without at 1 MiB), so the curve alone cannot tell
    p = curve.provenance
    if p.get("mpi_family") != "openmpi" or p.get("transport") != "shm":
        return None
    excluded = single_copy_excluded(curve.env)
    if excluded:
        return f"the job ran with {excluded}: no single copy (CMA) between ranks"
    scope = node_values(curve, "sysctl", "kernel.yama.ptrace_scope")
    if scope and any(v is not None and str(v) not in ("0",) for v in scope.values()):
        return ("kernel.yama.ptrace_scope " + ", ".join(f"{n}: {v}" for n, v in scope.items())
                + ": Open MPI's CMA single copy is refused between ranks")
    return None


def mpi_below_lower_layer(curve, t):
    """Where the loss is, as the case's job decided it beside the layers
    below its MPI (netbench.judgement.layers, record `layers`); the
    thresholds `t` were applied then."""
    found = [reasons.layer_words(a) for a in curve.layers.get("attributions") or []
             if a["code"].startswith("mpi_below_")]
    return "; ".join(found)


def mpi_settings(curve):
    """The MPI's transport settings the case ran with: its transport's
    environment (mpi_families.yaml), then what the run added."""
    p = curve.provenance
    env = curve.layers.get("mpi_env") or {}
    words = (f"{p.get('mpi_family', '?')} {p.get('transport', '?')} (mpi_families.yaml): "
             + (" ".join(f"{k}={v}" for k, v in sorted(env.items())) or "no variables"))
    added = curve.layers.get("added_env") or {}
    if added:
        words += "; the run added " + " ".join(f"{k}={v}" for k, v in sorted(added.items()))
    return words


CURVE_RULES = {f.__name__: f for f in (socket_buffer_plateau, mtu_path_mismatch,
                                       jumbo_frames_missing, interrupt_coalescing_floor,
                                       eager_rendezvous_step, shm_without_single_copy,
                                       mpi_below_lower_layer)}


def one_stream_below_several(curves, t):
    """Across cases: TcpStreams' one connection against several."""
    found = []
    streams = [c for c in curves if "connections" in c.params and c.rates]
    for one in (c for c in streams if int(c.params["connections"]) == 1):
        peers = [c for c in streams if int(c.params["connections"]) > 1
                 and c.provenance.get("placement") == one.provenance.get("placement")]
        if not peers:
            continue
        best_one = max(e.value for e in one.rates.values())
        best = max(peers, key=lambda c: max(e.value for e in c.rates.values()))
        best_many = max(e.value for e in best.rates.values())
        if best_one < t["below"] * best_many:
            found.append((one, f"one connection peaks at {best_one:.0f} Mbit/s, "
                               f"{best.params['connections']} at {best_many:.0f} Mbit/s"))
    return found


def setting_text(rule, curve):
    if rule["id"] == "mpi_below_lower_layer":
        return mpi_settings(curve)
    setting = rule["setting"]
    if isinstance(setting, str):
        return setting
    by_family = setting.get(curve.provenance.get("mpi_family")) or {}
    return by_family.get(curve.provenance.get("transport")) or "; ".join(
        f"{family} {transport}: {var}" for family, vars_ in setting.items()
        for transport, var in vars_.items())


def diagnose_cases(cases, rules=None):
    """[Diagnosis] of [(case key, testcase, record)]."""
    rules = rules or load_rules()
    curves = [curve_of(key, tc, record) for key, tc, record in cases]
    found = []
    for rule_id, rule in rules.items():
        if rule_id in CURVE_RULES:
            for curve in curves:
                evidence = CURVE_RULES[rule_id](curve, rule["threshold"])
                if evidence:
                    found.append(Diagnosis(rule_id, curve.key, rule["cause"], evidence,
                                           setting_text(rule, curve), " ".join(rule["source"].split())))
        elif rule_id == "one_stream_below_several":
            for curve, evidence in one_stream_below_several(curves, rule["threshold"]):
                found.append(Diagnosis(rule_id, curve.key, rule["cause"], evidence,
                                       setting_text(rule, curve), " ".join(rule["source"].split())))
    return found


def diagnose(session):
    """[Diagnosis] of a session (report.sessions.Session)."""
    from ..report.sides import case_key
    from ..report.sections import case_record
    cases = []
    for tc in session.testcases:
        record = case_record(tc)
        if record.get("series"):
            cases.append((case_key(tc), tc, record))
    return diagnose_cases(cases)


def proposals(diagnoses, profile_data, flavour=None):
    """What a profile would set against the diagnoses: ["sysctl.net.ipv4.tcp_rmem =
    4096 131072 16777216 (socket_buffer_plateau)"], from the profile's
    settings merged with its flavour."""
    rules = load_rules()
    settings = merged_settings(profile_data, flavour)
    lines = []
    for rule_id in dict.fromkeys(d.rule for d in diagnoses):
        for key in rules[rule_id]["profile_keys"]:
            section, _, name = key.partition(".")
            value = (settings.get(section) or {}).get(name) if name else settings.get(section)
            if value is not None:
                lines.append(f"{key} = {value} ({rule_id})")
    return lines


def merged_settings(profile_data, flavour=None):
    settings = {k: dict(v) if isinstance(v, dict) else v
                for k, v in (profile_data.get("settings") or {}).items()}
    extra = (profile_data.get("flavours") or {}).get(flavour or "throughput") or {}
    for section, values in extra.items():
        if isinstance(values, dict):
            settings.setdefault(section, {}).update(values)
        else:
            settings[section] = values
    return settings
