"""The expected path decided from what fabric discovery found, at the
checks' level (netbench/checks/datapath.py, generation.py, judging.py): on
the HDR InfiniBand replica (tests/data/replicas/ib-hdr-cx6, read through
NETBENCH_FABRIC_CAPTURE) a site partition of `interconnect: auto` runs
`native` in its focused default run, expects the replica's port, is judged
by the HDR RDMA class, and a `native` result whose library said it used TCP
(this machine's real output: tests/data/provenance) fails as a silent
fallback naming the expected port and the device used, with no flag.

The check classes are instantiated by ReFrame's own loader in a ReFrame
runtime of a site file written here; a case is given its partition and
environment by ReFrame's setup steps, short of the benchmark's build
fixture (nothing is built or run)."""

import json
import os
import socket
import subprocess
import sys

import pytest
import yaml

from netbench import paths
from netbench.probe import fabric
from netbench.rfm import session

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside

REPLICAS = paths.REPO / "tests" / "data" / "replicas"
HDR = REPLICAS / "ib-hdr-cx6"
PROVENANCE = paths.REPO / "tests" / "data" / "provenance"
NATIVE_BETWEEN_NODES = "PingPong %variant=blocking %transport=native %placement=internode"


@pytest.fixture
def site(tmp_path):
    """The shipped site recipe's InfiniBand partition (`interconnect: auto`)
    on this host's name, 2 nodes, every environment."""
    recipe = yaml.safe_load((paths.CHECKS / "sites" / "example-slurm.yaml").read_text())
    recipe.update(name="rdmasite", hostnames=[f"^{socket.gethostname()}$"])
    ib = recipe["partitions"][0]
    ib.update(environs=".*")
    ib["extras"].update(nodes=2)
    assert ib["extras"]["interconnect"] == "auto"
    recipe["partitions"] = [ib]
    (tmp_path / "sites").mkdir()
    (tmp_path / "sites" / "rdmasite.yaml").write_text(yaml.safe_dump(recipe))
    return tmp_path


def _env(site, capture):
    env = {k: v for k, v in os.environ.items() if not k.startswith(session.DROPPED)}
    env.update(PYTHONPATH=str(paths.REPO), NETBENCH_SITES=str(site / "sites"))
    if capture:
        env[fabric.CAPTURE_VARIABLE] = str(capture)
    return env


def _default_list(site, capture):
    proc = subprocess.run([str(session.BIN / "reframe"), "-C", str(paths.CONFIG),
                           "-c", str(paths.CHECKS / "pingpong.py"), "-l"], cwd=site,
                          env=_env(site, capture), capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "rdmasite" in proc.stdout
    return proc.stdout


def test_native_joins_the_default_run_where_an_rdma_device_is_discovered(site):
    listed = _default_list(site, HDR)
    assert NATIVE_BETWEEN_NODES in listed, listed[-3000:]
    assert "%transport=native %placement=intranode" not in listed


def test_without_an_rdma_device_the_default_run_has_no_native_case(site):
    if fabric.rdma_device_found(fabric.discover()):
        pytest.skip("this machine has an RDMA device: the test is for one without")
    assert "%transport=native" not in _default_list(site, None)


#: a ReFrame runtime on the site; each case asked for on the command line
#: (transport, environment, expected_device or "") is instantiated, given
#: its partition and environment, and asked what the checks decide
CASE = r"""
import json, sys
from pathlib import Path
import reframe.core.config as config
import reframe.core.runtime as runtime
import reframe.utility as util
site = config.load_config(sys.argv[1])
site.select_subconfig("rdmasite")
runtime.init_runtime(site)
PingPong = util.import_module_from_file(sys.argv[2]).PingPong
part = runtime.runtime().system.partitions[0]
found = {}
for transport, env_name, expected, output in json.loads(sys.argv[3]):
    num, = PingPong.get_variant_nums(variant=lambda v: v == "blocking",
                                     transport=lambda t: t == transport,
                                     placement=lambda p: p == "internode")
    check = PingPong(variant_num=num)
    if expected:
        check.expected_device = expected
    # ReFrame's setup, short of resolving the build fixture
    check._current_partition = part
    check._current_environ = next(e for e in part.environs if e.name == env_name)
    check._setup_paths()
    check._setup_run_job()
    held = check.thresholds()
    said = check.path_said(Path(output).read_text()) if output else None
    verdict = check.path_verdict_of([said]).to_json() if said else None
    choice = check.rdma_choice()
    found[f"{transport} {env_name} {expected}"] = {
        "class": check.interconnect_class(), "judged_by": list(check.judged_by()),
        "rdma_choice": choice and choice.cname, "device": check.device_expected(),
        "thresholds": {var: t.per_line_rate_mbps and t.scale * t.per_line_rate_mbps
                       for var, t in held.items()},
        "verdict": verdict,
        "sentence": verdict and __import__("netbench.report.datapath",
                                           fromlist=["sentence"]).sentence(verdict)}
print(json.dumps(found))
"""


def _cases(site, *cases, capture=HDR):
    proc = subprocess.run([sys.executable, "-c", CASE, str(paths.CONFIG),
                           str(paths.CHECKS / "pingpong.py"), json.dumps(cases)], cwd=site,
                          env=_env(site, capture), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("env_name, output", [("mpich", "mpich-ucx-tcp.out"),
                                              ("openmpi", "openmpi-tcp.out")])
def test_a_native_tcp_result_on_the_hdr_replica_fails_naming_both_devices(site, env_name,
                                                                          output):
    case, = _cases(site, ["native", env_name, "", str(PROVENANCE / output)]).values()
    # the class auto chose from the replica's port, with its thresholds at its rate
    assert case["class"] == "ib-hdr-rdma", case
    # ... and the transport the MPI is expected to take there: UCX's accelerated RC
    assert case["judged_by"] == ["pingpong", "ucx-rc-x"], case
    assert {"latency", "peak_bw"} <= set(case["thresholds"]), case
    assert case["thresholds"]["peak_bw"] == pytest.approx(200000), case
    # the expected device is the replica's active HDR port, with no flag
    assert case["device"] == "mlx5_0:1", case
    # the library went over TCP (this machine): a silent fallback naming both
    verdict = case["verdict"]
    assert verdict["verdict"] == "fail" and verdict["code"] == "silent_fallback", verdict
    assert verdict["expected_device"] == "mlx5_0:1" and verdict["device"], verdict
    assert verdict["used"] in ("tcp", "ucx-tcp"), verdict
    assert f"asked native on mlx5_0:1 of an RDMA interconnect class, the library used " \
           f"{verdict['used']} on {verdict['device']}" in case["sentence"], case["sentence"]


def test_an_rdma_case_takes_auto_s_rdma_class_and_the_replica_s_port(site):
    """Judging.rdma_choice: an RDMA transport's case across nodes of an
    `auto` partition is judged by the class chosen from the discovered
    port, bandwidth at that port's rate (not a TCP class by line rate)."""
    case, = _cases(site, ["ucx-rc", "mpich", "", ""]).values()
    assert case["rdma_choice"] == "ib-hdr-rdma", case
    assert case["class"] == "ib-hdr-rdma", case
    assert case["thresholds"]["peak_bw"] == pytest.approx(200000), case
    assert case["device"] == "mlx5_0:1", case


def test_the_expected_device_set_by_hand_overrides_the_discovered_one(site):
    case, = _cases(site, ["native", "mpich", "mlx5_1:1", ""]).values()
    assert case["device"] == "mlx5_1:1", case


def test_a_native_tcp_result_on_the_slingshot_replica_expects_its_nic(site):
    """On the Slingshot-11 replica the expected path is libfabric's cxi on
    cxi0, judged by the Slingshot RDMA class; MPICH over libfabric's tcp
    provider (this machine's output) is a silent fallback."""
    case, = _cases(site, ["native", "mpich", "", str(PROVENANCE / "mpich-ofi-tcp.out")],
                   capture=REPLICAS / "slingshot-11").values()
    assert case["class"] == "slingshot-rdma", case
    assert case["judged_by"] == ["pingpong", "ofi-cxi"], case
    assert case["device"] == "cxi0", case
    verdict = case["verdict"]
    assert (verdict["code"], verdict["used"], verdict["expected_device"]) == \
        ("silent_fallback", "ofi-tcp", "cxi0"), verdict
    assert "asked native on cxi0 of an RDMA interconnect class, the library used ofi-tcp" \
        in case["sentence"], case["sentence"]
