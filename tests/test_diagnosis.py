"""Diagnosis from curve signatures (netbench/report/diagnosis.py, rules in
netbench/data/diagnosis.yaml) on recorded sessions with known answers
(tests/data/tune/README.md): each injected cause named, nothing named on
healthy runs."""

import copy
import dataclasses
import json
from pathlib import Path

import pytest

from helpers.curves import with_time
from netbench.report import sessions
from netbench.report.sides import case_key
from netbench.report import diagnosis
from netbench.judgement.model import Estimate
from netbench.tuning import loop

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside

DATA = Path(__file__).parent / "data"
TUNE = DATA / "tune"
#: real sessions of healthy setups: emulated GigE before and after jumbo
#: frames, Open MPI's shared memory on this machine
HEALTHY = [TUNE / "gige-jumbo" / f"{n}.json" for n in ("before1", "before2", "after1", "after2")] \
    + [TUNE / "diagnosis" / f"{n}.json" for n in ("shm-healthy1", "shm-healthy2",
                                                  "shm-healthy-live1", "shm-healthy-live2",
                                                  "tcp-jumbo-healthy-live1",
                                                  "tcp-jumbo-healthy-live2",
                                                  "tcp-jumbo-healthy-live3")] \
    + [DATA / "compare" / "pingpong-shm-openmpi.json"]


def cases(report):
    """[(case key, testcase, record)] of a run report (a dict)."""
    return [(case_key(tc), tc, tc["record"]) for run in report["runs"]
            for tc in run["testcases"] if tc.get("record", {}).get("series")]


def load(path):
    return json.loads(Path(path).read_text())


def rules_named(report):
    return sorted({d.rule for d in diagnosis.diagnose_cases(cases(report))})


@pytest.mark.parametrize("path", HEALTHY, ids=lambda p: p.stem)
def test_healthy_runs_name_nothing(path):
    assert diagnosis.diagnose(sessions.load_session(path)) == []


def test_a_socket_buffer_cap_is_named_with_its_setting_and_source():
    # tcp_rmem/tcp_wmem capped at 4 KiB (tests/data/tune/profiles/sockbuf_capped.yml)
    (found,) = diagnosis.diagnose(sessions.load_session(TUNE / "diagnosis" / "sockbuf-capped.json"))
    assert found.rule == "socket_buffer_plateau"
    assert found.evidence.startswith("bandwidth from 1 MiB to 8 MiB flat at ")
    assert "net.ipv4.tcp_rmem" in found.setting and "seed000" in found.source


def test_a_socket_buffer_cap_is_named_from_the_node_state_where_the_curve_cannot_show_it():
    # the same profile on a quiet host: emulated GigE's 7 us (a bandwidth-
    # delay product of 1.75 KB) lets 8 MiB reach the line rate through 4 KiB
    # buffers, and the cap's cost (1 KiB 7 -> 13 us, 4 KiB 17 -> 51 us) sits
    # at sizes the token bucket's burst carries faster than the wire
    found = {d.rule: d for d in diagnosis.diagnose(sessions.load_session(
        TUNE / "diagnosis" / "sockbuf-capped-quiet-live.json"))}
    assert found["socket_buffer_plateau"].evidence == (
        "TCP buffers capped below 256000 bytes: tmeas-n1 tcp_rmem max 4096, tcp_wmem max 4096; "
        "tmeas-n2 tcp_rmem max 4096, tcp_wmem max 4096")
    # the same state with Linux's default maxima, or one field missing, names nothing
    t = diagnosis.load_rules()["socket_buffer_plateau"]["threshold"]
    state = {"n1": {"sysctl": {"net.ipv4.tcp_rmem": "4096 131072 6291456",
                               "net.ipv4.tcp_wmem": "4096 16384 4194304"}},
             "n2": {"sysctl": {"net.ipv4.tcp_rmem": "4096 131072"}}}
    curve = diagnosis.Curve("c", {"placement": "internode", "transport": "tcp"}, {}, {},
                            state, {})
    assert diagnosis.socket_buffer_plateau(curve, t) is None
    state["n2"]["sysctl"]["net.ipv4.tcp_wmem"] = "4096 16384 65536"
    assert diagnosis.socket_buffer_plateau(curve, t) == (
        "TCP buffers capped below 256000 bytes: n2 tcp_wmem max 65536")
    # over shared memory the sockets carry nothing
    shm = dataclasses.replace(curve, provenance={"placement": "intranode", "transport": "shm"})
    assert diagnosis.socket_buffer_plateau(shm, t) is None


def test_interrupt_coalescing_is_named_from_its_latency_floor():
    # seed 004's ITR 8000: one interrupt per 125 us added to every message
    # (a veth takes no coalescing: the recorded tuned run with that added)
    report = with_time(load(TUNE / "gige-jumbo" / "after1.json"), 125)
    assert rules_named(report) == ["interrupt_coalescing_floor"]
    (found,) = diagnosis.diagnose_cases(cases(report))
    assert "rx-usecs" in found.setting and "seed004" in found.source


def test_an_eager_limit_moved_is_named_in_a_real_run():
    # Open MPI's shared memory with OMPI_MCA_btl_sm_eager_limit=1024 (the
    # job's env_vars, set with reframe -S; tests/data/tune/README.md)
    (found,) = diagnosis.diagnose(sessions.load_session(TUNE / "diagnosis" /
                                                        "shm-eager1k-live.json"))
    assert found.rule == "eager_rendezvous_step"
    assert found.evidence == "the job set OMPI_MCA_btl_sm_eager_limit=1024 (default 4096)"
    assert found.setting == "OMPI_MCA_btl_sm_eager_limit"


def rate_curve(rates, **provenance):
    """A Curve between nodes over TCP from {bytes: [Mbit/s of each launch]}."""
    launches = {b: [Estimate(v, 0.95 * v, 1.05 * v) for v in vs]
                for b, vs in rates.items()}
    best = {b: max(es, key=lambda e: e.value) for b, es in launches.items()}
    prov = {"placement": "internode", "transport": "tcp", "mpi_family": "openmpi",
            **provenance}
    return diagnosis.Curve("case", prov, {}, best, None, {}, {}, launches)


def test_an_eager_step_in_the_curve_must_hold_in_every_launch_away_from_the_default():
    t = diagnosis.load_rules()["eager_rendezvous_step"]["threshold"]
    # Open MPI over TCP: its default switch is at 64 KiB; a step at 8 KiB
    # in both launches is a moved limit
    step = {4096: [900, 880], 8192: [300, 310], 16384: [950, 940], 65536: [990, 980]}
    assert diagnosis.eager_rendezvous_step(rate_curve(step), t) == (
        "bandwidth falls from 900 Mbit/s at 4 KiB to 310 at 8 KiB in all 2 launches and "
        "regains it at 16 KiB")
    # one launch's stall is not a step
    stall = {**step, 8192: [300, 890]}
    assert not diagnosis.eager_rendezvous_step(rate_curve(stall), t)
    # the same dip at the default switch (64 KiB to 128 KiB) is the default's
    default = {32768: [900, 880], 65536: [950, 940], 131072: [300, 310], 262144: [990, 980]}
    assert not diagnosis.eager_rendezvous_step(rate_curve(default), t)
    # a token bucket's steps are its own
    assert not diagnosis.eager_rendezvous_step(rate_curve(step, line_rate_source="tbf"), t)


def with_node_state(report, state):
    report = copy.deepcopy(report)
    for _, _, record in cases(report):
        record["node_state"] = state
    return report


def link(mtu):
    """A node's state as netbench/probe/nodestate.py captures it (the part read)."""
    return {"interfaces": {"eth0": {"mtu": mtu}}}


def test_an_mtu_mismatch_and_missing_jumbo_frames_are_named_from_the_node_state():
    tuned = load(TUNE / "gige-jumbo" / "after1.json")
    mismatch = with_node_state(tuned, {"n1": link(9000), "n2": link(1500)})
    assert rules_named(mismatch) == ["mtu_path_mismatch"]
    (found,) = diagnosis.diagnose_cases(cases(mismatch))
    assert found.evidence == "the nodes' MTUs differ: n1 9000, n2 1500"
    untuned = with_node_state(load(TUNE / "gige-jumbo" / "before1.json"),
                              {"n1": link(1500), "n2": link(1500)})
    assert rules_named(untuned) == ["jumbo_frames_missing"]
    # the tuned nodes, at 9000 both, name nothing
    assert rules_named(with_node_state(tuned, {"n1": link(9000), "n2": link(9000)})) == []


def test_an_mtu_mismatch_is_named_in_a_real_run():
    # vcluster fault --node 2 --mtu 9000 on a cluster whose switch carries
    # jumbo frames (tests/data/tune/README.md): the job's node state
    (found,) = diagnosis.diagnose(sessions.load_session(TUNE / "diagnosis" /
                                                        "tcp-mtu-mismatch-live.json"))
    assert found.rule == "mtu_path_mismatch"
    assert found.evidence == "the nodes' MTUs differ: tuneh-n1 1500, tuneh-n2 9000"


def test_a_tcp_eager_limit_moved_is_named_in_a_real_run():
    # OMPI_MCA_btl_tcp_eager_limit=4096 across emulated GigE; the nodes at
    # MTU 1500 on a switch that carries jumbo frames are named too
    found = {d.rule: d for d in diagnosis.diagnose(sessions.load_session(
        TUNE / "diagnosis" / "tcp-eager4k-live.json"))}
    assert set(found) == {"eager_rendezvous_step", "jumbo_frames_missing"}
    assert found["eager_rendezvous_step"].evidence == (
        "the job set OMPI_MCA_btl_tcp_eager_limit=4096 (default 65536)")
    assert found["eager_rendezvous_step"].setting == "OMPI_MCA_btl_tcp_eager_limit"


def test_an_mtu_black_hole_is_named_from_the_curve():
    # every size from 16 KiB a hundred times as long: large segments lost
    report = with_time(load(TUNE / "gige-jumbo" / "after1.json"), 0,
                       at=lambda size: size >= 16384, factor=100)
    assert "mtu_path_mismatch" in rules_named(report)


def test_single_copy_disabled_is_named_in_a_real_run():
    # Open MPI's shared memory with OMPI_MCA_smsc=^cma (the job's env_vars)
    found = diagnosis.diagnose(sessions.load_session(TUNE / "diagnosis" /
                                                     "shm-smsc-nocma-live.json"))
    assert [d.rule for d in found] == ["shm_without_single_copy"]
    assert found[0].evidence == ("the job ran with OMPI_MCA_smsc=^cma: no single copy (CMA) "
                                 "between ranks")


@pytest.mark.parametrize("env, named", [
    ({"OMPI_MCA_smsc": "^cma"}, "OMPI_MCA_smsc=^cma"),
    ({"OMPI_MCA_smsc": "xpmem"}, "OMPI_MCA_smsc=xpmem"),
    ({"OMPI_MCA_smsc": "cma"}, ""), ({"OMPI_MCA_smsc": "^xpmem"}, ""),
    ({"OMPI_MCA_btl_sm_single_copy_mechanism": "none"},
     "OMPI_MCA_btl_sm_single_copy_mechanism=none"), ({}, "")])
def test_which_settings_leave_shared_memory_without_single_copy(env, named):
    assert diagnosis.single_copy_excluded(env) == named


def test_single_copy_disabled_is_named_from_ptrace_scope():
    # Open MPI run with OMPI_MCA_smsc=^cma; its node state says why CMA is off
    nocma = load(TUNE / "diagnosis" / "shm-nocma.json")
    scoped = with_node_state(nocma, {"local": {"sysctl": {"kernel.yama.ptrace_scope": "1"}}})
    assert rules_named(scoped) == ["shm_without_single_copy"]
    open_scope = with_node_state(nocma, {"local": {"sysctl": {"kernel.yama.ptrace_scope": "0"}}})
    assert rules_named(open_scope) == []


def test_one_stream_below_several():
    curve = diagnosis.Curve
    one = curve("1", {"placement": "internode"}, {}, {65536: Estimate(300, 290, 310)},
                None, {"connections": 1})
    many = curve("16", {"placement": "internode"}, {}, {65536: Estimate(900, 880, 910)},
                 None, {"connections": 16})
    t = diagnosis.load_rules()["one_stream_below_several"]["threshold"]
    (found,) = diagnosis.one_stream_below_several([one, many], t)
    assert found[0] is one and found[1] == "one connection peaks at 300 Mbit/s, 16 at 900 Mbit/s"
    assert diagnosis.one_stream_below_several([many], t) == []


def test_one_stream_below_several_is_named_from_the_testcases_as_reframe_writes_them():
    """ReFrame's run report puts a case's parameters at the top level of
    its testcase (`connections`), where the rule reads them."""
    def case(connections, mbps):
        series = {"name": "tcp", "x": {"column": "bytes", "unit": "B"},
                  "y": [{"column": "Mbps", "unit": "Mbit/s"}],
                  "rows": [{"bytes": 65536, "Mbps": mbps}]}
        record = {"provenance": {"placement": "internode"}, "series": [series]}
        tc = {"name": f"TcpStreams %connections={connections}", "connections": connections,
              "env_vars": {}}
        return str(connections), tc, record
    (found,) = diagnosis.diagnose_cases([case(1, 300.0), case(16, 900.0)],
                                        {"one_stream_below_several":
                                         diagnosis.load_rules()["one_stream_below_several"]})
    assert (found.case, found.evidence) == ("1", "one connection peaks at 300 Mbit/s, 16 at "
                                                 "900 Mbit/s")


def test_every_rule_states_signature_threshold_setting_and_source():
    rules = diagnosis.load_rules()
    assert set(rules) == set(diagnosis.CURVE_RULES) | {"one_stream_below_several"}
    for rule in rules.values():
        assert rule["signature"].strip() and rule["source"].strip() and rule["setting"]


def test_tune_proposes_the_profile_values_that_address_a_diagnosis():
    found = diagnosis.diagnose(sessions.load_session(TUNE / "diagnosis" / "sockbuf-capped.json"))
    lines = diagnosis.proposals(found, loop.profile_data("ethernet_1g", None))
    assert "sysctl.net.ipv4.tcp_rmem = 4096 131072 16777216 (socket_buffer_plateau)" in lines
    assert "sysctl.net.core.rmem_max = 16777216 (socket_buffer_plateau)" in lines


def test_the_report_shows_the_diagnoses_beside_the_verdict():
    from netbench.report import page
    html = page.render_report([sessions.load_session(TUNE / "diagnosis" / "sockbuf-capped.json")])
    verdict, diagnoses = html.index('id="verdict"'), html.index('id="diagnoses"')
    assert verdict < diagnoses < html.index('class="headline"')
    assert "TCP socket buffers too small for the bandwidth-delay product" in html
    healthy = page.render_report([sessions.load_session(TUNE / "gige-jumbo" / "after1.json")])
    assert 'id="diagnoses"' not in healthy


# ---- issue 35: an MTU the node could not read, interfaces off the data path -----

HEALTHY_JUMBO = TUNE / "diagnosis" / "tcp-jumbo-healthy-live1.json"


def jumbo_nodes(report):
    """The node names of a recorded two-node session's node state."""
    (_, _, record), *_ = cases(report)
    return sorted(record["node_state"])


def with_links(report, links):
    """`report` whose every case's node state has these interfaces per node
    ({node: {interface: state}}), the rest of each node's state kept."""
    report = copy.deepcopy(report)
    for _, _, record in cases(report):
        for node, ifs in links.items():
            record["node_state"][node]["interfaces"] = copy.deepcopy(ifs)
    return report


def test_an_mtu_the_node_could_not_read_is_unknown_not_a_crash():
    # netbench.probe.nodestate writes "mtu": null where /sys/class/net/IF/mtu
    # cannot be read; the other node's 9000 is compared with nothing
    report = load(HEALTHY_JUMBO)
    n1, n2 = jumbo_nodes(report)
    unknown = with_links(report, {n1: {"eth0": {"mtu": None}}})
    assert rules_named(unknown) == []
    # both unknown, and both unknown beside a known one on one node
    assert rules_named(with_links(report, {n1: {"eth0": {"mtu": None}},
                                           n2: {"eth0": {"mtu": None}}})) == []
    curve = diagnosis.Curve("c", {"placement": "internode", "transport": "tcp",
                                  "line_rate_mbps": 1000}, {}, {},
                            {"n1": {"interfaces": {"eth0": {"mtu": None}, "eth1": {"mtu": 1500}}},
                             "n2": {"interfaces": {"eth0": {"mtu": 1500}}}}, {})
    t = diagnosis.load_rules()["mtu_path_mismatch"]["threshold"]
    assert diagnosis.mtu_path_mismatch(curve, t) is None


def test_a_session_whose_node_state_has_an_mtu_of_null_is_published_with_its_page(tmp_path):
    from netbench import report as publishing
    report = load(HEALTHY_JUMBO)
    n1, _ = jumbo_nodes(report)
    for _, _, record in cases(report):
        interfaces = record["node_state"][n1]["interfaces"]
        interfaces["eth1"] = copy.deepcopy(interfaces["eth0"])
        interfaces["eth0"]["mtu"] = None
    raw = tmp_path / "run-report.json"
    raw.write_text(json.dumps(report))
    folder = publishing.publish(raw, tmp_path / "reports")
    assert (folder / "index.html").is_file()


def test_an_interface_off_the_data_path_with_another_mtu_names_nothing():
    # a healthy jumbo-frame run; one node also has an interface the traffic
    # between the nodes does not take (its own network), at MTU 1500
    report = load(HEALTHY_JUMBO)
    n1, n2 = jumbo_nodes(report)
    on_path = {n1: {"eth0": {"mtu": 9000, "addresses": ["198.18.4.1/24"]},
                    "mgmt0": {"mtu": 1500, "addresses": ["10.9.0.7/24"]}},
               n2: {"eth0": {"mtu": 9000, "addresses": ["198.18.4.2/24"]}}}
    assert rules_named(with_links(report, on_path)) == []
    # an interface with no address at all (a bridge port, a dummy) neither
    no_address = copy.deepcopy(on_path)
    no_address[n1]["mgmt0"]["addresses"] = []
    assert rules_named(with_links(report, no_address)) == []
    # a record from before addresses were recorded: the MTUs are not compared
    old = {n1: {"eth0": {"mtu": 9000}, "mgmt0": {"mtu": 1500}}, n2: {"eth0": {"mtu": 9000}}}
    assert rules_named(with_links(report, old)) == []


def test_a_real_mismatch_on_the_data_path_is_still_named_with_its_network():
    report = load(HEALTHY_JUMBO)
    n1, n2 = jumbo_nodes(report)
    mismatch = {n1: {"eth0": {"mtu": 9000, "addresses": ["198.18.4.1/24", "fe80::1/64"]},
                     "mgmt0": {"mtu": 1500, "addresses": ["10.9.0.7/24"]}},
                n2: {"eth0": {"mtu": 1500, "addresses": ["198.18.4.2/24", "fe80::2/64"]},
                     "mgmt0": {"mtu": 1500, "addresses": ["10.9.0.8/24"]}}}
    (found,) = diagnosis.diagnose_cases(cases(with_links(report, mismatch)))
    assert found.rule == "mtu_path_mismatch"
    assert found.evidence == f"the nodes' MTUs differ: {n1} 9000, {n2} 1500 (on 198.18.4.0/24)"


def test_an_mtu_collapse_where_the_path_is_untold_says_the_mtus_were_not_compared():
    report = with_time(load(TUNE / "gige-jumbo" / "after1.json"), 0,
                       at=lambda size: size >= 16384, factor=100)
    untold = with_node_state(report, {"n1": {"interfaces": {"eth0": {"mtu": 9000},
                                                            "eth1": {"mtu": 1500}}},
                                      "n2": {"interfaces": {"eth0": {"mtu": 9000}}}})
    found = {d.rule: d for d in diagnosis.diagnose_cases(cases(untold))}
    assert found["mtu_path_mismatch"].evidence.startswith("small messages cross, but ")
    assert found["mtu_path_mismatch"].evidence.endswith("; " + diagnosis.MTUS_NOT_COMPARED)
