"""A mutation check of the live tests (issue #33): with the verdict
model's decision replaced by "inconclusive" everywhere, in the tests and in
the ReFrame sessions they start, the live tests that claim a real pass or
fail must go red.  A test that still passes under the mutant cannot fail
on the claim it makes.

The mutant is a sitecustomize.py in a folder put first on PYTHONPATH of a
pytest subprocess: every Python process that inherits it (pytest, ReFrame)
imports it at start-up, and it swaps the code of judgement.model's judge
and judge_paired, so every module that imported them by name sees the
mutant too.  Production code has no hook for it."""

import os
import subprocess
import sys
import xml.etree.ElementTree as ET

from netbench import paths

#: live tests that assert a verdict the model decides: a session judged
#: against a figure it cannot reach fails (threshold), a slowed shared-memory
#: path fails against its learned baseline (baseline, along the curve)
LIVE_TESTS = [
    "tests/test_results_contract.py::"
    "test_a_rerendered_session_shows_the_references_it_was_judged_by",
    "tests/test_baselines.py::test_a_slowed_shared_memory_path_fails_at_the_sizes_it_touches",
]
#: the file, beside sitecustomize.py, where each mutant decision is noted
MARKER = "decided-by-the-mutant"

SITECUSTOMIZE = '''\
"""The verdict model's decision replaced by "inconclusive" (written by
tests/test_verdict_mutation.py for one pytest subprocess)."""
import math
import os
import sys

MARKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "{marker}")

try:
    import netbench.judgement.model as _model
except ImportError:      # a Python without netbench's dependencies
    _model = None


def _mutant_decision(which, estimates):
    with open(MARKER, "a") as f:
        f.write(f"{{which}} {{os.getpid()}} {{os.path.basename(sys.argv[0])}}\\n")
    if not estimates:
        return _model.Decision(_model.INCONCLUSIVE, math.nan, math.nan, math.nan, 0,
                               "mutant", {{}})
    e = sorted(estimates, key=lambda e: e.value)[len(estimates) // 2]
    return _model.Decision(_model.INCONCLUSIVE, e.value, e.lo, e.hi, len(estimates),
                           "mutant", {{}})


# judged in judgement.model's globals once their code is swapped in
def judge(replicates, reference, knobs, cpu_bound=True):
    return _mutant_decision("judge", [r.estimate for r in finite_replicates(replicates)])


def judge_paired(ratios, knobs, min_rounds, max_rounds, kind="paired", limit=None):
    return _mutant_decision("judge_paired", [Estimate.point(r) for r in ratios if finite(r)])


if _model is not None:
    _model._mutant_decision = _mutant_decision
    _model.judge.__code__ = judge.__code__
    _model.judge_paired.__code__ = judge_paired.__code__
'''


def mutant_folder(tmp_path):
    folder = tmp_path / "mutant"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE.format(marker=MARKER))
    return folder


def outcomes(junit):
    """{test id: passed | failed | error | skipped} from pytest's JUnit XML."""
    found = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        found[case.get("name")] = {"failure": "failed"}.get(kinds[0], kinds[0]) \
            if kinds else "passed"
    return found


def test_with_every_decision_inconclusive_the_live_tests_go_red(tmp_path):
    mutant = mutant_folder(tmp_path)
    junit = tmp_path / "junit.xml"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(mutant), str(paths.REPO)])}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           f"--junitxml={junit}", *LIVE_TESTS],
                          cwd=paths.REPO, env=env, capture_output=True, text=True,
                          timeout=1500)
    out = (proc.stdout + proc.stderr)[-4000:]
    # the control: the mutant decided figures inside the ReFrame sessions
    # the tests started
    decided = (mutant / MARKER).read_text().splitlines() if (mutant / MARKER).exists() else []
    assert any(line.split()[0] == "judge" and line.split()[-1] == "reframe"
               for line in decided), (decided[:20], out)
    # and every live test failed on an assertion: none passed, none was
    # skipped, none errored in its set-up before it could assert
    assert proc.returncode == 1, out
    names = {test.split("::")[1] for test in LIVE_TESTS}
    assert {name: outcomes(junit).get(name) for name in names} == \
        {name: "failed" for name in names}, out
