"""The choice of cases before ReFrame instantiates them (netbench/selection.py):
the focused default set unless the command line selects, and cases that
could only skip dropped with their reason counted."""

from collections import Counter, namedtuple

import pytest

from netbench import selection

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside

Env = namedtuple("Env", "name transports")
Part = namedtuple("Part", "name nodes")


@pytest.mark.parametrize("argv, full", [
    (["-c", "reframe_checks", "-r"], False),
    (["-c", "reframe_checks", "-p", "^mpich$", "-r"], False),
    (["-c", "reframe_checks", "-t", "default", "-r"], False),
    (["-c", "reframe_checks", "-t", "full", "-r"], True),
    (["-c", "reframe_checks", "--tag=seeds", "-r"], True),
    (["-c", "reframe_checks", "-tseeds", "-r"], True),
    (["-c", "reframe_checks", "-n", "^PingPong", "-r"], True),
    (["-c", "reframe_checks", "-E", "ranks > 2", "-r"], True),
    # options that take values are not mistaken for selections
    (["-S", "thresholds_folder=/x", "--system", "vcluster-a", "-r"], False),
])
def test_full_matrix_only_when_the_command_line_selects(argv, full):
    assert selection.full_matrix_requested(argv) is full


def test_plan_keeps_the_runnable_product_and_counts_each_reason():
    envs = [Env("mpich", {"shm", "ofi-tcp"}), Env("openmpi", {"shm", "tcp"})]
    candidates = {Part("one", 1): envs, Part("pair", 2): envs}

    def partition_problem(part):
        return "internode placement needs a partition of 2+ nodes" if part.nodes < 2 else None

    def environment_problem(env):
        if "tcp" not in env.transports:
            return ("transport not offered by the MPI", f"{env.name}: tcp")
        return None

    parts, names, dropped = selection.plan(candidates, partition_problem, environment_problem)
    assert [p.name for p in parts] == ["pair"]
    assert names == ["openmpi"]
    assert dropped == Counter({("internode placement needs a partition of 2+ nodes", None): 2,
                               ("transport not offered by the MPI", "mpich: tcp"): 1})


def test_out_of_scope_cases_are_neither_kept_nor_counted():
    envs = [Env("mpich", {"shm"}), Env("openmpi", {"shm"})]
    parts, names, dropped = selection.plan({Part("one", 1): envs}, lambda p: None,
                                           lambda e: None, in_scope=lambda e: e.name == "mpich")
    assert names == ["mpich"] and not dropped


def test_a_partition_without_runnable_environments_is_not_kept():
    parts, names, dropped = selection.plan({Part("one", 1): [Env("mpich", set())]},
                                           lambda p: None, lambda e: "no transport")
    assert parts == [] and names == [] and dropped[("no transport", None)] == 1


def test_one_line_per_reason_with_count_and_details(monkeypatch):
    monkeypatch.setattr(selection, "NOT_GENERATED", Counter())
    monkeypatch.setattr(selection, "NOT_GENERATED_DETAILS", {})
    argv = ["-r"]
    selection.record_not_generated(Counter({("transport not offered by the MPI", "mpich: tcp"): 2}),
                                   {"full"}, argv)
    selection.record_not_generated(Counter({("transport not offered by the MPI",
                                             "system-mpich: tcp"): 3,
                                            ("no OSU binaries in any view", None): 1}),
                                   {"full"}, argv)
    assert selection.not_generated_lines() == [
        "5 cases not generated: transport not offered by the MPI "
        "(mpich: tcp; system-mpich: tcp)",
        "1 case not generated: no OSU binaries in any view"]


def test_drops_of_checks_the_tags_leave_out_are_not_reported(monkeypatch):
    monkeypatch.setattr(selection, "NOT_GENERATED", Counter())
    selection.record_not_generated(Counter({("x", None): 4}), {"full", "osu"}, ["-t", "seeds"])
    assert selection.not_generated_lines() == []


def test_drops_of_checks_the_names_leave_out_are_not_reported(monkeypatch):
    monkeypatch.setattr(selection, "NOT_GENERATED", Counter())
    argv = ["-n", "^PingPong%variant=blocking"]
    selection.record_not_generated(Counter({("osu", None): 4}), {"full"}, argv,
                                   display_name="OsuPt2Pt %benchmark=osu_bw")
    selection.record_not_generated(Counter({("tcp", None): 1}), {"full"}, argv,
                                   display_name="PingPong %variant=blocking %transport=tcp")
    assert selection.not_generated_lines() == ["1 case not generated: tcp"]
