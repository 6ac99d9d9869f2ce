"""What the container parity check (reframe_checks/container.py) makes of
its job: the figures of each interleaved round on the host and in the
image, their paired slowdowns, and the likely causes of a slowdown from
the evidence the job recorded inside and outside the image.  The verdict
on the slowdowns is the verdict model's paired form
(netbench/judgement/parity.py), its limit judging.yaml's.
"""

import os
import re
import statistics

#: CAP_SYS_PTRACE's bit in /proc/PID/status CapEff (linux/capability.h)
CAP_SYS_PTRACE_BIT = 19
SHARES_PER_RANK = 1024
#: how a user drops the seccomp filter: the opt-in of data/container_run.yaml,
#: named in rfm/container.py's OPT_IN_ENV
SECCOMP_OPT_IN = "NETBENCH_CONTAINER_OPT_IN=seccomp-unconfined"
#: what the parity check's job records of a process on each side: its
#: capabilities and seccomp mode, its cgroups, and its cgroup's CPU weight
#: (cgroup v1; v2's cpu.weight is on another scale and not read)
EVIDENCE = ("cat /proc/self/status /proc/self/cgroup; "
            "echo cpu.shares $(cat /sys/fs/cgroup/cpu/cpu.shares 2>/dev/null)")



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


def bindings(placements):
    """{rank: the CPUs it may run on} of a launch's placements
    ({rank: {host, cpus}}, benchmark.parse_run)."""
    return {int(rank): tuple(p.get("cpus") or ()) for rank, p in (placements or {}).items()}


def binding_text(binding):
    return ", ".join(f"rank {r} on CPUs {','.join(map(str, cpus)) or 'any'}"
                     for r, cpus in sorted(binding.items()))


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


def likely_causes(container_evidence, native_placements, container_placements, family,
                  loadavg_text=None, native_status=None, ranks=2):
    """What the container differs in that moves MPI's performance, from what
    the job observed (EVIDENCE inside the image and on the host, the ranks'
    placements of a round: benchmark.parse_run's); each is a fact seen, its
    effect on the figure is the likely cause."""
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
                      f"(MPI progress loops call sched_yield; {SECCOMP_OPT_IN} "
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
    inside, outside = bindings(container_placements), bindings(native_placements)
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


#: the two sides of a round: the host's launch and the container's
SIDES = ("native", "container")


def round_files(stagedir, side):
    """The output files of every launched round of `side`, in round order
    (native.I.out, container.I.out)."""
    files = []
    while os.path.exists(os.path.join(stagedir, f"{side}.{len(files)}.out")):
        files.append(f"{side}.{len(files)}.out")
    return files


#: the suffix of a round's first launch's stderr when it exited non-zero
#: and was launched once more
FIRST_ATTEMPT = ".first"


def launched_once_more_on_failure(command, stem):
    """Shell for one side's launch of a round, output to STEM.out and
    stderr to STEM.err, launched once more when it exits non-zero, its
    first stderr kept as STEM.err.first: one launch of 15 failing once
    (CI saw a native round of Open MPI end without its sweep) is a
    launcher's fault to name, not a reason to void the comparison of the
    other 14 (relaunched_rounds)."""
    return (f"{{ {command} > {stem}.out 2> {stem}.err || "
            f"{{ mv {stem}.err {stem}.err{FIRST_ATTEMPT}; "
            f"{command} > {stem}.out 2> {stem}.err; }}; }}")


def last_error_line(text):
    """The last non-blank line of a launch's stderr, or "no error output"."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else "no error output"


def relaunched_rounds(stagedir):
    """{side: {round: the first attempt's last error line}} of the rounds
    whose first launch failed (launched_once_more_on_failure)."""
    relaunched = {}
    for side in SIDES:
        for i, _ in enumerate(round_files(stagedir, side)):
            first = os.path.join(stagedir, f"{side}.{i}.err{FIRST_ATTEMPT}")
            if os.path.exists(first):
                with open(first, errors="replace") as f:
                    relaunched.setdefault(side, {})[str(i)] = last_error_line(f.read())
    return relaunched


def launch_figures(launch, max_bytes):
    """(latency in us, bandwidth at max_bytes in Mbps) of one parsed launch
    (benchmark.parse_run), or None when it did not finish its sweep."""
    latency = launch["summary"].get("latency_usec")
    bandwidth = next((r["Mbps"] for r in launch["rows"]
                      if r["bytes"] == max_bytes and "Mbps" in r), None)
    return None if latency is None or bandwidth is None else (latency, bandwidth)


def round_figures(stagedir, max_bytes):
    """{"native": [(lat, bw) or None, ...], "container": [...]}, one entry
    per launched round in round order; None for a round that did not finish
    its sweep, so that round I of one side stays beside round I of the
    other.  The job's question between batches of rounds (parity_undecided);
    the check reads the same rounds once through NetbenchRun.launches."""
    from .benchmark import parse_run
    runs = {}
    for side in SIDES:
        runs[side] = []
        for name in round_files(stagedir, side):
            with open(os.path.join(stagedir, name), errors="replace") as f:
                runs[side].append(launch_figures(parse_run(f.read()), max_bytes))
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
