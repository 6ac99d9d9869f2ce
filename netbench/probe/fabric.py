"""Find the node's RDMA fabric: devices, ports and the providers that reach
them, as capabilities the RDMA transports of data/mpi_families.yaml
require (`ucx:<tl>`, `ofi:<provider>`, `rdma:any`, `rdma:<link layer>`,
`cxi:device`).

Sources, each read by a parser of its own:

* /sys/class/infiniband/<device>/ports/<n>/{state,rate,link_layer}: the
  kernel's own word on every verbs device (InfiniBand, RoCE, EFA, Omni-Path);
* /sys/class/cxi/<device>: Slingshot NICs (no verbs device);
* `ibv_devinfo`: the same ports where sysfs is not visible (a container);
* `ibstat`: the same again where neither is (its `Rate:` in Gbit/s; EFA's
  link layer reads "Unknown" there);
* `cxi_stat`: each Slingshot NIC's link state and speed (`bs200G`, `CK_400G`);
* `ucx_info -d`: the UCX transports that have a device (rc_mlx5, dc_mlx5, ...);
* `fi_info -l`: the libfabric providers built in (verbs, cxi, efa, ...).
  A provider listed is only built: the device it drives must be found too;
  a capture may hold `fi_info -p <provider>` outputs instead, whose cxi
  domains are Slingshot NICs that are up.

The MPIs' own tools (mpichversion's netmods, ompi_info's pml/mtl) are read
by netbench.probe.discovery.

NETBENCH_FABRIC_CAPTURE names a folder of captured outputs of a real node
instead (tests/data/rdma/*): its `sys/class/...` tree and the tools' output
files (CAPTURE_FILES) are read as text; nothing in it is executed, and a
folder or file another user could write is refused.
"""

import dataclasses
import functools
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

from ..datafiles import DataError
from ..safefile import others_could_change

CAPTURE_VARIABLE = "NETBENCH_FABRIC_CAPTURE"
#: tool -> (command line, the file of a capture folder holding its output)
TOOLS = {
    "ibv_devinfo": (["ibv_devinfo"], "ibv_devinfo.txt"),
    "ucx_info": (["ucx_info", "-d"], "ucx_info-d.txt"),
    "fi_info": (["fi_info", "-l"], "fi_info-l.txt"),
    "ibstat": (["ibstat"], "ibstat.txt"),
    "cxi_stat": (["cxi_stat"], "cxi_stat.txt"),
}
#: what each tool's output must hold at least one of, or a capture of it
#: is malformed
TOOL_FINDINGS = {"ibv_devinfo": "hca_id/port block", "ucx_info": "# Transport/# Device pair",
                 "fi_info": "provider line", "ibstat": "CA/Port block",
                 "cxi_stat": "Device line"}
INFINIBAND = Path("sys/class/infiniband")
CXI = Path("sys/class/cxi")
TOOL_TIMEOUT = 20


@dataclasses.dataclass(frozen=True)
class Port:
    device: str
    port: str
    active: bool
    link_layer: str       # infiniband | ethernet | "" (EFA: unspecified)
    rate_mbps: float      # 0 where not given
    source: str           # sysfs | ibv_devinfo | ibstat


#: the kinds of RDMA device an RDMA class is matched by (thresholds.yaml
#: `device_match`), told apart by the device's name and link layer
DEVICE_KINDS = ("infiniband", "roce", "omnipath", "efa", "slingshot")


def port_kind(port):
    """The kind of device a verbs port is: EFA and Omni-Path by their
    driver's device name (EFA's link layer is unspecified, Omni-Path's
    reads InfiniBand), else InfiniBand or RoCE by link layer; "" unknown."""
    if port.device.startswith("efa"):
        return "efa"
    if port.device.startswith("hfi1_"):
        return "omnipath"
    return {"infiniband": "infiniband", "ethernet": "roce"}.get(port.link_layer, "")


@dataclasses.dataclass(frozen=True)
class Link:
    """One RDMA port (a verbs device's port, or a Slingshot NIC) as `auto`
    judges it: its kind and active rate."""
    device: str
    port: str             # "" for a Slingshot NIC
    kind: str             # one of DEVICE_KINDS, or "" unknown
    active: bool
    rate_mbps: float      # 0 where not read

    @property
    def name(self):
        return f"{self.device}:{self.port}" if self.port else self.device


@dataclasses.dataclass(frozen=True)
class Fabric:
    ports: tuple
    cxi_devices: tuple
    ucx_transports: frozenset      # {(tl, device)}
    ofi_providers: frozenset
    #: where each source was read, or why it was not: {source: text}
    looked: dict
    #: {cxi device: (up, rate in Mbit/s)} from cxi_stat
    cxi_status: dict = dataclasses.field(default_factory=dict)

    def links(self):
        """Every RDMA port as a Link: the verbs ports, then the Slingshot
        NICs (up, at cxi_stat's speed; a NIC fi_info lists but cxi_stat
        does not describe is up at an unknown rate)."""
        links = [Link(p.device, p.port, port_kind(p), p.active, p.rate_mbps)
                 for p in self.ports]
        for device in self.cxi_devices:
            up, mbps = self.cxi_status.get(device, (True, 0.0))
            links.append(Link(device, "", "slingshot", up, mbps))
        return links

    @property
    def capabilities(self):
        caps = {f"ucx:{tl}" for tl, _ in self.ucx_transports}
        caps |= {f"ofi:{p}" for p in self.ofi_providers}
        active = [p for p in self.ports if p.active]
        if active:
            caps.add("rdma:any")
            caps |= {f"rdma:{p.link_layer}" for p in active if p.link_layer}
        if self.cxi_devices:
            caps.add("cxi:device")
        return frozenset(caps)

    def summary(self):
        """One line: what discovery looked at and found, for the reason a
        case was not generated."""
        active = [p for p in self.ports if p.active]
        devices = (f"{len(active)} active RDMA port(s)" if active
                   else "no active port in /sys/class/infiniband"
                   if self.looked.get("sysfs") == "read" else
                   "no /sys/class/infiniband device")
        providers = sorted(self.ofi_providers & RDMA_PROVIDERS)
        ofi = (f"fi_info lists {', '.join(providers)}" if providers
               else f"fi_info lists no {'/'.join(sorted(RDMA_PROVIDERS))} provider"
               if "fi_info" not in self.missing_tools() else self.absent("fi_info"))
        tls = sorted({tl for tl, _ in self.ucx_transports if tl in RDMA_UCX_TRANSPORTS})
        ucx = (f"ucx_info -d lists {', '.join(tls)}" if tls
               else "ucx_info -d lists no verbs transport"
               if "ucx_info" not in self.missing_tools() else self.absent("ucx_info"))
        cxi = "" if not self.cxi_devices else f", {len(self.cxi_devices)} cxi device(s)"
        return f"{devices}{cxi}; {ofi}; {ucx}"

    def absent(self, tool):
        """Why `tool` said nothing: not installed here, or not captured."""
        return (f"no {tool} output captured" if "capture" in self.looked.get(tool, "")
                else f"{tool} not installed")

    def missing_tools(self):
        return {tool for tool in TOOLS if self.looked.get(tool, "").startswith("not ")}


#: the providers and UCX transports of a fabric's own data path
RDMA_PROVIDERS = frozenset({"verbs", "cxi", "efa", "psm3", "opx", "psm2"})
RDMA_UCX_TRANSPORTS = frozenset({"rc_verbs", "rc_mlx5", "dc_mlx5", "ud_verbs", "ud_mlx5"})


# ---- parsers (pure: text in, findings out) ----------------------------------

def parse_rate_mbps(text):
    """sysfs `rate`: `200 Gb/sec (4X HDR)` -> 200000.0; 0 when unreadable."""
    m = re.match(r"\s*([\d.]+)\s*Gb/sec", text or "")
    return float(m.group(1)) * 1000 if m else 0.0


def parse_link_layer(text):
    word = (text or "").strip().lower()
    return word if word in ("infiniband", "ethernet") else ""


def parse_ibv_rate_mbps(width, speed):
    """`ibv_devinfo -v`'s active_width `4X (2)` and active_speed `50.0 Gbps
    (64)` -> 200000.0; 0 when either is missing or unreadable."""
    lanes = re.match(r"\s*(\d+)X", width or "")
    gbps = re.match(r"\s*([\d.]+)\s*Gbps", speed or "")
    return int(lanes.group(1)) * float(gbps.group(1)) * 1000 if lanes and gbps else 0.0


def parse_ibv_devinfo(text):
    """`ibv_devinfo`'s hca_id / port / state / link_layer lines (and, with
    -v, the active width and speed) -> Ports."""
    ports, device, port, fields = [], None, None, {}

    def close():
        if device and port:
            ports.append(Port(device, port, fields.get("state", "").startswith("PORT_ACTIVE"),
                              parse_link_layer(fields.get("link_layer")),
                              parse_ibv_rate_mbps(fields.get("active_width"),
                                                  fields.get("active_speed")),
                              "ibv_devinfo"))

    for line in text.splitlines():
        m = re.match(r"\s*hca_id:\s*(\S+)", line)
        if m:
            close()
            device, port, fields = m.group(1), None, {}
            continue
        m = re.match(r"\s*port:\s*(\d+)", line)
        if m and device:
            close()
            port, fields = m.group(1), {}
            continue
        m = re.match(r"\s*(state|link_layer|active_width|active_speed):\s*(.+)", line)
        if m and port:
            fields[m.group(1)] = m.group(2).strip()
    close()
    return ports


def parse_ibstat(text):
    """`ibstat`'s `CA '<device>'` / `Port <n>:` blocks (State, Rate in
    Gbit/s, Link layer) -> Ports."""
    ports, device, port, fields = [], None, None, {}

    def close():
        if device and port:
            rate = re.match(r"\s*([\d.]+)", fields.get("rate", ""))
            ports.append(Port(device, port, fields.get("state", "") == "Active",
                              parse_link_layer(fields.get("link layer")),
                              float(rate.group(1)) * 1000 if rate else 0.0, "ibstat"))

    for line in text.splitlines():
        m = re.match(r"\s*CA '([^']+)'", line)
        if m:
            close()
            device, port, fields = m.group(1), None, {}
            continue
        m = re.match(r"\s*Port (\d+):\s*$", line)
        if m and device:
            close()
            port, fields = m.group(1), {}
            continue
        m = re.match(r"\s*(State|Rate|Link layer):\s*(.+)", line)
        if m and port:
            fields[m.group(1).lower()] = m.group(2).strip()
    close()
    return ports


def parse_cxi_stat(text):
    """`cxi_stat`: each `Device: cxiN` with its `Link state:` and `Link
    speed:` (`bs200G`, `CK_400G`: the speed in Gbit/s before the G) ->
    {device: (up, rate in Mbit/s)}."""
    found, device, fields = {}, None, {}

    def close():
        if device:
            speed = re.search(r"(\d+)G\b", fields.get("speed", ""))
            found[device] = (fields.get("state", "") == "up",
                             float(speed.group(1)) * 1000 if speed else 0.0)

    for line in text.splitlines():
        m = re.match(r"\s*Device:\s*(cxi\d+)\s*$", line)
        if m:
            close()
            device, fields = m.group(1), {}
            continue
        m = re.match(r"\s*Link (state|speed):\s*(\S+)", line)
        if m and device:
            fields[m.group(1)] = m.group(2)
    close()
    return found


def parse_ucx_info(text):
    """`ucx_info -d`'s `# Transport: X` / `# Device: Y` pairs -> {(X, Y)}."""
    found, transport = set(), None
    for line in text.splitlines():
        m = re.match(r"#\s*Transport:\s*(\S+)", line)
        if m:
            transport = m.group(1)
            continue
        m = re.match(r"#\s*Device:\s*(\S+)", line)
        if m and transport:
            found.add((transport, m.group(1)))
            transport = None
    return frozenset(found)


def parse_fi_info_list(text):
    """`fi_info -l`: each provider a `name:` line followed by `version:`."""
    lines = text.splitlines()
    return frozenset(m.group(1) for i, line in enumerate(lines)
                     if (m := re.fullmatch(r"([A-Za-z0-9_]+):", line.strip()))
                     and i + 1 < len(lines) and lines[i + 1].strip().startswith("version:"))


def parse_fi_info_domains(text):
    """`fi_info` / `fi_info -p X`: its `provider: a;b` entries and their
    `domain:` lines -> {(provider, domain)} (a layered provider counts as
    each of its layers); an entry without a domain line gives domain ""."""
    found, providers = set(), ()
    for line in text.splitlines():
        m = re.match(r"\s*provider:\s*(\S+)", line)
        if m:
            providers = tuple(m.group(1).split(";"))
            found |= {(p, "") for p in providers}
            continue
        m = re.match(r"\s*domain:\s*(\S+)", line)
        if m and providers:
            found |= {(p, m.group(1)) for p in providers}
    return frozenset(found)


# ---- reading a node, or a capture of one ------------------------------------

def _refuse_untrusted(path, root):
    """A capture is data netbench trusts: no symbolic link, nothing another
    user (than root or this one) owns or could write."""
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise DataError(path, "", f"a symbolic link in the capture {root}: refused")
    if others_could_change(info):
        raise DataError(path, "", f"writable or owned by another user (capture {root}): "
                                  f"refused")


def _read_text(path, root=None):
    if root is not None:
        _refuse_untrusted(path, root)
    try:
        return Path(path).read_text(errors="replace").strip()
    except OSError:
        return ""


def sysfs_ports(root, capture=None):
    """Ports of every verbs device under `root`/sys/class/infiniband."""
    base = Path(root) / INFINIBAND
    if not base.is_dir():
        return None
    ports = []
    for device in sorted(os.listdir(base)):
        if capture:
            _refuse_untrusted(base / device, capture)
        folder = base / device / "ports"
        if not folder.is_dir():
            continue
        for port in sorted(os.listdir(folder)):
            here = folder / port
            state = _read_text(here / "state", capture)
            ports.append(Port(device, port, state.endswith("ACTIVE"),
                              parse_link_layer(_read_text(here / "link_layer", capture)),
                              parse_rate_mbps(_read_text(here / "rate", capture)), "sysfs"))
    return ports


def cxi_devices(root):
    base = Path(root) / CXI
    return tuple(sorted(os.listdir(base))) if base.is_dir() else ()


def _tool_output(tool, capture):
    """(text, how it was read): the capture's file, or the tool run here."""
    argv, filename = TOOLS[tool]
    if capture:
        path = Path(capture) / filename
        if not path.is_file():
            return "", f"not in capture {capture}"
        return _read_text(path, capture), f"captured {path}"
    exe = shutil.which(argv[0])
    if not exe:
        return "", "not installed"
    try:
        proc = subprocess.run([exe] + argv[1:], capture_output=True, text=True,
                              timeout=TOOL_TIMEOUT, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as err:
        return "", f"not usable: {err}"
    return proc.stdout, f"ran {exe}"


def capture_folder():
    """The capture folder NETBENCH_FABRIC_CAPTURE names, checked; None: the
    node itself."""
    folder = os.environ.get(CAPTURE_VARIABLE)
    if not folder:
        return None
    if not os.path.isdir(folder):
        raise DataError(folder, "", f"{CAPTURE_VARIABLE} names no folder")
    _refuse_untrusted(folder, folder)
    return folder


#: a capture's `fi_info -p <provider>` outputs (the providers' entries,
#: with their domains)
CAPTURED_FI_INFO_P = "fi_info-p-*.txt"


def captured_fi_info_entries(capture):
    """{(provider, domain)} of a capture's `fi_info -p` files; a file that
    holds no provider entry is refused as malformed."""
    entries = set()
    for path in sorted(Path(capture).glob(CAPTURED_FI_INFO_P)):
        found = parse_fi_info_domains(_read_text(path, capture))
        if not found:
            raise DataError(path, "", "holds no `provider:` entry of fi_info -p: a "
                                      "malformed capture")
        entries |= found
    return frozenset(entries)


#: each tool's parser, for the check that a captured output is one
_PARSERS = {"ibv_devinfo": parse_ibv_devinfo, "ucx_info": parse_ucx_info,
            "fi_info": parse_fi_info_list, "ibstat": parse_ibstat, "cxi_stat": parse_cxi_stat}


def _refuse_malformed(texts, looked, capture):
    """A captured tool output that its parser finds nothing in is no such
    output (a cut excerpt, another tool's, an empty file): refused on one
    line naming the file."""
    for tool, text in texts.items():
        if looked[tool].startswith("captured") and not _PARSERS[tool](text):
            path = Path(capture) / TOOLS[tool][1]
            raise DataError(path, "", f"holds no {TOOL_FINDINGS[tool]} of "
                                      f"`{' '.join(TOOLS[tool][0])}`: a malformed capture")


def discover(capture=None, root="/"):
    """The Fabric of this node, or of the capture folder `capture` (a
    captured output that is none is refused, naming its file)."""
    root = capture or root
    looked = {}
    ports = sysfs_ports(root, capture)
    looked["sysfs"] = "read" if ports is not None else "absent"
    texts = {}
    for tool in TOOLS:
        texts[tool], looked[tool] = _tool_output(tool, capture)
    if capture:
        _refuse_malformed(texts, looked, capture)
    if ports is None:
        # sysfs first (the kernel's word), else what ibv_devinfo, else ibstat says
        ports = parse_ibv_devinfo(texts["ibv_devinfo"]) or parse_ibstat(texts["ibstat"])
    entries = captured_fi_info_entries(capture) if capture else frozenset()
    if entries:
        looked["fi_info"] = f"captured {capture}/{CAPTURED_FI_INFO_P}"
    # a cxi domain listed by fi_info is a NIC that is up (HPE's guide: the
    # interface is listed only once its retry handler and L2 address exist)
    cxi_status = parse_cxi_stat(texts["cxi_stat"])
    cxi = set(cxi_devices(root)) | {d for p, d in entries if p == "cxi" and d} | set(cxi_status)
    return Fabric(ports=tuple(ports), cxi_devices=tuple(sorted(cxi)),
                  ucx_transports=parse_ucx_info(texts["ucx_info"]),
                  ofi_providers=parse_fi_info_list(texts["fi_info"])
                  | {p for p, _ in entries}, looked=looked, cxi_status=cxi_status)


@functools.cache
def node_fabric():
    """This process's Fabric (the node's, or NETBENCH_FABRIC_CAPTURE's),
    discovered once."""
    return discover(capture_folder())


#: the prefixes of requirements fabric discovery answers (the rest are the MPI's)
FABRIC_PREFIXES = ("ucx:", "ofi:", "rdma:", "cxi:")


def is_fabric_requirement(req):
    return req.startswith(FABRIC_PREFIXES)


# ---- the RDMA class `interconnect: auto` judges the RDMA cases by ------------

@dataclasses.dataclass(frozen=True)
class RdmaChoice:
    """The RDMA class `auto` chose (`cname`, "" for none) from the port
    `link` it was chosen by, or why none was chosen (`why`)."""
    cname: str
    link: Link = None
    why: str = ""


def _gbps(mbps):
    return f"{mbps / 1000:g} Gbit/s" if mbps else "an unknown rate"


def choose_rdma_class(fabric, matches):
    """The RDMA class of the node's data path: that of its fastest active
    RDMA ports (the compute rail; a slower port is a storage or front-end
    one), by thresholds.yaml's `device_match` ({class: {"device": [kinds],
    "mbps": [rates]}}: the kind and the rate within 1 %).  Fastest ports of
    two kinds, an unknown kind or rate, or a pair no class matches choose
    none, and say why."""
    active = [link for link in fabric.links() if link.active]
    if not active:
        return RdmaChoice("", why=f"no active RDMA port ({fabric.summary()})")
    fastest = max(link.rate_mbps for link in active)
    top = [link for link in active if link.rate_mbps == fastest]
    if len({link.kind for link in top}) > 1:
        found = ", ".join(f"{link.name} ({link.kind or 'unknown kind'})" for link in top)
        return RdmaChoice("", top[0], f"the fastest active RDMA ports are of different "
                                      f"kinds at {_gbps(fastest)}: {found}")
    link = top[0]
    for cname, match in matches.items():
        if link.kind in match["device"] and any(abs(link.rate_mbps - mbps) <= 0.01 * mbps
                                                for mbps in match["mbps"]):
            return RdmaChoice(cname, link)
    return RdmaChoice("", link, f"{link.name} is {link.kind or 'of an unknown kind'} at "
                                f"{_gbps(link.rate_mbps)}, which no RDMA class matches")


def expected_device(fabric):
    """The RDMA port an RDMA or `native` case's library is expected to use
    between nodes (`mlx5_0:1`, `cxi0`): the one fastest active RDMA port,
    the compute rail choose_rdma_class judges by; "" where there is none,
    or several at that rate (two rails or HCAs: which one the MPI takes is
    its own choice, so no device is expected)."""
    active = [link for link in fabric.links() if link.active]
    if not active:
        return ""
    fastest = max(link.rate_mbps for link in active)
    top = [link for link in active if link.rate_mbps == fastest]
    return top[0].name if len(top) == 1 else ""


def rdma_device_found(fabric):
    """Whether discovery found an active RDMA port or NIC on the node."""
    return any(link.active for link in fabric.links())


# ---- site replicas (tests/data/replicas/<system>) ----------------------------

#: the file of a replica folder naming the public source of each capture
REPLICA_README = "README.md"
#: the capture files a replica's README can name
_CAPTURE_NAME = re.compile(r"`((?:fi_info-p-[A-Za-z0-9_-]+|"
                           + "|".join(re.escape(Path(f).stem) for _, f in TOOLS.values())
                           + r")\.txt)`")


def capture_files(folder):
    """The capture files and sysfs trees present in a capture folder."""
    folder = Path(folder)
    names = [f for _, f in TOOLS.values() if (folder / f).is_file()]
    names += sorted(p.name for p in folder.glob(CAPTURED_FI_INFO_P))
    names += [f"{tree}/" for tree in (INFINIBAND, CXI) if (folder / tree).is_dir()]
    return names


def check_replica(folder):
    """The Fabric of a site replica, each of whose captures its README names
    the source of: a README missing, a capture it does not name, a file it
    names that is missing, or a capture holding no output of its tool is
    refused on one line naming the file."""
    readme = Path(folder) / REPLICA_README
    if not readme.is_file():
        raise DataError(readme, "", "missing: a replica names the public source of each "
                                    "of its captures there")
    text = _read_text(readme, folder)
    present = capture_files(folder)
    for name in present:
        if f"`{name}" not in text:
            raise DataError(Path(folder) / name, "", f"a capture whose source {readme} "
                                                     f"does not name")
    for name in sorted(set(_CAPTURE_NAME.findall(text)) - set(present)):
        raise DataError(Path(folder) / name, "", f"missing: {readme} names it as a capture")
    return discover(capture=str(folder))
