"""Cluster runs listen only where they must (#14 item 5).

MPI launchers bind their listening sockets to every address they have:
Open MPI 5's prterun listens on 0.0.0.0 and [::] whatever
`oob_tcp_if_include` says, and Hydra's mpiexec on 0.0.0.0.  Started on the
host, they were reachable from the host's real networks while a job ran.
netbench starts them in the cluster's head namespace instead.  These tests
launch real jobs across a real cluster, exactly as its ReFrame partition
does (netbench.rfm.launch), and sample `ss -ltnp` while the job runs: in the
host's namespace (nothing of the job may appear there) and in the head's
(the launcher must appear there: the sampler sees what it looks for).
"""

import ipaddress
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from conftest import require
from netbench import vcluster
from netbench.rfm import launch
from netbench.tools.benchrun import job_environment
from helpers.vcluster import cluster

MiB = 1024 * 1024
#: programs of a cluster run that may open listening sockets
LAUNCHERS = ("prterun", "prted", "mpirun", "orterun", "orted", "mpiexec", "hydra_pmi_proxy",
             "netbench")


def listeners(namespace=None):
    """{(address:port, program, pid)} of every listening TCP socket, in the
    host's network namespace or in `namespace`."""
    prefix = ["ip", "netns", "exec", namespace] if namespace else []
    out = subprocess.run(prefix + ["ss", "-ltnpH"], capture_output=True, text=True,
                         check=True).stdout
    found = set()
    for line in out.splitlines():
        fields = line.split()
        users = re.findall(r'\("([^"]+)",pid=(\d+)', line) or [("?", "0")]
        found.update((fields[3], program, int(pid)) for program, pid in users)
    return found


def descends_from(pid, ancestor):
    """`pid` is `ancestor` or, now, one of its descendants."""
    seen = set()
    while pid > 1 and pid not in seen:
        if pid == ancestor:
            return True
        seen.add(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
    return False


def sample_during(argv, env, head_ns):
    """Run the job; sample the listeners of the host and of the head
    namespace every 50 ms until it ends.  Returns (job, host samples,
    head samples): each sample a set as `listeners` gives it; on the host,
    the job's own processes only (other engineers' MPI jobs on this
    machine listen there, rightly)."""
    job = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    host, head = [], []
    deadline = time.monotonic() + 120
    while job.poll() is None and time.monotonic() < deadline:
        host.append({e for e in listeners() if descends_from(e[2], job.pid)})
        head.append(listeners(head_ns) if head_ns else set())
        time.sleep(0.05)
    out, err = job.communicate(timeout=30)
    job.stdout_text, job.stderr_text = out, err
    return job, host, head


@pytest.mark.parametrize("mpi_name", ["mpich", "openmpi"])
def test_mpi_launchers_listen_on_the_cluster_network_only(mpi_name, mpis, build_benchmark,
                                                         families):
    require(os.geteuid() == 0, "the virtual cluster needs root (network namespaces)")
    mpi = mpis[mpi_name]
    bench = build_benchmark(mpi)
    with cluster("tlisn", nodes=2) as state:
        transport = "tcp" if "tcp" in mpi.transports else "ucx-tcp"
        env = {**job_environment(mpi, families, transport), "NETBENCH_MPI_FAMILY": mpi.family,
               "NETBENCH_MPIRUN": mpi.launcher, **vcluster.launch_environment(state)}
        # a sweep of a few seconds, so that the samples catch the job alive
        argv = launch.command(2, 1, [str(bench.binary), "pingpong", "-x", str(4 * MiB),
                                     "-t", "0.2"], env=env, families=families)
        head_ns = (state.get("launcher") or {}).get("namespace")
        job, host, head = sample_during(argv, env, head_ns)
        assert job.returncode == 0, job.stderr_text
        assert "host tlisn-n1" in job.stdout_text and "host tlisn-n2" in job.stdout_text
        cluster_net = ipaddress.ip_network(state["network"])
    assert len(host) >= 5, f"only {len(host)} samples while the job ran"
    on_host = {entry[:2] for sample in host for entry in sample
               if entry[1].startswith(LAUNCHERS)}
    assert not on_host, f"the job listened in the host's namespace: {sorted(on_host)}"
    in_head = {entry[:2] for sample in head for entry in sample
               if entry[1].startswith(LAUNCHERS)}
    assert in_head, "no launcher socket seen in the head namespace: the sampler saw nothing"
    for address, program in in_head:
        host_part = address.rsplit(":", 1)[0].strip("[]")
        # every address of the head namespace is its loopback or the cluster's
        assert host_part in ("0.0.0.0", "*", "::", "127.0.0.1", "::1") or \
            ipaddress.ip_address(host_part) in cluster_net, (address, program)
    print(f"\n{mpi_name}: {len(host)} samples; launcher sockets in the head: {sorted(in_head)}")
