"""The six places where netbench changes ReFrame's own behaviour, each
because ReFrame has no option or hook for it; each wraps or replaces one
entry point of ReFrame's internals, once per interpreter, and
reframe_checks/settings.py calls it by name:

* refuse_empty_runs: a filter matching no case exits 2, not `PASSED 0/0`
  (wraps reframe.frontend.executors.Runner.runall);
* tell_verdicts_apart_in_the_exit_code: exit codes 1, 2, 3 and 130 for a
  loss, cases that did not run to the end (or a session that ran none),
  inconclusive cases and an interrupt (gives reframe.frontend.cli a `sys`
  whose exit refines the code);
* record_how_the_session_ended: how many cases the session was to run,
  how many ran and what stopped it, in the run report, and an interrupted
  session's JUnit saying so first, its aborted cases skipped, not passed
  (wraps Runner.runall and RunReport's update_run_stats and
  generate_xml_report);
* stop_on_sigterm_whatever_runs: SIGTERM and SIGHUP stop a session as
  Ctrl-C does, even while ReFrame writes a log line (replaces
  reframe.frontend.executors._force_exit);
* say_what_was_not_generated: one line per reason a check generated fewer
  cases (wraps reframe.frontend.loader.RegressionCheckLoader.load_all);
* find_deprecation_callers_without_source: the same deprecation warnings,
  without reading the source of every frame on the stack for each
  (replaces reframe.core.warnings.user_deprecation_warning).

They reach into ReFrame's internals, which change between releases:
REFRAME_VERSION is the release they were written against, the one
pyproject.toml pins (tests/test_rfm_config.py holds the two together).
"""

import json
import sys
import time
import warnings

#: the ReFrame release these patches were written and tested against
#: (pyproject.toml pins reframe-hpc to it)
REFRAME_VERSION = "4.10.4"


def refuse_empty_runs():
    """A run whose filters match no test case stops with one line and exit
    code 2 (nothing measured, report.verdict.EXIT_NOT_RUN; a loss shown is
    1): ReFrame itself reports `PASSED 0/0` and exits 0, and a typo in
    `-n`, `-t` or `-p` would look like a clean run.  ReFrame (REFRAME_VERSION) has no
    option or hook for it and the check files cannot know what the filters
    leave, so this wraps the runner's entry point, once per interpreter;
    reframe_checks/settings.py calls it."""
    from reframe.frontend.executors import Runner

    if getattr(Runner.runall, "netbench_refuses_empty", False):
        return
    runall = Runner.runall

    def checked_runall(self, testcases, restored_cases=None):
        from ..report.verdict import EXIT_NOT_RUN

        if not testcases and not restored_cases:
            sys.stdout.flush()
            print(EMPTY_RUN, file=sys.stderr)
            sys.exit(EXIT_NOT_RUN)
        return runall(self, testcases, restored_cases)

    checked_runall.netbench_refuses_empty = True
    Runner.runall = checked_runall


EMPTY_RUN = "netbench: no test case matched the filters"


def tell_verdicts_apart_in_the_exit_code():
    """ReFrame exits 1 for any failed case, for an interrupt and for a
    session it could not start (an unknown --system, a configuration
    error), and 0 otherwise; netbench's verdicts are four
    (report.verdict.exit_code): a loss shown (1), cases that could not run
    to the end or no case run (2), inconclusive (3), pass (0), and an
    interrupt (Ctrl-C, SIGTERM) is 130 as for every netbench command.  ReFrame
    (REFRAME_VERSION) has no option for it and ends its `main` with
    sys.exit(code), an interrupt's inside the `except` that caught it: this
    gives its module a `sys` whose exit refines the code from the run
    report ReFrame has just written, and from the exception being handled.
    Once per interpreter."""
    import types

    from reframe.frontend import cli

    if getattr(cli.sys, "netbench_refines_exit", False):
        return
    started = time.time()
    real_sys = cli.sys

    def exit(code=0):
        from ..judgement.session_end import SIGNALS, stop_code
        stop = real_sys.exc_info()[1]
        interrupted = stop is not None and stop_code(stop) in SIGNALS
        real_sys.exit(refined_exit_code(code, started, interrupted))

    proxy = types.ModuleType("sys")
    proxy.__dict__.update(real_sys.__dict__)
    proxy.exit = exit
    proxy.netbench_refines_exit = True
    cli.sys = proxy


def refined_exit_code(code, started, interrupted=False):
    """`code` refined: 130 for an interrupt, Ctrl-C or SIGTERM (ReFrame's 1:
    the cases it aborted showed no loss), else by the run report this session wrote;
    ReFrame writes none when it ran no case (an unknown --system, a
    configuration or loading error stop it before), so a failure without
    one measured nothing: 2."""
    from ..report.publish import RAW_REPORTS
    from ..report.verdict import EXIT_INTERRUPTED, EXIT_NOT_RUN, exit_code

    if not isinstance(code, int):
        return code
    if interrupted:
        return EXIT_INTERRUPTED
    fresh = [p for p in RAW_REPORTS.glob("run-report-*.json")
             if p.stat().st_mtime >= started]
    if not fresh:
        return EXIT_NOT_RUN if code == 1 else code
    try:
        with open(max(fresh, key=lambda p: p.stat().st_mtime)) as f:
            return exit_code(json.load(f), code)
    except (OSError, ValueError):
        return code


def record_how_the_session_ended():
    """ReFrame's run report lists the cases a session started, and its
    `num_cases` counts those: a session its serial policy ran when Ctrl-C
    or SIGTERM stopped it lists the cases that had run, all passed, and
    nothing says the rest never ran (its JUnit neither).  This counts the
    cases the session is to run when it starts (wrapping the runner's entry
    point), notes what stopped it, and, when ReFrame fills the report in
    from the runner's statistics, stores judgement.session_end's record in
    `session_info`; the JUnit of a session cut short then opens on a
    testcase in error saying "Interrupted: N of M cases ran".  Once per
    interpreter; settings.py calls it."""
    from reframe.frontend.executors import Runner
    from reframe.frontend.reporting import RunReport

    if getattr(Runner.runall, "netbench_counts_cases", False):
        return
    from ..judgement import session_end
    runall = Runner.runall
    update_run_stats = RunReport.update_run_stats
    generate_xml_report = RunReport.generate_xml_report
    ending = {}

    def counted_runall(self, testcases, restored_cases=None):
        # restored cases (--restore-session) ran in their own session: they
        # are not in this one's runs, nor counted here
        ending.update(planned=sum(1 for tc in testcases if not tc.check.is_fixture()),
                      stopped_by=None)
        try:
            return runall(self, testcases, restored_cases)
        except BaseException as err:
            ending["stopped_by"] = session_end.stop_code(err)
            raise

    def update_and_record(self, stats):
        update_run_stats(self, stats)
        if "planned" in ending:
            self.update_extras(session_end.in_session_info(session_end.record(
                ending["planned"], session_end.cases_ran(self["runs"]),
                ending["stopped_by"])))

    def junit_saying_so(self):
        xml = generate_xml_report(self)
        mark_aborted(xml, self["runs"])
        end = session_end.from_session_info(self["session_info"])
        if session_end.cut_short(end):
            say_interrupted_first(xml, end)
        return xml

    # the marks of the wrappers it wraps (refuse_empty_runs'): once each
    counted_runall.__dict__.update(runall.__dict__, netbench_counts_cases=True)
    Runner.runall = counted_runall
    RunReport.update_run_stats = update_and_record
    RunReport.generate_xml_report = junit_saying_so


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where the signal found the session; its
    text names the signal (judgement.session_end.stop_code)."""


def stop_on_sigterm_whatever_runs():
    """ReFrame turns SIGTERM and SIGHUP (a batch system's time limit, `kill`)
    into its ForceExitError, an Exception: one that lands while ReFrame
    writes a log line, which it does many times a second in its
    asynchronous policy, is caught by the logging module, printed as a
    "Logging error", and the session runs on with the signals ignored
    until every case has ended (found by tests/test_session_interrupted.py).
    This raises Terminated, a KeyboardInterrupt no `except Exception`
    catches, which ReFrame stops on as on Ctrl-C: it aborts the cases,
    cancels their jobs and writes its report.  As ReFrame's handler, it
    ignores the signals that follow.  ReFrame installs it by name when its
    runner is made: this replaces that name, once per interpreter."""
    import signal

    from reframe.frontend import executors

    if getattr(executors._force_exit, "netbench_terminates", False):
        return

    def terminate(signum, frame):
        for ignored in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
            signal.signal(ignored, signal.SIG_IGN)
        raise Terminated(signal.Signals(signum).name)

    terminate.netbench_terminates = True
    executors._force_exit = terminate


def mark_aborted(xml, runs):
    """ReFrame's JUnit gives a case it aborted (Ctrl-C, SIGTERM, a failure
    limit) no child: a CI reading it counts the case passed.  Each gets a
    <skipped> saying it did not run to its end.  ReFrame writes a testsuite
    per run and a testcase per case of the run, in the run report's order."""
    from lxml import etree

    for suite, run in zip(xml.findall("testsuite"), runs):
        for element, tc in zip(suite.findall("testcase"), run["testcases"]):
            if tc.get("result") == "abort" and not len(element):
                etree.SubElement(element, "skipped", attrib={
                    "type": "aborted", "message": "aborted: did not run to its end"})
        skipped = sum(1 for tc in run["testcases"] if tc.get("result") == "abort")
        if skipped:
            suite.set("skipped", str(int(suite.get("skipped") or 0) + skipped))


def say_interrupted_first(xml, end):
    """ReFrame's JUnit (an lxml tree) with a first testcase in error whose
    name and message are the report's first words of a session cut short
    (report.verdict.interrupted_words), counted in the first testsuite."""
    from lxml import etree
    from ..report.verdict import interrupted_words

    suite = xml.find("testsuite")
    if suite is None:
        return
    words = interrupted_words(end)
    case = etree.Element("testcase", attrib={"classname": "netbench", "name": words,
                                             "time": "0"})
    error = etree.SubElement(case, "error", attrib={"type": "interrupted", "message": words})
    error.text = words
    properties = suite.find("properties")
    suite.insert(0 if properties is None else suite.index(properties) + 1, case)
    for attr in ("errors", "tests"):
        suite.set(attr, str(int(suite.get(attr) or 0) + 1))


def say_what_was_not_generated():
    """After ReFrame has loaded the check files (for -l, -r and --dry-run
    alike), one line per reason a check generated fewer cases, with the
    count (netbench/selection.py), and how to reach the whole matrix from
    a focused run.  ReFrame has no hook after loading; this wraps its
    loader's entry point, once per interpreter; settings.py calls it."""
    from reframe.frontend.loader import RegressionCheckLoader

    if getattr(RegressionCheckLoader.load_all, "netbench_reports_dropped", False):
        return
    load_all = RegressionCheckLoader.load_all

    def load_all_and_report(self, *args, **kwargs):
        loaded = load_all(self, *args, **kwargs)
        from reframe.core.logging import getlogger
        from .. import selection
        for line in selection.not_generated_lines():
            getlogger().info(line)
        if not selection.full_matrix_requested():
            getlogger().info("the focused default set: `-t full` runs the whole matrix, "
                             "`-t seeds` the source documents' experiments")
        return loaded

    load_all_and_report.netbench_reports_dropped = True
    RegressionCheckLoader.load_all = load_all_and_report


def find_deprecation_callers_without_source():
    """ReFrame names the user's line in a deprecation warning by walking
    `inspect.stack()`, which reads the source file of every frame on the
    stack, and it does so on every read of a deprecated variable, even
    where the warning is suppressed: each test case instantiated reads the
    deprecated `variables` alias.  Listing netbench's checks took 1.5 s
    with it and 1.1 s without (docs/validation.md, "The test suite's time").
    This puts in its place the same walk over the frames' module names,
    which reads no file: the same warning, text and line.  ReFrame's
    modules bound the function by name when they imported it, so each
    binding is replaced.  Once per interpreter."""
    import reframe
    import semver
    from reframe.core import warnings as rfm_warnings

    original = rfm_warnings.user_deprecation_warning
    if getattr(original, "netbench_without_source", False):
        return
    installed = semver.VersionInfo.parse(reframe.VERSION)
    # a prerelease warns as its release does
    release = semver.VersionInfo(installed.major, installed.minor, installed.patch)

    def user_deprecation_warning(message, from_version="0.0.0"):
        # as ReFrame's: 1 for this frame, 1 for each of ReFrame's frames
        # from the caller out, so that the warning names the first other one
        stack_level, frame = 2, sys._getframe(1)
        while frame is not None and \
                str(frame.f_globals.get("__name__", "")).startswith("reframe"):
            stack_level += 1
            frame = frame.f_back
        if rfm_warnings._RAISE_DEPRECATION_ALWAYS or \
                release >= semver.VersionInfo.parse(from_version):
            warnings.warn(message, rfm_warnings.ReframeDeprecationWarning,
                          stacklevel=stack_level)

    user_deprecation_warning.netbench_without_source = True
    user_deprecation_warning.netbench_replaces = original
    for name, module in list(sys.modules.items()):
        if name.startswith("reframe") and \
                getattr(module, "user_deprecation_warning", None) is original:
            module.user_deprecation_warning = user_deprecation_warning
