"""The checks' building blocks (netbench/checks/): the order their pipeline
hooks run in, which some of them depend on, and a check that forgets an
attribute every MPI run needs fails naming it."""

import json
import os
import subprocess
import sys

import pytest

from netbench import checks, paths
from netbench.rfm import session

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside

#: MpiRun's hooks per stage, in the order ReFrame runs them (see
#: netbench/checks/mpirun.py for why each comes where it does)
MPIRUN_HOOKS = {
    "post_init": ["take_category", "generate_possible_cases_only"],
    "post_setup": ["require_declared_attributes", "record_provenance", "select_transport",
                   "place_ranks", "require_matching_slurm_conf"],
    "pre_run": ["discover_line_rate", "count_link_traffic", "capture_node_state"],
    "pre_sanity": ["read_job_outcome", "count_link_traffic_after", "record_measurement"],
    "pre_performance": ["set_perf_variables", "set_references", "report_link_traffic"],
}


def hook_names(cls):
    return {stage: [fn.__name__ for fn in fns] for stage, fns in cls.pipeline_hooks().items()}


def test_mpirun_hooks_run_in_the_order_they_depend_on():
    assert hook_names(checks.MpiRun) == MPIRUN_HOOKS


def test_netbench_runs_add_their_hooks_after_mpiruns():
    hooks = hook_names(checks.PingPongBase)
    # take_category first (kind, section and mode follow from it), the
    # case generation always last
    assert hooks == {"post_init": ["take_category", "figures_of_the_main_run",
                                   "generate_possible_cases_only"],
                     "post_setup": MPIRUN_HOOKS["post_setup"] + ["largest_message_crosses_links"],
                     # the launches while undecided repeat the command set_command
                     # built; the host's load is printed after every command, the
                     # check's own later passes too (always_last)
                     "pre_run": MPIRUN_HOOKS["pre_run"] + ["set_command",
                                                           "launch_again_while_undecided",
                                                           "print_the_host_load_last"],
                     # the library's path is recorded before the check's
                     # own sanity, and its verdict kept after set_references
                     "pre_sanity": MPIRUN_HOOKS["pre_sanity"] + ["record_the_path",
                                                                 "find_stacked_ranks"],
                     "pre_performance": MPIRUN_HOOKS["pre_performance"]
                     + ["keep_the_path_verdict"]}


def test_every_module_of_the_library_stays_small():
    for module in (paths.REPO / "netbench" / "checks").glob("*.py"):
        assert len(module.read_text().splitlines()) < 400, module


NO_PLACEMENT = """
import reframe as rfm
from reframe.core.builtins import parameter
from netbench import checks


@rfm.simple_test
class NoPlacement(checks.PingPongBase):
    transport = parameter(["shm"])
"""


def test_a_check_without_a_placement_fails_naming_it(tmp_path):
    """`transport` and `placement` cannot be ReFrame variables (the checks
    make them parameters): the first setup hook says which is missing."""
    check = tmp_path / "no_placement.py"
    check.write_text(NO_PLACEMENT)
    env = {k: v for k, v in os.environ.items() if not k.startswith(session.DROPPED)}
    proc = subprocess.run([str(session.BIN / "reframe"), "-C", str(paths.CONFIG), "-c",
                           str(check), "-p", "^mpich$", "-r"], cwd=paths.REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    # the case failed before it could measure: exit 2, not a loss shown (1)
    assert proc.returncode == 2, out[-3000:]
    assert "NoPlacement defines no placement (one of intranode, internode" in out, out[-3000:]


HOOKS_OF_VIEW_BINARY_CHECKS = r"""
import json, sys
import reframe.core.config as config
import reframe.core.runtime as runtime
import reframe.utility as util
site = config.load_config(sys.argv[1])
site.select_subconfig("local")
runtime.init_runtime(site)
module = util.import_module_from_file(sys.argv[2])
print(json.dumps({name: {stage: [fn.__name__ for fn in fns]
                         for stage, fns in getattr(module, name).pipeline_hooks().items()}
                  for name in ("OsuPt2Pt", "ImbMpi1", "NetpipeMpi")}))
"""


def test_osu_imb_and_netpipe_cases_record_and_judge_their_library_path():
    """The OSU, IMB and NetPIPE checks launch an MPI as the ping-pong does:
    LibraryPath's hooks come after MpiRun's (the record exists, the
    references' verdicts are written), as in NetbenchRun."""
    proc = subprocess.run([sys.executable, "-c", HOOKS_OF_VIEW_BINARY_CHECKS,
                           str(paths.CONFIG), str(paths.CHECKS / "osu_imb.py")],
                          cwd=paths.REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name, hooks in json.loads(proc.stdout.strip().splitlines()[-1]).items():
        assert hooks["pre_sanity"] == MPIRUN_HOOKS["pre_sanity"] + ["record_the_path"], name
        assert hooks["pre_performance"][:len(MPIRUN_HOOKS["pre_performance"])] == \
            MPIRUN_HOOKS["pre_performance"], name
        assert hooks["pre_performance"][-1] == "keep_the_path_verdict", name
