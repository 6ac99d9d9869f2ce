"""Launches: a run's launches, each output parsed once
(results.benchmark.parse_run), and the figures of its first launch that
started, as deferred sanity expressions that fail naming what is missing.
Mixed into NetbenchRun, which says what the runs are (main_run,
first_outputs), reads its stage files (read_stage_file) and the path each
launch's library said it took (LibraryPath.path_said)."""

import reframe as rfm
import reframe.utility.sanity as sn

from ..judgement import figures, remeasure
from ..results import benchmark


class Launches(rfm.RegressionTestPlugin):
    """Every launch of a run, and the first that started."""

    def run_files(self, name):
        """The stage files of every launch of run `name`, in order: the
        first, then the re-measurements `NAME-2.out`, `NAME-3.out`, ..."""
        return remeasure.launch_files(self.stagedir, name, self.first_outputs()[name])

    def launches(self, name=None):
        """Every launch of run `name` (default: the case's own) as parsed
        once: [{columns, rows, summary, placements, failure, ...}]."""
        name = name or self.main_run()
        cache = self.__dict__.setdefault("_parsed_launches", {})
        if name not in cache:
            cache[name] = [self.parse_launch(self.read_stage_file(f))
                           for f in self.run_files(name)]
        return cache[name]

    def parse_launch(self, text):
        """One launch's output read once: the benchmark's (parse_run) and
        the path its library said it took (`path`: LibraryPath.path_said)."""
        launch = benchmark.parse_run(text)
        launch["path"] = self.path_said(text)
        return launch

    def first_launch(self, name=None):
        """The first launch of run `name` that started: one whose launcher
        failed before the benchmark printed anything was launched again
        (judging.yaml replicates.restarts) and is passed over."""
        return self.launches(name)[self.first_started(name)]

    def first_launch_file(self, name=None):
        """The stage file of first_launch, for the messages that name it."""
        return self.run_files(name or self.main_run())[self.first_started(name)]

    def first_started(self, name=None):
        launches = self.launches(name)
        return next((i for i, launch in enumerate(launches) if benchmark.started(launch)), 0)


@sn.deferrable
def launch_summary(test, run, key, conv=float):
    """The summary figure `key` of run `run`'s first launch; a SanityError
    naming what is missing, not a ValueError on whatever a dying run left."""
    try:
        return conv(benchmark.summary_figure(test.first_launch(run)["summary"], key,
                                             test.first_launch_file(run)))
    except benchmark.MissingFigure as err:
        raise sn.SanityError(str(err)) from err


@sn.deferrable
def launch_value(test, run, nbytes, column):
    """One figure of run `run`'s first launch's table, by column name; a
    SanityError when the table has no such row."""
    try:
        return benchmark.table_figure(test.first_launch(run)["rows"], nbytes, column,
                                      test.first_launch_file(run))
    except benchmark.MissingFigure as err:
        raise sn.SanityError(str(err)) from err


@sn.deferrable
def launch_figure(test, run, spec):
    """A figure spec's value in run `run`'s first launch."""
    try:
        return figures.estimate(test.first_launch(run)["rows"], spec).value
    except figures.NoFigure as err:
        raise sn.SanityError(f"{err} in {test.first_launch_file(run)}: the benchmark did not "
                             f"finish") from err
