"""Run reports as ReFrame writes them, made small: what the page reads."""

import json

from netbench import report
from netbench.results import record as results_record

#: what seed 000's Table 1 says of intranode Myrinet MPI, as a check records it
MYRINET_CITATION = ("000_0a10b582eb0a2537.txt, Table 1, \"Summary of performance of all the "
                    "networks on the IBM e325 cluster\", row Intranode / Myrinet / MPI")


def minimal_record(curve, latency_ref=0.42, bw_ref=7688.0):
    """The record a PingPong case writes (netbench.checks), with its references."""
    series = results_record.make_series("mpi", curve, ("usec", "Mbps", "MBps"),
                                        report.LEGACY_UNITS)
    figure = "seed000_e325_netpipe#table1/intranode.myrinet.mpi/"
    refs = {"latency": results_record.reference(
                latency_ref, None, 1.5, "us", figure + "latency_us", MYRINET_CITATION,
                "intranode", at={"series": "mpi", "y": "usec", "bytes": 1.0}),
            "peak_bw": results_record.reference(
                bw_ref, 0.0, None, "Mbit/s", figure + "max_bandwidth_mbps",
                MYRINET_CITATION, "intranode",
                at={"series": "mpi", "y": "Mbps", "bytes": 262141.0})}
    return results_record.make(
        "pingpong", "mpich blocking shm intranode", [series],
        {"mpi_family": "mpich", "mpi_version": "5.0.2", "mpi_source": "wheel",
         "transport": "shm", "placement": "intranode", "ranks": 2, "ranks_per_node": 2,
         "partition": "local:node", "interconnect": "intranode"}, refs)


def minimal_report(host="vm", environ="mpich", reason=None, started=1000.0, latency=0.5,
                   uuid="00000000-aaaa", with_record=True):
    """The parts of a ReFrame 4.10 run report the page reads; without its
    record, as checks wrote it before records (report_section, curve)."""
    curve = [{"bytes": float(n), "usec": 0.5 + n / 1e4, "Mbps": 8 * n / (0.5 + n / 1e4),
              "MBps": n / (0.5 + n / 1e4)} for n in (1, 2, 4, 1024, 65536, 1048576)]
    case = {
        "name": "PingPong_1", "unique_name": "PingPong_1",
        "display_name": "PingPong %variant=blocking %transport=shm %placement=intranode /94410d86",
        "system": "local", "partition": "node", "environ": environ,
        "result": "fail" if reason else "pass", "fail_reason": reason,
        "placement": "intranode", "transport": "shm", "variant": "blocking",
        "curve": curve, "partition_info": {"interconnect": "intranode"},
        "mpi_info": {"family": "mpich", "version": "5.0.2", "source": "wheel",
                     "launcher": "/x/mpirun", "transports": {"shm": {}}},
        "perfvalues": {"local:node:latency": [latency, 0.42, None, 1.5, "us", "pass"],
                       "local:node:peak_bw": [80000.0, 7688, 0.0, None, "Mbit/s", "pass"]},
    }
    if with_record:
        case["record"] = minimal_record(curve)
    else:
        case["report_section"] = "pingpong"
    return {"session_info": {"hostname": host, "uuid": uuid, "time_start": "20261121T100000+0000",
                             "time_start_unix": started, "version": "4.10.4",
                             "cmdline": "reframe -c reframe_checks -r", "num_cases": 1,
                             "num_failures": 1 if reason else 0},
            "runs": [{"testcases": [case]}]}


def session_from(data, tmp_path, name="r.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return report.load_session(path)


def sweep_report(suspects):
    """A run report with one LinkSweep case over nodes n1-n3, n3's link slow."""
    hosts = ["n1", "n2", "n3"]
    pairs = [{"src": a, "dst": b, "latency_us": 20.0,
              "bw_Mbps": {"8388608": 300.0 if "n3" in (a, b) else 950.0}}
             for a in hosts for b in hosts if a != b]
    record = results_record.make("sweep", "mpich tcp", [], {"mpi_family": "mpich",
                                                            "placement": "internode"})
    record["fleet"] = {"hosts": hosts, "pairs": pairs, "suspects": suspects,
                       "findings": [], "remeasured": [["n1", "n3"]], "sweep_seconds": 12.5,
                       "rounds": 3, "order": "concurrent"}
    data = minimal_report(reason="sanity error: suspects: node n3" if suspects else None)
    case = data["runs"][0]["testcases"][0]
    case.update(name="LinkSweep_1", unique_name="LinkSweep_1", display_name="LinkSweep",
                record=record, perfvalues={})
    return data


def one_line_error(err):
    """netbench's error: exactly one line on stderr."""
    lines = err.strip("\n").splitlines()
    assert len(lines) == 1 and lines[0].startswith("netbench: "), err
    return lines[0]
