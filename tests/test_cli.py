"""The command line introduces itself: `netbench --help` says what netbench
does and how to run the checks, `--version` names netbench, ReFrame and
the MPIs found, every subcommand spells a shared flag the same way (old
spellings still parse, unshown), the exit codes mean the same in every
command, and docs/reference/cli.md is what the parser says."""

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from netbench import __version__, cli, exitcodes, paths
from netbench.probe import discovery
from netbench.report import verdict
from netbench.tools import clidoc

NETBENCH = [sys.executable, "-m", "netbench.cli"]
#: a wide terminal: argparse wraps at COLUMNS, and a wrapped option line
#: would split a flag from its metavar
WIDE = {**os.environ, "COLUMNS": "200"}

#: the subcommands that write a folder: each spells it -o/--output
WRITE_A_FOLDER = {"report", "compare", "publish", "tune", "baseline accept"}
#: where a cluster is named: --name
NAME_A_CLUSTER = {"vcluster up", "vcluster down", "vcluster status", "vcluster mtu",
                  "vcluster fault"}
#: where a command prints a machine-readable result: --json
PRINT_JSON = {"discover", "vcluster status"}
#: spellings the shared flags had before: they still parse, and no help shows them
OLD_SPELLINGS = ("--reports-dir", "--folder")


def netbench(*args, timeout=60):
    return subprocess.run(NETBENCH + list(args), capture_output=True, text=True, env=WIDE,
                          cwd=paths.REPO, timeout=timeout)


def subcommands_in(help_text):
    """The subcommands a help text lists: argparse's `{a,b,c}` choices."""
    found = re.search(r"\{([\w,-]+)\} \.\.\.", help_text)
    return found.group(1).split(",") if found else []


def every_help():
    """{"vcluster up": its --help text, ...} for every subcommand, read from
    the command's own --help, level by level."""
    helps, todo = {}, [[]]
    while todo:
        words = todo.pop()
        proc = netbench(*words, "--help")
        assert proc.returncode == 0, proc.stderr
        if words:
            helps[" ".join(words)] = proc.stdout
        todo += [words + [name] for name in subcommands_in(proc.stdout.split("\n\n")[0])]
    return helps


def options_of(help_text):
    """{option string: the help line} of a help text's options."""
    options = {}
    for line in help_text.splitlines():
        listed = re.match(r"^  (-[^ ].*?)(?:  |$)", line)
        if listed:
            for option in re.findall(r"(?:^|, )(--?[\w-]+)", listed.group(1)):
                options[option] = line
    return options


@pytest.fixture(scope="module")
def helps():
    return every_help()


def test_the_help_says_what_netbench_does_and_how_to_run_the_checks():
    proc = netbench("--help")
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert "interconnect" in text and "reports/" in text
    assert "make run" in text
    assert "reframe -C reframe_checks/settings.py -c reframe_checks -r" in text
    assert "The `netbench` command." not in text
    # the exit codes, each with its meaning
    for code in exitcodes.CODES:
        assert re.search(rf"^\s+{code.value}\s+\w", text, re.M), (code, text)


def test_every_subcommand_is_listed_and_helps(helps):
    assert {"discover", "references", "report", "compare", "publish", "vcluster",
            "baseline", "tune", "spack-check"} <= set(helps)
    assert WRITE_A_FOLDER | NAME_A_CLUSTER | PRINT_JSON <= set(helps)


def test_an_output_folder_is_spelled_o_output_everywhere(helps):
    for command in WRITE_A_FOLDER:
        options = options_of(helps[command])
        assert "-o" in options and "--output" in options, (command, helps[command])
        assert options["-o"] == options["--output"], command     # one option, two forms
    for command, text in helps.items():
        shown = options_of(text)
        for old in OLD_SPELLINGS:
            assert old not in shown and old not in text, (command, old)
        if command not in WRITE_A_FOLDER:
            assert "--output" not in shown, command


def test_json_and_name_are_the_only_spellings(helps):
    for command, text in helps.items():
        shown = options_of(text)
        machine = {o for o in shown if re.search(r"json|format", o, re.I)}
        assert machine == ({"--json"} if command in PRINT_JSON else set()), (command, machine)
        named = {o for o in shown if re.search(r"name|cluster", o, re.I)}
        assert named == ({"--name"} if command in NAME_A_CLUSTER else set()), (command, named)


@pytest.mark.parametrize("argv,dest,value", [
    (["publish", "r.json", "--reports-dir", "X"], "reports_dir", "X"),
    (["tune", "--profile", "p", "--reports-dir", "X"], "reports_dir", "X"),
    (["baseline", "accept", "--folder", "X"], "folder", "X"),
    (["baseline", "show", "--folder", "X"], "folder", "X"),
    (["baseline", "accept", "--reports-dir", "X"], "reports_dir", "X"),
])
def test_the_old_spellings_still_parse(argv, dest, value):
    """Scripts written against the old spellings keep working."""
    assert getattr(cli.build_parser().parse_args(argv), dest) == value


def test_version_names_netbench_reframe_and_the_mpis_found():
    families = discovery.load_families()
    started = time.monotonic()
    proc = netbench("--version")
    took = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"netbench {__version__}"), lines
    reframe = importlib.metadata.version("reframe-hpc")
    assert any(line.startswith(f"ReFrame {reframe}") for line in lines), lines
    mpis = discovery.discover(families=families)
    assert mpis, "no MPI discovered: run `make setup`"
    for mpi in mpis:
        assert any(mpi.name in line and mpi.version in line and mpi.family in line
                   for line in lines), (mpi, lines)
    # discovery asks each launcher its version: no compiling, a few seconds
    # at most on a loaded machine
    assert took < 10, took


def test_version_says_when_no_mpi_is_found():
    assert "MPI: none found" in cli.version_text(mpis=[])


def references_folder_with_a_bad_field(tmp_path):
    folder = tmp_path / "references"
    shutil.copytree(paths.REFERENCES, folder, ignore=shutil.ignore_patterns("baselines"))
    seed = folder / "seed000_e325_netpipe.yaml"
    text = seed.read_text()
    assert "latency_us: 3.98}" in text
    seed.write_text(text.replace("latency_us: 3.98}", "latency_us: fast}", 1))
    return folder


def spack_yaml_with_a_bad_field(tmp_path):
    text = (paths.REPO / "spack.yaml").read_text()
    assert "- iperf3@3.17.1" in text
    (tmp_path / "spack.yaml").write_text(text.replace("- iperf3@3.17.1", "- iperf@3.17.1"))
    os.symlink(paths.REPO / "spack_repo", tmp_path / "spack_repo")
    return tmp_path / "spack.yaml"


@pytest.mark.parametrize("kind", ["a field's value", "broken YAML", "a missing file"])
def test_both_validators_exit_2_on_invalid_input(tmp_path, kind):
    """`references` and `spack-check` give the same kind of problem the
    same code: invalid input, 2."""
    (tmp_path / "r").mkdir()
    (tmp_path / "s").mkdir()
    if kind == "a field's value":
        refs, spack = (references_folder_with_a_bad_field(tmp_path / "r"),
                       spack_yaml_with_a_bad_field(tmp_path / "s"))
    elif kind == "broken YAML":
        refs = references_folder_with_a_bad_field(tmp_path / "r")
        (refs / "thresholds.yaml").write_text("classes: [\n")
        spack = tmp_path / "s" / "spack.yaml"
        spack.write_text("spack: [\n")
    else:
        refs, spack = tmp_path / "r" / "none", tmp_path / "s" / "none.yaml"
    for argv in (["references", str(refs)], ["spack-check", str(spack)]):
        proc = netbench(*argv)
        assert proc.returncode == exitcodes.INVALID_INPUT == 2, (argv, proc.stderr)
        assert proc.stderr.strip(), argv


def test_a_usage_error_is_invalid_input_too():
    proc = netbench("report")           # -o/--output and a run report missing
    assert proc.returncode == exitcodes.INVALID_INPUT


def test_the_session_verdicts_use_the_one_table():
    assert (verdict.EXIT_PASS, verdict.EXIT_LOSS, verdict.EXIT_NOT_RUN,
            verdict.EXIT_INCONCLUSIVE) == (exitcodes.OK, exitcodes.LOSS, exitcodes.NOT_RUN,
                                           exitcodes.INCONCLUSIVE)
    assert len({c.value for c in exitcodes.CODES}) == len(exitcodes.CODES)


def test_the_committed_cli_reference_is_the_generated_one():
    committed = (paths.REPO / clidoc.OUTPUT).read_text()
    assert committed == clidoc.markdown(), \
        f"{clidoc.OUTPUT} is stale: run `python -m netbench.tools.clidoc`"


def test_the_cli_reference_names_every_subcommand_flag_and_exit_code(helps):
    text = clidoc.markdown()
    for command, help_text in helps.items():
        assert f"## netbench {command}\n" in text, command
        for option in set(options_of(help_text)) - {"-h", "--help"}:
            assert f"`{option}" in text or f", {option}" in text, (command, option)
        for old in OLD_SPELLINGS:
            assert old not in text
    for code in exitcodes.CODES:
        assert f"| {code.value} |" in text
