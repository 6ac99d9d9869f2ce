"""`netbench baseline accept|show` under careless and hostile input (issue
35): names from run reports that are paths, links planted where it
writes, control characters, runs that would make a baseline that cannot
judge, duplicated sessions, partitions with too few sessions, future-dated
sessions, baselines renamed to another partition, sizes a run never sent,
and folders it cannot write.  Built from synthetic run reports (the fields
a ReFrame run report holds, records made by netbench.results.record):
pure, no MPI."""

import json
import math
import os
import shutil
from pathlib import Path

import pytest
import yaml

from netbench import cli
from netbench.datafiles import DataError
from netbench.judgement import baseline
from netbench.judgement import knobs
from netbench.judgement.model import (INCONCLUSIVE, PASS, Bound, Decision, Estimate,
                                      Reference, Replicate, judge)
from netbench.report import baselines
from netbench.results import record as results_record

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside

SIZES = [1.0, 64.0, 1024.0, 65536.0]
UNITS = {"bytes": "B", "usec": "us"}


def case(system="local", partition="node", environ="openmpi", name="PingPong %variant=a",
         scale=1.0, sizes=SIZES, row=None):
    """One passed PingPong case of a run report, its record holding two
    launches whose times are `scale` times a fixed curve."""
    rows = [{"bytes": n, "usec": (1.0 + n / 1000) * scale} for n in sizes]
    launches = [{"columns": ["bytes", "usec"], "summary": {},
                 "rows": [dict(r, usec=r["usec"] * f) for r in rows]} for f in (1.0, 1.02)]
    if row is not None:
        launches[0]["rows"].append(row)
    record = results_record.make(
        "pingpong", name, [results_record.make_series("mpi", rows, ("usec",), UNITS)],
        {"mpi_family": environ, "mpi_version": "5", "transport": "shm"},
        runs={"mpi": launches})
    return {"name": name, "display_name": f"{name} /0123abcd", "unique_name": name,
            "system": system, "partition": partition, "environ": environ, "result": "pass",
            "record": record}


def run_report(day, cases, uuid=None, year=2026):
    """A run report started on November `day` of `year`."""
    uuid = uuid or f"{day:08x}-0000-4000-8000-{year:012x}"
    return {"session_info": {"data_version": "4.0", "uuid": uuid,
                             "time_start": f"{year}11{day:02d}T010000+0000",
                             "time_start_unix": 1790000000.0 + (year - 2026) * 3.2e7 + day * 86400},
            "runs": [{"testcases": cases}]}


def publish(reports, report):
    """`report` placed as publish places a session: written into a hidden
    folder, renamed to its name by publish's own place_session, which
    numbers it (a later one publishes after it)."""
    from netbench.report.publish import place_session, reports_lock
    from netbench.report.sessions import session_folder_name
    name = session_folder_name(report["session_info"], "synthetic")
    reports.mkdir(exist_ok=True)
    staging = reports / f".session-{name}"
    staging.mkdir()
    (staging / "run-report.json").write_text(json.dumps(report))
    with reports_lock(reports):
        place_session(reports, staging, name)
    return name


def publish_runs(reports, days, **kw):
    return [publish(reports, run_report(day, [case(scale=1 + day / 100, **kw)]))
            for day in days]


def accept_cli(*args, capsys):
    rc = cli.main(["baseline", "accept", *map(str, args)])
    out, err = capsys.readouterr()
    return rc, out, err


# 1. a run report's system or partition joined into the path


@pytest.mark.parametrize("field, value", [("system", "../../x"), ("system", "/tmp/abs"),
                                          ("partition", "../up"), ("partition", "a/b"),
                                          ("system", "n\x1b]0;x\x07")])
def test_a_name_from_a_run_report_that_is_a_path_is_refused(tmp_path, field, value):
    reports, folder = tmp_path / "reports", tmp_path / "deep" / "er" / "baselines"
    folder.parent.mkdir(parents=True)
    names = [publish(reports, run_report(d, [case(**{field: value}, scale=1 + d / 100)]))
             for d in (1, 2, 3)]
    before = sorted(p for p in tmp_path.rglob("*"))
    with pytest.raises(DataError) as err:
        baselines.accept(names, reports_dir=reports, folder=folder)
    assert str(err.value).startswith(str(reports / names[0] / "run-report.json")
                                     + f": runs[0].testcases[0].{field}: "), err.value
    assert "\n" not in str(err.value) and "\x1b" not in str(err.value)
    assert sorted(p for p in tmp_path.rglob("*")) == before
    assert not Path("/tmp/abs-node.yaml").exists()


@pytest.mark.parametrize("partition", ["../../x:node", "/etc:passwd", "a:../b", "a:", "a:b/c"])
def test_a_baseline_path_always_stays_inside_its_folder(tmp_path, partition):
    with pytest.raises(ValueError):
        baseline.file_for(partition, tmp_path)
    assert baseline.for_partition(partition, tmp_path) is None


# 8. a file names its partition, and no two partitions share a file


def test_partitions_map_to_distinct_files():
    assert baseline.file_for("a-b:c", "f") != baseline.file_for("a:b-c", "f")
    assert baseline.file_for("local:node", "f") == Path("f/local-node.yaml")


def accepted_folder(tmp_path, system="local", partition="node"):
    reports, folder = tmp_path / "reports", tmp_path / "baselines"
    names = [publish(reports, run_report(d, [case(system, partition, scale=1 + d / 100)]))
             for d in (1, 2, 3)]
    baselines.accept(names, reports_dir=reports, folder=folder)
    return reports, folder, names


@pytest.mark.parametrize("copied_to", ["other-node.yaml", "local-gpu.yaml"])
def test_a_baseline_renamed_or_copied_judges_no_other_partition(tmp_path, copied_to):
    _, folder, _ = accepted_folder(tmp_path)
    shutil.copy(folder / "local-node.yaml", folder / copied_to)
    other = copied_to.removesuffix(".yaml").replace("-", ":", 1)
    with pytest.raises(DataError) as err:
        baseline.for_partition(other, folder)
    assert str(err.value).startswith(f"{folder / copied_to}: system: holds the baseline of "
                                     f"local:node"), err.value
    assert baseline.for_partition("local:node", folder)["partition"] == "node"


def test_two_partitions_whose_names_join_alike_keep_two_baselines(tmp_path):
    reports, folder = tmp_path / "reports", tmp_path / "baselines"
    names = [publish(reports, run_report(d, [case("a-b", "c", scale=1 + d / 100),
                                             case("a", "b-c", scale=2 + d / 100)]))
             for d in (1, 2, 3)]
    baselines.accept(names, reports_dir=reports, folder=folder)
    assert baseline.for_partition("a-b:c", folder)["system"] == "a-b"
    assert baseline.for_partition("a:b-c", folder)["system"] == "a"
    assert len(list(folder.glob("*.yaml"))) == 2


# 2. the fixed temporary name


def test_a_link_planted_at_a_temporary_name_is_not_followed(tmp_path):
    reports, folder = tmp_path / "reports", tmp_path / "baselines"
    folder.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (folder / ".local-node.yaml.tmp").symlink_to(victim)
    names = publish_runs(reports, (1, 2, 3))
    baselines.accept(names, reports_dir=reports, folder=folder)
    assert victim.read_text() == "precious\n"
    written = folder / "local-node.yaml"
    assert written.is_file() and not written.is_symlink()
    assert baseline.load(written)["system"] == "local"


# 3. case names with control characters reach the terminal escaped


def test_show_escapes_what_the_baseline_file_holds(tmp_path, capsys):
    reports, folder = tmp_path / "reports", tmp_path / "baselines"
    hostile = "PingPong\x1b]0;owned\x07\x1b[2J"
    names = [publish(reports, run_report(d, [case(name=hostile, environ="mpi\u202e",
                                                  scale=1 + d / 100)]))
             for d in (1, 2, 3)]
    rc, out, _ = accept_cli(*names, "--reports-dir", reports, "--folder", folder, capsys=capsys)
    assert rc == 0
    assert cli.main(["baseline", "show", "--folder", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert "PingPong\\x1b]0;owned\\x07" in out and "mpi\\u202e" in out


# 4. accept validates what it writes



@pytest.mark.parametrize("runs, why", [
    # two of three runs at 1.75e308 us: the band's upper is infinite
    (lambda d: case(scale=1.75e308 / 70 * (1 - d / 1000)) if d < 6 else case(),
     "finite number"),
    # runs whose sizes do not overlap: no size to judge
    (lambda d: case(sizes=[float(1 << (4 * d + k)) for k in range(3)]), "share no message size"),
])
def test_a_baseline_that_could_not_judge_is_not_written(tmp_path, capsys, runs, why):
    reports, folder, _ = accepted_folder(tmp_path)
    good = (folder / "local-node.yaml").read_bytes()
    names = [publish(reports, run_report(d, [runs(d)], uuid=f"{d:08x}-bad")) for d in (4, 5, 6)]
    with pytest.raises(DataError) as err:
        baselines.accept(names, reports_dir=reports, folder=folder)
    assert why in str(err.value) and "\n" not in str(err.value), err.value
    assert (folder / "local-node.yaml").read_bytes() == good
    assert [p.name for p in folder.iterdir()] == ["local-node.yaml"]
    # the default: the last three published are these: the same, exit 2
    rc, out, err = accept_cli("--reports-dir", reports, "--folder", folder, capsys=capsys)
    assert rc == 2 and why in err and len(err.splitlines()) == 1, err
    assert (folder / "local-node.yaml").read_bytes() == good


# 5. one session given three times, or copies of it


def test_the_same_session_three_times_is_refused(tmp_path):
    reports, folder = tmp_path / "reports", tmp_path / "baselines"
    (name,) = publish_runs(reports, (1,))
    with pytest.raises(DataError, match="the same session as " + name):
        baselines.accept([name] * 3, reports_dir=reports, folder=folder)
    assert not folder.exists()


@pytest.mark.parametrize("edit", [
    lambda report, i: report,                                      # byte for byte
    lambda report, i: {**report, "session_info": {                 # another uuid and date
        **report["session_info"], "uuid": f"{i:08x}-dead-beef",
        "time_start": f"2026110{i + 4}T010000+0000"}},
])
def test_copies_of_one_run_report_are_refused(tmp_path, edit):
    reports, folder = tmp_path / "reports", tmp_path / "baselines"
    report = run_report(1, [case()])
    copies = []
    for i in range(3):
        path = tmp_path / f"copy-{i}.json"
        path.write_text(json.dumps(edit(report, i)))
        copies.append(path)
    with pytest.raises(DataError, match="the same session as"):
        baselines.accept(copies, reports_dir=reports, folder=folder)
    assert not folder.exists()


def test_the_default_takes_a_copy_published_again_once(tmp_path, capsys):
    reports, folder = tmp_path / "reports", tmp_path / "baselines"
    publish_runs(reports, (1, 2))
    copy = run_report(3, [case(scale=1.02)], uuid="00000003-c0b1")     # day 2's measurements
    publish(reports, copy)
    rc, out, err = accept_cli("--reports-dir", reports, "--folder", folder, capsys=capsys)
    assert rc == 2 and "the same session as" in err and "2 session(s)" in err, err
    assert not list(folder.glob("*.yaml")) if folder.exists() else True


# 6. all or nothing per partition, said per partition


@pytest.mark.parametrize("figure", ["NaN", "Infinity", "1e999", '"fast"', "true"])
def test_a_launch_figure_that_is_no_number_is_one_line(tmp_path, figure):
    reports, folder = tmp_path / "reports", tmp_path / "baselines"
    names = publish_runs(reports, (1, 2, 3))
    path = reports / names[1] / "run-report.json"
    report = json.loads(path.read_text())
    report["runs"][0]["testcases"][0]["record"]["runs"]["mpi"][1]["rows"][2]["usec"] = 0.125
    path.write_text(json.dumps(report).replace("0.125", figure))
    with pytest.raises(DataError) as err:
        baselines.accept(names, reports_dir=reports, folder=folder)
    assert str(err.value).startswith(
        f"{path}: runs[0].testcases[0].record.runs.mpi[1].rows[2].usec: "), err.value
    assert not folder.exists()


def test_cases_that_passed_too_rarely_are_said(tmp_path, capsys):
    reports, folder = tmp_path / "reports", tmp_path / "baselines"
    for d in (1, 2, 3):
        cases = [case(scale=1 + d / 100)] + ([case(name="Rare", scale=2)] if d == 3 else [])
        publish(reports, run_report(d, cases))
    rc, out, err = accept_cli("--reports-dir", reports, "--folder", folder, capsys=capsys)
    assert rc == 0 and out.strip().endswith(
        "accepted 1 case(s) from 3 runs (20261101T010000-00000001, 20261102T010000-00000002, "
        f"20261103T010000-00000003) into {folder / 'local-node.yaml'}; 1 case(s) left out: "
        "passed in fewer than 3 of them"), out


def test_a_partition_with_too_few_sessions_is_skipped_and_said(tmp_path, capsys):
    reports, folder = tmp_path / "reports", tmp_path / "baselines"
    for d in (1, 2, 3):
        cases = [case(scale=1 + d / 100)] + ([case("vc", "nodes")] if d == 3 else [])
        publish(reports, run_report(d, cases))
    rc, out, err = accept_cli("--reports-dir", reports, "--folder", folder, capsys=capsys)
    assert rc == 0, err
    lines = out.splitlines()
    assert len(lines) == 2, out
    assert lines[0].startswith("netbench baseline: local:node: accepted 1 case(s) from 3 runs (")
    assert lines[1].startswith("netbench baseline: vc:nodes: skipped: 1 session(s)")
    assert sorted(p.name for p in folder.iterdir()) == ["local-node.yaml"]


def test_nothing_accepted_is_one_line_and_exit_2(tmp_path, capsys):
    reports, folder = tmp_path / "reports", tmp_path / "baselines"
    publish_runs(reports, (1, 2))
    rc, out, err = accept_cli("--reports-dir", reports, "--folder", folder, capsys=capsys)
    assert rc == 2 and len(err.splitlines()) == 1
    assert "nothing accepted" in err and "local:node: skipped: 2 session(s)" in err, err


# 7. the default sessions: the last three published, whatever they claim


def test_a_future_dated_session_does_not_win_the_default(tmp_path):
    reports, folder = tmp_path / "reports", tmp_path / "baselines"
    publish(reports, run_report(1, [case(scale=9.0)], year=2099))
    names = publish_runs(reports, (2, 3, 4))
    baselines.accept(reports_dir=reports, folder=folder)
    data = baseline.load(folder / "local-node.yaml")
    assert [s["name"] for s in data["sessions"]] == names


def test_the_publication_order_survives_a_chmod_and_a_copy(tmp_path):
    reports, folder = tmp_path / "reports", tmp_path / "baselines"
    names = publish_runs(reports, (2, 3, 4))
    first = publish(reports, run_report(1, [case(scale=9.0)]))   # published last
    os.chmod(reports / names[0], 0o750)          # the oldest's ctime is now the newest
    baselines.accept(reports_dir=reports, folder=folder)
    data = baseline.load(folder / "local-node.yaml")
    assert [s["name"] for s in data["sessions"]] == names[1:] + [first]
    copied = tmp_path / "copied"
    copied.mkdir()
    for name in reversed(names + [first]):       # copied newest first: ctimes reversed
        shutil.copytree(reports / name, copied / name)
    from netbench.report.sessions import published_folders
    assert [f.name for f in published_folders(copied)] == names + [first]


# 9. a size of the baseline the run never sent


def test_a_size_the_run_never_sent_is_missing_not_nan():
    rule_bound = Bound("upper", 2.0)
    sent = judge([Replicate(results_record_estimate(1.0))] * 3, Reference(rule_bound),
                 knobs.load())
    never = judge([], Reference(rule_bound), knobs.load())   # no launch gave the figure
    sizes = {baseline.variable(1): sent, baseline.variable(2): sent,
             baseline.variable(4096): never}
    bounds = {var: rule_bound for var in sizes}
    combined, judged = baseline.combine(sizes, bounds, "local-node.yaml", 2)
    assert math.isfinite(combined.value) and combined.value == 0.5
    assert combined.verdict == PASS
    assert combined.numbers["missing"] == [4096.0]
    assert [s["bytes"] for s in judged] == [1.0, 2.0]
    json.dumps(combined.to_json(), allow_nan=False)
    nothing, _ = baseline.combine({baseline.variable(4096): never},
                                  {baseline.variable(4096): rule_bound}, "local-node.yaml", 2)
    assert nothing.verdict == INCONCLUSIVE and math.isfinite(nothing.value)
    assert isinstance(nothing, Decision)


def results_record_estimate(value):
    return Estimate(value, value * 0.99, value * 1.01)


# 10. one line, not a traceback


def test_a_launch_row_without_its_size_is_one_line(tmp_path):
    reports, folder = tmp_path / "reports", tmp_path / "baselines"
    names = [publish(reports, run_report(d, [case(row={"usec": 3.0})])) for d in (1, 2, 3)]
    with pytest.raises(DataError) as err:
        baselines.accept(names, reports_dir=reports, folder=folder)
    assert str(err.value).startswith(
        f"{reports / names[0] / 'run-report.json'}: "
        f"runs[0].testcases[0].record.runs.mpi[0].rows[4].bytes: missing"), err.value


@pytest.mark.parametrize("folder", ["a-file", "a-file/below", "no/such/tree"])
def test_a_folder_that_cannot_be_written_is_one_line(tmp_path, capsys, folder):
    reports = tmp_path / "reports"
    (tmp_path / "a-file").write_text("not a folder\n")
    names = publish_runs(reports, (1, 2, 3))
    rc, out, err = accept_cli(*names, "--reports-dir", reports, "--folder", tmp_path / folder,
                              capsys=capsys)
    assert rc == 2 and len(err.splitlines()) == 1 and "cannot write the baseline" in err, err
    assert (tmp_path / "a-file").read_text() == "not a folder\n"
    assert not (tmp_path / "no").exists()


def test_a_written_baseline_reads_back_as_built(tmp_path):
    _, folder, names = accepted_folder(tmp_path)
    text = (folder / "local-node.yaml").read_text()
    assert text.startswith("# netbench baseline")
    data = yaml.safe_load(text)
    assert [s["name"] for s in data["sessions"]] == names
    assert data["cases"][0]["runs"] == 3 and len(data["cases"][0]["sizes"]) == len(SIZES)


# 11. written fast, read back as built


@pytest.mark.parametrize("name", ["PingPong %variant=a", "c\n  sizes: []\n", "x: y", "'q'",
                                  "- sizes: []"])
def test_the_fast_yaml_reads_back_as_pyyaml_would(name):
    sizes = [{"bytes": 1, "centre": 1e-05, "low": 1e-05, "high": 2.5, "upper": 1.75e300},
             {"bytes": 1048576.0, "centre": 3.0, "low": 2, "high": 1e16, "upper": 1e16}]
    built = {"version": 1, "system": "a", "partition": "b", "accepted": "now",
             "min_band": 0.05, "sessions": [{"name": "s", "commit": None}],
             "cases": [{"case": name, "environ": "e", "column": "usec", "unit": "us",
                        "runs": 3, "sizes": sizes}] * 2}
    text = baseline.dumped(built)
    assert yaml.safe_load(text) == built
    plain = yaml.safe_dump(built, sort_keys=False, default_flow_style=None, width=100)
    assert yaml.safe_load(plain) == yaml.safe_load(text)


@pytest.mark.parametrize("text", [b"{not json", b"\xff\xfe\x00", b"[" * 100000, b"[]",
                                  b'{"session_info": {}, "runs": []}'])
def test_a_run_report_that_is_not_one_is_one_line(tmp_path, capsys, text):
    (tmp_path / "bad.json").write_bytes(text)
    rc, out, err = accept_cli(tmp_path / "bad.json", "--folder", tmp_path / "b", capsys=capsys)
    assert rc == 2 and err.startswith(f"netbench: {tmp_path / 'bad.json'}: "), err
    assert len(err.splitlines()) == 1 and not (tmp_path / "b").exists()


def test_a_broken_published_session_is_skipped_and_said(tmp_path, capsys):
    reports, folder = tmp_path / "reports", tmp_path / "baselines"
    names = publish_runs(reports, (1, 2, 3, 4))
    (reports / names[2] / "run-report.json").write_text("{broken")
    rc, out, err = accept_cli("--reports-dir", reports, "--folder", folder, capsys=capsys)
    assert rc == 0, err
    first, second = out.splitlines()
    assert first.startswith(f"netbench baseline: session {names[2]} skipped: "
                            f"{reports / names[2] / 'run-report.json'}: not a run report")
    assert second.startswith(f"netbench baseline: local:node: accepted 1 case(s) from 3 runs "
                             f"({names[0]}, {names[1]}, {names[3]})"), out
