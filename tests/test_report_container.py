"""The report's container section (issue #18): per transport, each MPI's
sweep on the host (solid) and in the image (dashed) side by side, latency
and bandwidth, and under it the parity each case was judged by.  Built
from synthetic ContainerParity cases, their records made the way the check
makes them (benchmark.series from the benchmark's output)."""

import html5lib
import matplotlib.colors
import pytest

from netbench import report
from netbench.report import parity, plots, sections
from netbench.results import benchmark
from netbench.results import record as results_record
from helpers.reports import minimal_report, session_from

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside

SIZES = [1, 4, 64, 1024, 65536, 1048576]


def output(latency, bandwidth_scale=1.0):
    """The benchmark's output: a ping-pong table with usec, Mbps, MBps (and
    a column no section draws)."""
    lines = ["# netbench pingpong", "# columns: bytes usec samples MBps Mbps"]
    for n in SIZES:
        usec = latency + n / (2000.0 * bandwidth_scale)
        lines.append(f"{n} {usec:.4f} 100 {n / usec:.4f} {8 * n / usec:.4f}")
    return "\n".join(lines + [f"@ latency_usec {latency}"]) + "\n"


def parity_record(env, transport, family, host_latency, container_latency,
                  container_bandwidth=1.0):
    """The record a ContainerParity case writes: section `container`, label
    `<environment> <transport>`, series native and container, references
    latency_slowdown and bw_slowdown (unit x, no citation)."""
    columns = ("usec", "Mbps", "MBps")
    series = [benchmark.series("native", output(host_latency), columns),
              benchmark.series("container", output(container_latency, container_bandwidth),
                               columns)]
    rule = {var: results_record.reference(1.0, None, 0.05, "x")
            for var in ("latency_slowdown", "bw_slowdown")}
    return results_record.make(
        "container", f"{env} {transport}", series,
        {"mpi_family": family, "mpi_version": "5.0.2", "mpi_source": "wheel",
         "transport": transport, "placement": "intranode", "ranks": 2, "ranks_per_node": 2,
         "partition": "local-container:node", "interconnect": "intranode"}, rule)


def parity_case(env, transport, family, latency_slowdown, bw_slowdown, n, reason=None):
    host = 0.5
    rec = parity_record(env, transport, family, host, host * latency_slowdown,
                        1 / bw_slowdown)
    perf = {} if reason else {
        "local-container:node:latency_slowdown": [latency_slowdown, 1.0, None, 0.05, "x",
                                                  "pass" if latency_slowdown <= 1.05
                                                  else "fail"],
        "local-container:node:bw_slowdown": [bw_slowdown, 1.0, None, 0.05, "x",
                                             "pass" if bw_slowdown <= 1.05 else "fail"],
        "local-container:node:latency": [host * latency_slowdown, 0, None, None, "us", "pass"]}
    return {"name": f"ContainerParity_{n}", "unique_name": f"ContainerParity_{n}",
            "display_name": f"ContainerParity %transport={transport} /0000000{n}",
            "system": "local-container", "partition": "node", "environ": env,
            "result": "fail" if reason else "pass", "fail_reason": reason,
            "perfvalues": perf, "record": rec}


def container_report(cases):
    data = minimal_report()
    data["runs"][0]["testcases"] += cases
    return data


#: two MPIs over shm, one over tcp; Open MPI's tcp run failed its sanity
CASES = [("mpich", "shm", "mpich", 1.01, 0.99),
         ("openmpi", "shm", "openmpi", 1.03, 1.02),
         ("mpich", "tcp", "mpich", 1.00, 1.01)]


@pytest.fixture
def session(tmp_path):
    cases = [parity_case(*c, n) for n, c in enumerate(CASES)]
    cases.append(parity_case("openmpi", "tcp", "openmpi", 1.0, 1.0, 9,
                             reason="sanity error: container slower than the host by more "
                                    "than 5%: latency 1.31x the host's\nsecond line"))
    return session_from(container_report(cases), tmp_path)


def test_a_container_record_is_in_the_contract():
    assert "container" in results_record.SECTIONS
    rec = parity_record("mpich", "shm", "mpich", 0.5, 0.6)
    assert results_record.check(rec, "<test>") is rec
    assert [s["name"] for s in rec["series"]] == list(results_record.CONTAINER_SERIES)
    assert {"usec", "Mbps"} <= set(results_record.y_columns(rec["series"][0]))


def test_one_figure_per_transport_with_both_sides_of_each_mpi(session):
    records = [(i, report.case_record(tc)) for i, tc in enumerate(session.testcases)]
    curves = sections.container_curves(records)
    assert list(curves) == ["shm", "tcp"]
    fig = plots.container_figure(curves["shm"], "Container vs bare metal over shm")
    latency, bandwidth = fig.axes
    assert (latency.get_yscale(), bandwidth.get_yscale()) == ("log", "log")
    assert latency.get_xscale() == "log" and "us" in latency.get_ylabel()
    assert "Mbit/s" in bandwidth.get_ylabel()
    assert [t.get_text() for t in latency.get_xticklabels()][-1] == "1 MiB"
    for ax, column in ((latency, "usec"), (bandwidth, "Mbps")):
        lines = {line.get_label(): line for line in ax.get_lines()}
        assert set(lines) == {"mpich native", "mpich container", "openmpi native",
                              "openmpi container"}
        for mpi in ("mpich", "openmpi"):
            native, inside = lines[f"{mpi} native"], lines[f"{mpi} container"]
            # one colour per MPI: the host solid, the image dashed
            assert native.get_linestyle() == "-" and inside.get_linestyle() == "--"
            assert matplotlib.colors.same_color(native.get_color(), inside.get_color())
            assert list(native.get_xdata()) == SIZES
        assert not matplotlib.colors.same_color(lines["mpich native"].get_color(),
                                                lines["openmpi native"].get_color())
        # the data drawn is the record's: the container's sweep, not the host's
        rec = records[2][1]         # openmpi shm
        inside = results_record.series_named(rec, "container")
        assert list(lines["openmpi container"].get_ydata()) == [r[column]
                                                                for r in inside["rows"]]
        assert ax.get_legend() is not None
        # the legend below the data, as the small multiples have it
        assert ax.get_legend().get_bbox_to_anchor().y1 < ax.bbox.y0
    plots.pyplot().close(fig)


def test_the_page_shows_the_figures_and_the_judged_parity(session):
    page = report.render_report([session])
    html5lib.HTMLParser(strict=True).parse(page)
    section = page[page.index('<section id="container">'):]
    section = section[:section.index("</section>")]
    assert "Container vs bare metal" in section
    figures = section.split('<figure class="container"')[1:]
    assert [f.split('data-transport="')[1].split('"')[0] for f in figures] == ["shm", "tcp"]
    shm, tcp = figures
    assert shm.count("<svg") == 1 and tcp.count("<svg") == 1
    for label in ("mpich native", "mpich container", "openmpi native", "openmpi container"):
        assert label in shm
    # a failed case's curves are drawn too: they are what shows why it failed
    assert "mpich native" in tcp and "openmpi container" in tcp
    caption = shm.split("<figcaption>")[1].split("</figcaption>")[0]
    assert caption.split("<br>") == [
        "mpich: latency 1.01x the host&#39;s (at most 1.05x: pass); 1 MiB transfer time "
        "0.99x the host&#39;s (at most 1.05x: pass)",
        "openmpi: latency 1.03x the host&#39;s (at most 1.05x: pass); 1 MiB transfer time "
        "1.02x the host&#39;s (at most 1.05x: pass)"]
    # a case that failed its sanity has no figures: its reason, in one line
    tcp_caption = tcp.split("<figcaption>")[1].split("</figcaption>")[0]
    assert "openmpi: no parity figures (fail: sanity error: container slower" in tcp_caption
    assert "second line" not in tcp_caption
    # the container cases are no ping-pong headline rows, and still in the table
    table = page[page.index('id="cases"'):]
    assert table.count("ContainerParity %transport=") == 3 * 3 + 1   # a row per figure
    assert table.count("<td>latency_slowdown</td>") == 3
    headline = page[page.index('id="headline-1"'):page.index("</table>",
                                                           page.index('id="headline-1"'))]
    assert "ContainerParity" not in headline


def test_a_session_without_container_records_has_no_container_section(tmp_path):
    s = session_from(minimal_report(), tmp_path)
    assert parity.container_sections([s]) == []
    page = report.render_report([s])
    assert 'id="container"' not in page and "Container vs bare metal" not in page


def test_two_sessions_overlay_their_container_curves(tmp_path):
    a = session_from(container_report([parity_case(*CASES[0], 0)]), tmp_path, "a.json")
    b = session_from(container_report([parity_case(*CASES[0], 0)]), tmp_path, "b.json")
    (shm,) = parity.container_sections([a, b])
    assert len(shm["captions"]) == 2
    assert all(f"[{s.name}] mpich native" in shm["svg"] for s in (a, b))
