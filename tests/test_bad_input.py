"""Bad input is refused where it is read, with one line naming the file and
the key and exit code 2, never a traceback and never a value ReFrame
rejects later (issue #14, items 10, 11 and the spack-check part of 13);
the thresholds judge every interconnect class a partition can declare
(item 6: the veth and emulated classes, line-rate-relative thresholds,
missing_thresholds, links.yaml against thresholds.yaml)."""

import shutil

import pytest
import yaml

from netbench import cli, paths, references
from netbench.datafiles import DataError
from netbench.rfm import sites

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside

VIEWS = ["mpich-ofi", "mpich-tcp", "mpich-ucx", "openmpi-ofi", "openmpi-ucx"]


def one_line(capsys, rc, path, key=None, expected_rc=2):
    """The CLI's stderr is one line `netbench: <file>: <key>: ...`."""
    err = capsys.readouterr().err
    assert rc == expected_rc, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    prefix = f"netbench: {path}: {key}: " if key else f"netbench: {path}: "
    assert lines[0].startswith(prefix), err
    return lines[0]


# ---- references ---------------------------------------------------------------------

def references_copy(tmp_path, filename, old=None, new=None, raw=None):
    folder = tmp_path / "references"
    shutil.copytree(paths.REFERENCES, folder)
    path = folder / filename
    if raw is not None:
        path.write_bytes(raw)
    else:
        text = path.read_text()
        assert old in text, old
        path.write_text(text.replace(old, new, 1))
    return folder, path


@pytest.mark.parametrize("filename,old,new,raw,key,problem", [
    # item 10: undecodable bytes (already refused by load_yaml since 5f2133f)
    ("seed001_myrinet2000.yaml", None, None,
     (paths.REFERENCES / "seed001_myrinet2000.yaml").read_bytes() + b"# caf\xe9\n",
     None, "not UTF-8 text"),
    # item 10: wrong types
    ("seed009_bad.yaml", None, None, b"source: {file: x.txt}\ntables: [table1]\n",
     "tables", "expected a mapping or null, got list ['table1']"),
    ("thresholds.yaml", "upper: 4.0, unit: us}", "upper: 4.0, unit: us, scale: abc}", None,
     "classes.intranode.pingpong.shm.latency.scale", "expected a finite number, got str 'abc'"),
    # item 11: bounds ReFrame refuses, a NaN figure or bound
    ("thresholds.yaml", "lower: 0.0, upper: null", "lower: 0.5, upper: null", None,
     "classes.intranode.pingpong.shm.peak_bw.lower", "0.5: expected a fraction from -1 to 0"),
    ("thresholds.yaml", "upper: 4.0", "upper: -0.5", None,
     "classes.intranode.pingpong.shm.latency.upper", "-0.5: expected a fraction from 0"),
    ("thresholds.yaml", "upper: 4.0", "upper: .nan", None,
     "classes.intranode.pingpong.shm.latency.upper",
     "expected a finite number or null, got float nan"),
    ("seed001_myrinet2000.yaml", "value: 147,", "value: .nan,", None,
     "facts[0].value", "expected a finite number or a list, got float nan"),
])
def test_bad_references_give_one_line(tmp_path, capsys, filename, old, new, raw, key,
                                      problem):
    folder, path = references_copy(tmp_path, filename, old, new, raw)
    line = one_line(capsys, cli.main(["references", str(folder)]), path, key)
    assert problem in line


# ---- site files ---------------------------------------------------------------------

def site_file(tmp_path, change=None, raw=None):
    path = tmp_path / "mysite.yaml"
    if raw is not None:
        path.write_bytes(raw)
        return path
    data = yaml.safe_load((sites.SITES / "example-slurm.yaml").read_text())
    data["name"] = "mysite"
    change(data)
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("change,raw,key,problem", [
    (lambda d: d["partitions"][0].update(max_jobs="four"), None,
     "partitions[0].max_jobs", "expected an integer, got str 'four'"),
    (None, (sites.SITES / "example-slurm.yaml").read_bytes().replace(b"InfiniBand",
                                                                     b"Infini\xa0Band"),
     None, "not UTF-8 text"),
    (lambda d: d["partitions"][0].update(access="--exclusive"), None,
     "partitions[0].access", "expected a list, got str '--exclusive'"),
    (lambda d: d["partitions"][1].update(time_limit="forever"), None,
     "partitions[1].time_limit", "not a ReFrame duration"),
    (lambda d: d["partitions"][1].update(time_limit="10 min"), None,
     "partitions[1].time_limit", "e.g. 30m, 1h30m, 90s, 1d"),
    (lambda d: d["partitions"][1].update(name="ib"), None,
     "partitions[1].name", "'ib' is already the name of partitions[0]"),
    # extras the code reads are typed: a path a check reads stays where it belongs
    (lambda d: d["partitions"][0]["extras"].update(link_counters=["/etc"]), None,
     "partitions[0].extras.link_counters[0]", "a /sys/class/net/<interface>/statistics"),
    (lambda d: d["partitions"][0]["extras"].update(set_mtu="ip link set mtu"), None,
     "partitions[0].extras.set_mtu", "expected a list, got str"),
    (lambda d: d["partitions"][0]["extras"].update(sweep_rounds_contend="yes"), None,
     "partitions[0].extras.sweep_rounds_contend", "expected true or false, got str"),
])
def test_bad_site_files_give_one_line(tmp_path, change, raw, key, problem):
    path = site_file(tmp_path, change, raw)
    with pytest.raises(DataError) as err:
        sites.load_site(path, VIEWS)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: {key}: " if key else f"{path}: "), message
    assert problem in message, message


@pytest.mark.parametrize("time_limit", ["30m", "1h30m", "90s", "1d", "1d2h", "600", 600])
def test_reframe_durations_are_accepted(tmp_path, time_limit):
    path = site_file(tmp_path, lambda d: d["partitions"][0].update(time_limit=time_limit))
    part = sites.load_site(path, VIEWS)["partitions"][0]
    assert part["time_limit"] == str(time_limit)
    assert part["access"] == ["--partition=compute", "--exclusive"]


# ---- spack-check --------------------------------------------------------------------

def spack_env(tmp_path, change=None, text=None, raw=None):
    """The shipped spack.yaml in tmp_path (beside the local repository),
    changed by `change(env)`, or replaced by `text`/`raw`."""
    path = tmp_path / "spack.yaml"
    shipped = (paths.REPO / "spack.yaml").read_text()
    if raw is not None:
        path.write_bytes(raw)
    elif text is not None:
        path.write_text(text(shipped))
    else:
        data = yaml.safe_load(shipped)
        change(data["spack"])
        path.write_text(yaml.safe_dump(data, sort_keys=False))
    (tmp_path / "spack_repo").symlink_to(paths.REPO / "spack_repo")
    (tmp_path / "spack").symlink_to(paths.REPO / "spack")      # the fabric files
    return path


def replace(old, new):
    def edit(text):
        assert old in text, old
        return text.replace(old, new, 1)
    return edit


@pytest.mark.parametrize("change,key,problem", [
    (lambda env: env.update(specs=5), "spack.specs", "expected a list or null, got int 5"),
    (lambda env: env["specs"][1].update(matrix=5), "spack.specs[1].matrix",
     "expected a list, got int 5"),
    (lambda env: env.update(repos=7), "spack.repos", "expected a mapping or a list or null"),
    (lambda env: env.update(develop=[1]), "spack.develop",
     "expected a mapping or null, got list [1]"),
    (lambda env: env.update(modules=3), "spack.modules", "expected a mapping or null, got int 3"),
    (lambda env: env["include"].append({"when": "True"}), "spack.include[4].path", "missing"),
    (lambda env: env["include"][1].update(path="spack/fabrics/cassini.yaml"),
     "spack.include[1].path", "spack/fabrics/cassini.yaml: no such file"),
])
def test_bad_spack_environments_give_one_line(tmp_path, capsys, change, key, problem):
    path = spack_env(tmp_path, change)
    line = one_line(capsys, cli.main(["spack-check", str(path)]), path, key)
    assert problem in line


def test_a_binary_spack_yaml_gives_one_line(tmp_path, capsys):
    path = spack_env(tmp_path, raw=b"\x7fELF\x02\x01\x01\x00\xff\xfe" * 8)
    line = one_line(capsys, cli.main(["spack-check", str(path)]), path)
    assert "not UTF-8 text" in line


@pytest.mark.parametrize("content,key,problem", [
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xff", None, "not UTF-8 text"),
    (b'[{"packages": {}}]', None, "expected a mapping at the top level, got list"),
    (b'{"commit": "abc", "packages": {"mpich": {"versions": "5.0.1"}}}',
     "packages.mpich.versions", "expected a list, got str '5.0.1'"),
])
def test_bad_facts_give_one_line(tmp_path, capsys, content, key, problem):
    facts = tmp_path / "facts.json"
    facts.write_bytes(content)
    rc = cli.main(["spack-check", str(paths.REPO / "spack.yaml"), "--facts", str(facts)])
    assert problem in one_line(capsys, rc, facts, key)


def test_an_undefined_definition_names_the_file_checked(tmp_path, capsys):
    path = spack_env(tmp_path, text=replace("  - $mpis\n", "  - $mpi_builds\n"))
    line = one_line(capsys, cli.main(["spack-check", str(path)]), path, "spack.specs[0]")
    assert "$mpi_builds: no definition named 'mpi_builds'" in line


@pytest.mark.parametrize("variants,problem", [
    ("netmod=ucx +slurm +slurm ~slurm", "variant slurm given twice: +slurm and +slurm (mpich)"),
    ("netmod=ucx +slurm ~slurm", "variant slurm contradicts itself: +slurm and ~slurm (mpich)"),
    ("netmod=ofi +slurm netmod=tcp", "variant netmod contradicts itself: netmod=ofi and "
                                     "netmod=tcp (mpich)"),
])
def test_a_variant_given_twice_names_the_spec(tmp_path, capsys, variants, problem):
    """Spack refuses the spec; the check reports it once, where it is
    written, not again in every spec built from it."""
    path = spack_env(tmp_path, text=replace('- ["mpich@5.0.1 device=ch4 netmod=ucx +slurm"]',
                                            f'- ["mpich@5.0.1 device=ch4 {variants}"]'))
    rc = cli.main(["spack-check", str(path)])
    lines = capsys.readouterr().err.strip().splitlines()
    assert rc == 2      # invalid input (netbench.exitcodes)
    assert lines[-1] == "netbench spack-check: 1 problem(s)", lines
    assert lines[0].startswith(f"{path}: spack.definitions[0].mpich_builds[1].matrix 'mpich@5.0.1 "
                               f"device=ch4 "), lines[0]
    assert lines[0].endswith(f": not a spec: {problem}"), lines[0]


# ---- thresholds for every class a partition can declare -------------------------------

def test_veth_is_held_to_seed000s_intranode_tcp_figures():
    for transport, row in (("tcp", "intranode.gige_tunable.mpi"),
                           ("raw", "intranode.gige_tunable.tcp")):
        kind = "tcp" if transport == "raw" else "pingpong"
        veth = references.thresholds_for("veth", kind, transport)
        intranode = references.thresholds_for("intranode", kind, transport)
        assert veth == intranode
        assert veth["latency"].figure.key == f"seed000_e325_netpipe#table1/{row}/latency_us"


def test_emulated_bandwidth_is_a_fraction_of_the_line_rate():
    net = references.thresholds_for("emulated", "pingpong", "ofi-tcp", line_rate_mbps=2500)
    assert net["peak_bw"].reference == pytest.approx((0.788 * 2500, 0.0, None, "Mbit/s"))
    assert net["latency"].reference == (17.53, None, 0.0, "us")     # not scaled
    raw = references.thresholds_for("emulated", "tcp", "raw", line_rate_mbps=100)
    assert raw["peak_bw"].reference[0] == pytest.approx(89.7)
    # no line rate: no bandwidth reference, the latency still judged
    assert set(references.thresholds_for("emulated", "pingpong", "tcp")) == {"latency"}


def test_line_rate_scaling_combines_with_the_unit_scale(tmp_path):
    folder, _ = references_copy(
        tmp_path, "thresholds.yaml",
        "classes:\n", "classes:\n  slow:\n    pingpong:\n      network:\n"
        "        peak_bw: {ref: \"seed000_e325_netpipe#table1/internode.ethernet.tcp/"
        "max_bandwidth_mbps\", per_line_rate_mbps: 100, scale: 0.125, lower: -0.1, "
        "upper: null, unit: MB/s}\n")
    (th,) = references.thresholds_for("slow", "pingpong", "tcp", folder, 10).values()
    assert th.reference == pytest.approx((90 * 0.125 * 10 / 100, -0.1, None, "MB/s"))
    assert references.thresholds_for("slow", "pingpong", "tcp", folder) == {}


@pytest.mark.parametrize("interconnect,kind,transport,reason", [
    ("intranode", "pingpong", "shm", None),
    ("gige", "pingpong", "ucx-tcp", None),
    ("veth", "tcp", "raw", None),
    ("emulated", "pingpong", "tcp", None),
    ("gige", "collective", "tcp", None),            # no class documents it: informational
    ("myrinet", "pingpong", "verbs", None),
    ("hdr", "pingpong", "tcp", "interconnect class 'hdr' is not in "),
    ("", "pingpong", "tcp", "the partition declares no interconnect class"),
    ("gige", "pingpong", "shm", "interconnect class 'gige' has no pingpong thresholds for "
                                "transport shm in "),
    ("veth", "pingpong", "shm", "(documented for intranode)"),
])
def test_missing_thresholds_says_why_a_case_cannot_be_judged(interconnect, kind, transport,
                                                             reason):
    got = references.missing_thresholds(interconnect, kind, transport,
                                        folder=paths.REFERENCES)
    if reason is None:
        assert got is None
    else:
        assert reason in got and "\n" not in got and "thresholds.yaml" in got


def test_every_class_of_links_yaml_has_thresholds():
    classes = set(references.interconnect_classes())
    produced = references.link_classes()
    assert {"veth", "emulated", "gige", "fast-ethernet"} <= set(produced.values())
    assert set(produced.values()) <= classes


@pytest.mark.parametrize("lost,key", [("gige", "classes.gige"),
                                      ("veth", "unshaped_interconnect"),
                                      ("emulated", "other_rates_interconnect")])
def test_a_thresholds_file_that_lost_a_class_is_noticed(tmp_path, capsys, lost, key):
    folder = tmp_path / "references"
    shutil.copytree(paths.REFERENCES, folder)
    data = yaml.safe_load((folder / "thresholds.yaml").read_text())
    del data["classes"][lost]
    (folder / "thresholds.yaml").write_text(yaml.safe_dump(data))
    line = one_line(capsys, cli.main(["references", str(folder)]), references.LINKS_FILE, key)
    assert f"class {lost!r} has no thresholds in {folder / 'thresholds.yaml'}" in line


def test_a_links_class_without_thresholds_is_noticed(tmp_path):
    links = tmp_path / "links.yaml"
    data = yaml.safe_load(references.LINKS_FILE.read_text())
    data["classes"]["ten-gige"] = {"rate_mbps": 10000, "burst_bytes": 65536}
    links.write_text(yaml.safe_dump(data))
    with pytest.raises(DataError) as err:
        references.validate(paths.REFERENCES, links=links)
    assert str(err.value).startswith(f"{links}: classes.ten-gige: class 'ten-gige' has no "
                                     f"thresholds in ")


# ---- issue 54 item 5: every file netbench reads is bounded -----------------------

#: what netbench may take to refuse a hostile file, address space included
#: (a refusal that first reads /dev/zero needs gigabytes)
REFUSAL_MEMORY = 200 << 20


def limited(argv):
    """`argv` run with its address space capped at REFUSAL_MEMORY."""
    import resource
    import subprocess

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (REFUSAL_MEMORY, REFUSAL_MEMORY))
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=paths.REPO,
                          preexec_fn=cap)


def netbench(*args):
    import sys
    return [sys.executable, "-m", "netbench.cli", *args]


def fifty_mb_of_suspects(path):
    suspect = ('{"kind": "node", "names": ["n3"], "metric": "bw_Mbps@1048576", "value": 1, '
               '"fleet_median": 2, "reference": null, "direction": "both", "evidence": []}')
    count = (50 << 20) // (len(suspect) + 2)
    path.write_text('{"session": "S", "sweeps": [{"nodes": ["n1", "n2", "n3"], "suspects": ['
                    + ", ".join([suspect] * count) + "]}]}")
    return path


def test_hostile_files_are_refused_in_one_line_within_the_memory_cap(tmp_path):
    """`netbench drain` of /dev/zero read until the kernel ended it (24 GB);
    a 50 MB suspects file was parsed whole; the sweep's step between its
    passes built a topology's 10^9 names.  Each is refused in one line by
    the real command with its memory capped (how fast: make bench-report)."""
    suspects = fifty_mb_of_suspects(tmp_path / "suspects.json")
    topology = tmp_path / "topology.conf"
    topology.write_text("SwitchName=s1 Nodes=n[1-1000]x[1-1000]y[1-1000]\n")
    sweep = paths.REPO / "tests" / "data" / "sweep_confirm" / "slow-node" / "sweep.out"
    cases = [
        (netbench("drain", "--dry-run", "/dev/zero"),
         "netbench: /dev/zero: not a regular file (a character device)"),
        (netbench("drain", "--dry-run", str(suspects)),
         f"netbench: {suspects}: larger than 32 MiB (the most netbench reads of a suspects "
         f"file)"),
        ([netbench()[0], "-m", "netbench.fleet.remeasure", "--topology", str(topology),
          str(sweep)],
         f"netbench.fleet.remeasure: {topology}: line 1: hostlist "
         f"'n[1-1000]x[1-1000]y[1-1000]' names more than 1048576 hosts"),
    ]
    for argv, line in cases:
        proc = limited(argv)
        assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", line + "\n"), argv
