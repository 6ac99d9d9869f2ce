"""The names of a cluster and of everything it owns, and its link settings.

Everything a cluster owns is named after it, by exact pattern (see
`owns_namespace`, `owns_link`): the bridge, the host ends of the links, the
namespaces of its nodes, of its head and of Slurm's controller.  Here too:
the addresses in its /24, where its files live, the ReFrame systems' names,
and the link classes of links.yaml.  VclusterError, the one error of the
package, lives here, at the bottom of its imports.
"""

import ipaddress
import re
from pathlib import Path

from .. import paths
from ..datafiles import load_yaml, require
from ..textsafe import printable  # noqa: F401  (the package's API: vcluster.printable)

LINKS_FILE = paths.DATA / "links.yaml"
BENCHMARK_NETWORK = ipaddress.ip_network("198.18.0.0/15")
NAME_PATTERN = r"[a-z][a-z0-9]{0,5}"    # keeps `nb-<name>-<i>` within IFNAMSIZ
MAX_NODES = 64
FIRST_NODE_HOST = 11                    # node i gets <subnet>.(10 + i)
HEAD_HOST = 3                           # the head namespace (.1: the host, .2: Slurm's controller)
CONTROLLER_HOST = 2                     # Slurm's controller namespace (netbench.vcluster.slurm)
STATE_FILE = "cluster.json"
#: held (flock) by a job that needs every node of the cluster to itself
LOCK_NAME = "partition.lock"
SYSTEM_FILE = "reframe-system.json"
#: the clusters' root-owned files (the lock and registry: registry.py)
LIB_DIR = Path("/var/lib/netbench")
CLUSTERS = LIB_DIR / "clusters"


class VclusterError(Exception):
    """One line: what failed, and how to fix it where that is known."""


def check_name(name):
    if not re.fullmatch(NAME_PATTERN, name or ""):
        raise VclusterError(f"cluster name {name!r}: use 1-6 lowercase letters or digits, "
                            "starting with a letter")
    return name


def bridge_name(name):
    return f"nb-{name}"


def veth_name(name, i):
    return f"nb-{name}-{i}"


def namespace_name(name, i):
    return f"nb-{name}-n{i}"


def host_name(name, i):
    return f"{name}-n{i}"


def system_name(name):
    return f"vcluster-{name}"


#: the suffix of a cluster member's namespace: node, Slurm's controller, head
MEMBER_NAMESPACE = r"(n\d+|ctl|hd)"


def head_names(name):
    """The head namespace, where MPI launchers of cluster runs start (see
    make_head): its namespace and the host end of its link."""
    return {"namespace": f"nb-{name}-hd", "veth": f"nb-{name}-h"}


def controller_names(name):
    """Slurm's controller: its host name, namespace and the host end of its link."""
    return {"name": f"{name}-ctl", "namespace": f"nb-{name}-ctl", "veth": f"nb-{name}-c"}


def slurm_system_names(name):
    """ReFrame `system:partition` of each Slurm launch path."""
    return {"srun": f"vcluster-{name}-slurm:srun",
            "mpirun": f"vcluster-{name}-slurm-mpirun:mpirun"}


def owns_namespace(name, ns):
    """`nb-<name>-n<i>` (a node), `nb-<name>-ctl` (Slurm's controller) or
    `nb-<name>-hd` (the head), exactly: `nb-a-n1` is never cluster `ab`'s
    nor `a`'s of `nb-ab-n1`."""
    return re.fullmatch(rf"nb-{re.escape(name)}-{MEMBER_NAMESPACE}", ns) is not None


def owns_link(name, link):
    """The bridge `nb-<name>`, a node's veth `nb-<name>-<i>`, the
    controller's `nb-<name>-c`, the head's `nb-<name>-h`, and with a
    topology a switch's bridge `nb-<name>-s<k>` and the ends of its link to
    its parent, `nb-<name>-u<k>` and `nb-<name>-d<k>` (vcluster.fabric),
    exactly."""
    return re.fullmatch(rf"nb-{re.escape(name)}(-(\d+|c|h|[sud]\d+))?", link) is not None


def cluster_folder(name):
    """The cluster's root-owned files (never in a checkout)."""
    return CLUSTERS / name


def checkout_folder(name, checkout=None):
    """The copies the owning checkout gets for its user."""
    return Path(checkout or paths.REPO) / ".vcluster" / name


def this_checkout():
    return str(paths.REPO)


RATE_PATTERN = r"(\d+(?:\.\d+)?)\s*([kmg]?)bit"


def parse_rate(text, option="--link"):
    """A tc rate (`100mbit`, `1gbit`, `2.5gbit`, `500kbit`) in Mbit/s;
    None for `none` (an unshaped link).  `option`: the command-line option
    the rate came from, named in the error."""
    if text in (None, "", "none"):
        return None
    m = re.fullmatch(RATE_PATTERN, text.strip().lower())
    if not m:
        raise VclusterError(f"{option} {printable(repr(text))}: give a rate such as 100mbit or "
                            f"1gbit, or none")
    scale = {"": 1e-6, "k": 1e-3, "m": 1.0, "g": 1e3}[m.group(2)]
    mbps = float(m.group(1)) * scale
    if mbps <= 0:
        raise VclusterError(f"{option} {printable(repr(text))}: the rate must be positive")
    return mbps


def rate_text(text):
    """A rate as netbench records it: `1 GBit` -> `1gbit`, `none` for none
    (parse_rate has accepted it)."""
    if text in (None, "", "none"):
        return "none"
    number, scale = re.fullmatch(RATE_PATTERN, text.strip().lower()).groups()
    return f"{number}{scale}bit"


def load_link_classes(path=LINKS_FILE):
    data = load_yaml(path)
    for key, kind in (("min_burst_over_mtu", int), ("default_burst_us", int),
                      ("latency_ms", int), ("classes", dict)):
        require(data, key, kind, path, "")
    for cname, spec in data["classes"].items():
        require(spec, "rate_mbps", (int, float), path, f"classes.{cname}")
        require(spec, "burst_bytes", int, path, f"classes.{cname}")
    # the classes of an unshaped link and of a rate no class has
    data.setdefault("unshaped_interconnect", "veth")
    data.setdefault("other_rates_interconnect", "emulated")
    return data


def check_interconnect(interconnect, mbps, classes):
    """An explicit --interconnect must be a class of thresholds.yaml; the
    class judged against the line rate needs a shaped link."""
    emulated = classes["other_rates_interconnect"]
    if interconnect == emulated and mbps is None:
        raise VclusterError(f"--interconnect {emulated}: judged against the link's line rate, "
                            "which --link none does not have: give --link RATE")
    from .. import references
    allowed = references.interconnect_classes()
    if interconnect not in allowed:
        raise VclusterError(f"--interconnect {interconnect!r}: not a class of thresholds.yaml "
                            f"(allowed: {', '.join(allowed)})")


def link_settings(rate="none", mtu=1500, interconnect=None, classes=None, switch_mtu=None,
                  validate=True, option="--link"):
    """What the links of a cluster are: rate, tbf bucket, MTU and the
    interconnect class its ReFrame partition declares (`veth` unshaped, a
    class of links.yaml whose rate matches, else `emulated`, judged against
    the line rate).  `mtu` is the nodes' interface MTU; `switch_mtu` (at
    least `mtu`) that of the bridge and the host ends of the links, i.e. the
    largest frame the "switch" carries, so that a node tuned to jumbo frames
    (tune.yml) can use them."""
    for flag, value in (("--mtu", mtu), ("--switch-mtu", switch_mtu or mtu)):
        if not 576 <= int(value) <= 9216:
            raise VclusterError(f"{flag} {value}: use 576 to 9216 (veth and Ethernet jumbo "
                                f"frames)")
    if switch_mtu is not None and int(switch_mtu) < int(mtu):
        raise VclusterError(f"--switch-mtu {switch_mtu} is below --mtu {mtu}: the switch must "
                            f"carry the nodes' frames: use --switch-mtu {mtu} or more")
    switch_mtu = int(switch_mtu or mtu)
    mbps = parse_rate(rate, option)
    classes = classes or load_link_classes()
    if interconnect is not None and validate:
        check_interconnect(interconnect, mbps, classes)
    if mbps is None:
        return {"rate": "none", "rate_mbps": None, "burst_bytes": None, "latency_ms": None,
                "mtu": int(mtu), "switch_mtu": switch_mtu,
                "interconnect": interconnect or classes["unshaped_interconnect"]}
    match = next((c for c, spec in classes["classes"].items()
                  if float(spec["rate_mbps"]) == mbps), None)
    burst = (classes["classes"][match]["burst_bytes"] if match
             else int(mbps * 1e6 / 8 * classes["default_burst_us"] * 1e-6))
    burst = max(burst, switch_mtu + classes["min_burst_over_mtu"])
    return {"rate": rate_text(rate), "rate_mbps": mbps, "burst_bytes": burst,
            "latency_ms": classes["latency_ms"], "mtu": int(mtu), "switch_mtu": switch_mtu,
            "interconnect": interconnect or match or classes["other_rates_interconnect"]}
