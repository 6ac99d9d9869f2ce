"""Find the MPI implementations this machine offers.

An MPI is a compiler wrapper plus a launcher.  Three sources feed one
mechanism (`probe`):

* prefixes laid out as `<prefix>/bin/mpicc` + `<prefix>/bin/mpirun`: the PyPI
  wheel prefixes under `.mpi/<name>` and Spack views under `views/<name>`
  (the same layout, so the wheels exercise the view code);
* suffixed system executables such as Debian's `mpicc.mpich` +
  `mpirun.mpich`, named `system-<suffix>`;
* a plain `mpicc` + `mpirun` on PATH that is none of the above, `system-mpi`.

Each MPI's family and version come from its launcher's `--version`; its
capabilities (netmods, BTLs, PMLs, MTLs) from the family's own tool.  The
transports it offers follow from those capabilities and
`data/mpi_families.yaml`.
"""

import dataclasses
import os
import re
import shutil
import subprocess
from pathlib import Path

from .. import paths
from ..datafiles import DataError, load_yaml, require
from . import fabric

#: how each MPI family launches and forces each transport; NETBENCH_MPI_FAMILIES
#: names a copy to run with instead (a transport's environment edited, as
#: tests/test_layers.py slows one), read by every process of a session alike
FAMILIES_FILE = Path(os.environ.get("NETBENCH_MPI_FAMILIES") or paths.DATA / "mpi_families.yaml")
FABRICS_FILE = paths.DATA / "fabrics.yaml"
LAUNCHER_NAMES = ("mpirun", "mpiexec")
PROBE_TIMEOUT = 20


@dataclasses.dataclass(frozen=True)
class Candidate:
    """Executables that may form an MPI, before probing."""
    name: str
    source: str          # wheel | view | system
    cc: str
    launcher: str
    prefix: str = ""     # empty for suffixed system executables
    suffix: str = ""     # `mpich` for mpicc.mpich


@dataclasses.dataclass(frozen=True)
class MPI:
    name: str
    source: str
    family: str          # mpich | openmpi
    version: str
    cc: str
    launcher: str
    prefix: str
    capabilities: frozenset
    transports: dict     # transport name -> environment variables
    fabric: str = ""     # a Spack view's fabric (data/fabrics.yaml), else ""
    # transport -> [{min_ranks, placements, why}]: runs this build is known to fail
    known_defects: dict = dataclasses.field(default_factory=dict)
    # transport -> [fabric requirement not found]: RDMA transports this MPI
    # could run, which this node's fabric (probe/fabric.py) cannot carry
    fabric_not_found: dict = dataclasses.field(default_factory=dict)

    @property
    def features(self):
        return ["mpi", self.family, f"source-{self.source}"]


class DiscoveryError(Exception):
    pass


class RefusedName(DiscoveryError):
    """A prefix folder whose name cannot be a ReFrame environment's."""


#: ReFrame's rule for an environment's name (its configuration schema); a
#: view or wheel folder's name becomes one, and a single bad name stops
#: ReFrame from loading the configuration at all
ENVIRONMENT_NAME = r"[a-zA-Z_][a-zA-Z0-9_-]*"


def check_name(cand):
    """Refuse an MPI whose name (a view or wheel folder's, a system
    wrapper's suffix) is no environment name, before running anything of it."""
    if re.fullmatch(ENVIRONMENT_NAME, cand.name):
        return
    where = cand.prefix and Path(cand.cc).parent.parent or cand.cc
    raise RefusedName(f"{where}: name {cand.name!r} refused: an MPI's name is its ReFrame "
                      f"environment's: letters, digits, _ and -, starting with a letter or _")


def load_families(path=FAMILIES_FILE):
    data = load_yaml(path)
    for family, spec in data.items():
        require(spec, "version_regex", str, path, family)
        require(spec, "capability_tool", str, path, family)
        require(spec, "launcher_flags", str, path, family)
        require(spec, "env", dict, path, family)
        transports = require(spec, "transports", dict, path, family)
        for tname, alternatives in transports.items():
            where = f"{family}.transports"
            require(transports, tname, list, path, where)
            for i, alt in enumerate(alternatives):
                require(alt, "requires", list, path, f"{where}.{tname}[{i}]")
                require(alt, "env", dict, path, f"{where}.{tname}[{i}]")
                check_fabric_requirements(alt, path, f"{where}.{tname}[{i}]")
        require(spec, "remote_flags", list, path, family)
        require(spec, "allocation_flags", list, path, family)
        bind = require(spec, "bind", dict, path, family)
        for where in ("one_node", "across_nodes"):
            require(bind, where, str, path, f"{family}.bind")
        require(spec, "slurm_mpi", str, path, family)
        check_provenance(spec, path, family)
        forward = require(spec, "forward_env", dict, path, family)
        require(forward, "prefixes", list, path, f"{family}.forward_env")
        for i, defect in enumerate(spec.get("known_defects") or []):
            where = f"{family}.known_defects[{i}]"
            require(defect, "versions", list, path, where)
            require(defect, "transport", str, path, where)
            require(defect, "min_ranks", int, path, where)
            require(defect, "why", str, path, where)
            if "placements" in defect:
                require(defect, "placements", list, path, where)
            if "launchers" in defect:
                require(defect, "launchers", list, path, where)
    return data


#: UCX_TLS names of the fabric's own transports -> what `ucx_info -d` lists
#: for them (UCX_TLS's aliases: `_v` verbs, `_x` accelerated mlx5)
UCX_TLS_NEEDS = {"rc_v": "rc_verbs", "rc_verbs": "rc_verbs", "rc_x": "rc_mlx5",
                 "rc_mlx5": "rc_mlx5", "dc_x": "dc_mlx5", "dc_mlx5": "dc_mlx5",
                 "dc": "dc_mlx5", "ud_v": "ud_verbs", "ud_verbs": "ud_verbs",
                 "ud_x": "ud_mlx5", "ud_mlx5": "ud_mlx5"}


def check_fabric_requirements(alt, path, where):
    """A transport whose environment names an RDMA provider (FI_PROVIDER)
    or UCX transport (UCX_TLS) must require it, so that discovery checks
    the node has it: refused otherwise, naming the file, the transport
    and what its `requires` lacks."""
    env, requires = alt["env"], set(alt["requires"])
    needed = [f"ofi:{p}" for p in str(env.get("FI_PROVIDER", "")).split(";")
              if p in fabric.RDMA_PROVIDERS]
    needed += [f"ucx:{UCX_TLS_NEEDS[t]}" for t in str(env.get("UCX_TLS", "")).split(",")
               if t in UCX_TLS_NEEDS]
    missing = [req for req in needed if req not in requires]
    if missing:
        raise DataError(path, f"{where}.requires",
                        f"its env names what fabric discovery must find; add "
                        f"{', '.join(missing)}")


def check_provenance(spec, path, family):
    """The family's `provenance` (switches and the rules that read the
    library's words) is well formed: every regex compiles, every template
    names only its regex's groups."""
    prov = require(spec, "provenance", dict, path, family)
    for i, switch in enumerate(require(prov, "switches", list, path, f"{family}.provenance")):
        require(switch, "env", dict, path, f"{family}.provenance.switches[{i}]")
    for i, rule in enumerate(require(prov, "says", list, path, f"{family}.provenance")):
        where = f"{family}.provenance.says[{i}]"
        text = require(rule, "regex", str, path, where)
        try:
            groups = set(re.compile(text, re.MULTILINE).groupindex)
        except re.error as err:
            raise DataError(path, f"{where}.regex", f"not a regular expression: {err}") from None
        require(rule, "transport", str, path, where)
        for key in ("transport", "provider", "device"):
            named = set(re.findall(r"\{(\w+)\}", str(rule.get(key, ""))))
            if named - groups:
                raise DataError(path, f"{where}.{key}", f"names {', '.join(sorted(named - groups))}, "
                                                        f"which the regex does not capture")


def version_tuple(version):
    """(5, 0, 2) of "5.0.2": its leading numbers, for comparing versions."""
    return tuple(int(n) for n in re.findall(r"\d+", str(version))[:3])


def provenance_env(family, version, families):
    """The variables that make `family`'s library say which path it used
    (mpi_families.yaml `provenance.switches`): the first switch whose
    `min_version` the MPI's version reaches."""
    for switch in families[family]["provenance"]["switches"]:
        if version_tuple(version) >= version_tuple(switch.get("min_version", "0")):
            return {str(k): str(v) for k, v in switch["env"].items()}
    return {}


# ---- candidates -------------------------------------------------------------

def _executable(path):
    return os.path.isfile(path) and os.access(path, os.X_OK)


def prefix_candidate(prefix, name, source):
    """The MPI laid out under `prefix`, or None when it is not one."""
    bindir = Path(prefix) / "bin"
    cc = bindir / "mpicc"
    launchers = [bindir / n for n in LAUNCHER_NAMES if _executable(bindir / n)]
    if not _executable(cc) or not launchers:
        return None
    return Candidate(name=name, source=source, cc=str(cc), launcher=str(launchers[0]),
                     prefix=str(Path(prefix).resolve()))


def prefixes_in(folder, source, name_prefix=""):
    """Every MPI prefix directly below `folder`, sorted by name."""
    if not os.path.isdir(folder):
        return []
    found = []
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        if entry.is_dir():
            cand = prefix_candidate(entry.path, name_prefix + entry.name, source)
            if cand:
                found.append(cand)
    return found


def system_candidates(search_path=None):
    """Suffixed pairs (`mpicc.X` + `mpirun.X`) and the plain pair on PATH."""
    if search_path is None:
        search_path = os.environ.get("PATH", "")
    dirs = [d for d in search_path.split(os.pathsep) if d]
    found, seen = [], set()
    for d in dirs:
        if not os.path.isdir(d):
            continue
        for entry in sorted(os.listdir(d)):
            m = re.fullmatch(r"mpicc\.([A-Za-z0-9_+-]+)", entry)
            if not m or m.group(1) in seen:
                continue
            suffix = m.group(1)
            launcher = next((os.path.join(d, f"{n}.{suffix}") for n in LAUNCHER_NAMES
                             if _executable(os.path.join(d, f"{n}.{suffix}"))), None)
            if launcher and _executable(os.path.join(d, entry)):
                seen.add(suffix)
                found.append(Candidate(name=f"system-{suffix}", source="system",
                                       cc=os.path.join(d, entry), launcher=launcher,
                                       suffix=suffix))
    cc = shutil.which("mpicc", path=os.pathsep.join(dirs)) if dirs else None
    launcher = next(filter(None, (shutil.which(n, path=os.pathsep.join(dirs))
                                  for n in LAUNCHER_NAMES)), None) if dirs else None
    if cc and launcher:
        found.append(Candidate(name="system-mpi", source="system", cc=cc, launcher=launcher))
    return found


def views_folder():
    """views/ (spack.yaml's view root), or the folder NETBENCH_VIEWS names."""
    return os.environ.get("NETBENCH_VIEWS") or paths.SPACK_VIEWS


def candidates(wheel_dir=paths.WHEEL_PREFIXES, views_dir=None, search_path=None):
    """All candidates, first occurrence of each compiler wrapper winning
    (Debian's plain `mpicc` is an alternative link to `mpicc.openmpi`).
    Spack views come first: a site's builds keep their view names even
    where the same install is reachable another way."""
    views_dir = views_folder() if views_dir is None else views_dir
    every = (prefixes_in(views_dir, "view") + prefixes_in(wheel_dir, "wheel")
             + system_candidates(search_path))
    unique, seen = [], set()
    for cand in every:
        key = os.path.realpath(cand.cc)
        if key not in seen:
            seen.add(key)
            unique.append(cand)
    return unique


# ---- probing ----------------------------------------------------------------

def _run(argv, env=None):
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT,
                              env=env, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise DiscoveryError(f"{argv[0]}: {err}") from err
    return proc.stdout + proc.stderr


def identify(launcher, families):
    """(family, version) from the launcher's --version output."""
    text = _run([launcher, "--version"], env=_probe_env(families))
    for family, spec in families.items():
        m = re.search(spec["version_regex"], text)
        if m:
            return family, m.group(1)
    first = text.strip().splitlines()[0] if text.strip() else "no output"
    raise DiscoveryError(f"{launcher}: not a known MPI launcher ({first})")


def _probe_env(families):
    env = dict(os.environ)
    for spec in families.values():
        env.update(spec["env"])
    return env


def capability_tool(cand, tool):
    """The family tool that belongs to this candidate, or None."""
    if cand.prefix:
        path = os.path.join(cand.prefix, "bin", tool)
        return path if _executable(path) else None
    bindir = os.path.dirname(cand.launcher)
    for name in ([f"{tool}.{cand.suffix}"] if cand.suffix else []) + [tool]:
        path = os.path.join(bindir, name)
        if _executable(path):
            return path
    return None


def parse_mpich_capabilities(text):
    """`MPICH Device: ch4:ucx ofi` -> {device:ch4, netmod:ucx, netmod:ofi}."""
    m = re.search(r"MPICH Device:\s*(.+)", text)
    if not m:
        return set()
    words = m.group(1).replace(",", " ").split()
    caps = set()
    for word in words:
        device, _, netmod = word.partition(":")
        if netmod:
            caps.add(f"device:{device}")
            caps.add(f"netmod:{netmod}")
        elif caps:            # further netmods of a multi-netmod build
            caps.add(f"netmod:{device}")
        else:
            caps.add(f"device:{device}")
    return caps


def parse_ompi_capabilities(text):
    """`mca:btl:tcp:version:...` lines -> {btl:tcp, ...}."""
    return {f"{m.group(1)}:{m.group(2)}"
            for m in re.finditer(r"^mca:(btl|pml|mtl):([A-Za-z0-9_]+):version:", text, re.M)}


CAPABILITY_PARSERS = {"mpich": (parse_mpich_capabilities, []),
                      "openmpi": (parse_ompi_capabilities, ["--parsable"])}


def capabilities(cand, family, families):
    tool = capability_tool(cand, families[family]["capability_tool"])
    if not tool:
        return frozenset()
    parse, args = CAPABILITY_PARSERS[family]
    return frozenset(parse(_run([tool] + args, env=_probe_env(families))))


def offered_transports(family, caps, families):
    """Transport name -> environment, for the transports `caps` (the MPI's
    and the fabric's, netbench.probe.fabric) allow."""
    offered = {}
    for tname, alternatives in families[family]["transports"].items():
        for alt in alternatives:
            if all(req in caps for req in alt["requires"]):
                offered[tname] = {str(k): str(v) for k, v in alt["env"].items()}
                break
    return offered


def transports_without_fabric(family, caps, fabric_caps, families):
    """{transport: [what fabric discovery did not find]} of the transports
    the MPI itself could run (`caps`) but the node's fabric (`fabric_caps`)
    cannot carry: an RDMA transport on a node without its device or
    provider."""
    missing = {}
    for tname, alternatives in families[family]["transports"].items():
        mpi_ready = [alt for alt in alternatives
                     if all(req in caps for req in alt["requires"]
                            if not fabric.is_fabric_requirement(req))]
        lacks = [[req for req in alt["requires"] if fabric.is_fabric_requirement(req)
                  and req not in fabric_caps] for alt in mpi_ready]
        if lacks and all(lacks):
            missing[tname] = lacks[0]
    return missing


def probe(cand, families, fabric_caps=None):
    check_name(cand)
    family, version = identify(cand.launcher, families)
    if family not in CAPABILITY_PARSERS:
        raise DiscoveryError(f"{cand.launcher}: no capability parser for family {family}")
    caps = capabilities(cand, family, families)
    if fabric_caps is None:
        fabric_caps = fabric.node_fabric().capabilities
    transports = offered_transports(family, caps | fabric_caps, families)
    not_found = transports_without_fabric(family, caps, fabric_caps, families)
    view = view_fabric(cand)
    if view:
        allowed = load_fabrics()[view]
        transports = {t: env for t, env in transports.items() if t in allowed}
        not_found = {t: why for t, why in not_found.items() if t in allowed}
    return MPI(name=cand.name, source=cand.source, family=family, version=version,
               cc=cand.cc, launcher=cand.launcher, prefix=cand.prefix, capabilities=caps,
               transports=transports, fabric=view,
               known_defects=known_defects(family, version, transports, families),
               fabric_not_found=not_found)


def known_defects(family, version, transports, families):
    """{transport: [defect]} of the family's known defects that apply to
    this version's transports; a defect without `placements` applies to
    every placement, one without `launchers` to every launcher (ReFrame's
    launcher names: srun, mpirun, local, ...)."""
    found = {}
    for d in families[family].get("known_defects") or []:
        if version in map(str, d["versions"]) and d["transport"] in transports:
            found.setdefault(d["transport"], []).append(
                {"min_ranks": d["min_ranks"], "why": d["why"],
                 "placements": d.get("placements") or ["intranode", "internode"],
                 **({"launchers": d["launchers"]} if d.get("launchers") else {})})
    return found


def known_defect(defects, transport, placement, ranks, launcher=None):
    """The first of an environment's known defects (known_defects()) that
    a run of `ranks` ranks over `transport` at `placement` meets, or None;
    a defect of some launchers only where `launcher` is one of them (not
    where it is unknown: case generation knows no partition's launcher)."""
    for d in (defects or {}).get(transport) or []:
        if "launchers" in d and launcher not in d["launchers"]:
            continue
        if placement in d["placements"] and ranks >= d["min_ranks"]:
            return d
    return None


def load_fabrics(path=FABRICS_FILE):
    data = load_yaml(path)
    for view_kind in data:
        require(data, view_kind, list, path, "")
    return data


def view_fabric(cand):
    """The fabric a Spack view was built for, from its name (`mpich-ucx`),
    or "" (wheels, system MPIs, views named otherwise)."""
    if cand.source != "view":
        return ""
    suffix = cand.name.rsplit("-", 1)[-1]
    return suffix if "-" in cand.name and suffix in load_fabrics() else ""


def discover(wheel_dir=paths.WHEEL_PREFIXES, views_dir=None, search_path=None,
             families=None, on_error=None):
    """Every working MPI, in candidate order.  Candidates that fail to probe
    are passed to `on_error(candidate, error)` (default: skipped)."""
    families = families or load_families()
    found = []
    for cand in candidates(wheel_dir, views_dir, search_path):
        try:
            found.append(probe(cand, families))
        except DiscoveryError as err:
            if on_error:
                on_error(cand, err)
    return found


# transports through a TCP stack, the MPI's own module first
NETWORK_TRANSPORTS = ("tcp", "ofi-tcp", "ucx-tcp")


def preferred_network_transport(offered):
    """The first of NETWORK_TRANSPORTS in `offered`, or None."""
    return next((t for t in NETWORK_TRANSPORTS if t in offered), None)


def environment_variables(mpi, families):
    """What a job using `mpi` needs in its environment."""
    spec = families[mpi.family]
    env = {str(k): str(v) for k, v in spec["env"].items()}
    # every launch says which path its library took (netbench.results.datapath)
    env.update(provenance_env(mpi.family, mpi.version, families))
    env["NETBENCH_MPIRUN"] = mpi.launcher
    env["NETBENCH_MPIRUN_FLAGS"] = spec["launcher_flags"]
    env["NETBENCH_MPI_FAMILY"] = mpi.family
    # srun's --mpi for this MPI; only srun reads it
    env["SLURM_MPI_TYPE"] = spec["slurm_mpi"]
    if mpi.prefix:
        env["PATH"] = f"{mpi.prefix}/bin:$PATH"
    return env


def refuse_transport_without_fabric(transport, mpis, families_file=FAMILIES_FILE):
    """DataError, one line (file, transport, what is missing), when
    `transport` was asked for explicitly and no MPI offers it because
    fabric discovery did not find what it requires; None otherwise."""
    if any(transport in m.transports for m in mpis):
        return
    lacking = [m for m in mpis if transport in m.fabric_not_found]
    if not lacking:
        return
    first = lacking[0]
    found = fabric.node_fabric()
    raise DataError(families_file, f"{first.family}.transports.{transport}",
                    f"requires {', '.join(first.fabric_not_found[transport])}, which fabric "
                    f"discovery did not find ({found.summary()})")


#: ReFrame's name of a test parameter's value in a test's name
TRANSPORT_IN_NAME = re.compile(r"transport=([A-Za-z0-9_+-]+)")


def requested_transports(name_patterns):
    """The transports a command line's `-n` patterns name explicitly
    (`-n 'PingPong.*%transport=ucx-rc-x'`)."""
    return sorted({m.group(1) for pattern in name_patterns
                   for m in TRANSPORT_IN_NAME.finditer(pattern)})


__all__ = ["MPI", "Candidate", "DataError", "DiscoveryError", "RefusedName", "discover", "probe",
           "candidates", "environment_variables", "load_families"]
