"""ReFrame's logging, its JUnit file and its working folders below the
repository (paths.STATE): every output ReFrame writes stays inside the
checkout, and the log of its start-up, which ReFrame leaves in the
temporary folder, is removed when the session ends."""

import atexit
import contextlib
import os
import tempfile

from .. import paths


def log_file_stamp(pid=None):
    """strftime pattern of the log file's suffix: the session's start to
    the second, and the ReFrame process's PID, so that two sessions started
    in one second (parallel test runs, CI) write a log each."""
    return f"%Y%m%dT%H%M%S-{pid or os.getpid()}"


def logging_config():
    logs = paths.STATE / "logs"
    perflogs = paths.STATE / "perflogs"
    return [{
        "level": "debug",
        "handlers": [
            {"type": "stream", "name": "stdout", "level": "info", "format": "%(message)s"},
            {"type": "file", "name": str(logs / "reframe.log"), "level": "debug",
             "format": "[%(asctime)s] %(levelname)s: %(check_info)s: %(message)s",
             "append": False, "timestamp": log_file_stamp()},
        ],
        "handlers_perflog": [{
            "type": "filelog",
            "prefix": "%(check_system)s/%(check_partition)s",
            "level": "info",
            "format": ("%(check_job_completion_time)s|%(check_info)s|%(check_environ)s|"
                       "%(check_perf_var)s=%(check_perf_value)s %(check_perf_unit)s|"
                       "ref=%(check_perf_ref)s (l=%(check_perf_lower_thres)s, "
                       "u=%(check_perf_upper_thres)s)|%(check_perf_result)s"),
            "append": True,
            "basedir": str(perflogs),
        }],
    }]


#: ReFrame's working folders below paths.STATE
STATE_FOLDERS = ("logs", "perflogs", "stage", "output", "topology", "reports")


def make_state_folders():
    """ReFrame's working folders and reports/.  ReFrame opens its log file
    (.reframe/logs/) before it runs anything and does not create the
    file's folder."""
    for sub in STATE_FOLDERS:
        paths.state_dir(sub)
    os.makedirs(paths.REPORTS, exist_ok=True)


def remove_the_start_up_log_at_exit():
    """ReFrame logs its start-up, until it has read this configuration, to a
    file it makes in the temporary folder (its builtin configuration's
    unnamed file handler: rfm-XXXXXXXX.log) and never removes: one file a
    session, in /tmp on a shared machine.  Called while ReFrame loads this
    configuration, when that file is its only log, this removes it when the
    process ends, if ReFrame's logging has moved on to logging_config's.  If
    it has not, the configuration did not load and ReFrame has named that
    file as its log: it stays."""
    start_up = _start_up_logs()
    if start_up:
        atexit.register(_remove_unless_still_logged, start_up)


def remove_the_start_up_log():
    """Remove ReFrame's start-up log now: for a configuration that ends the
    process itself, with its own one-line error, where ReFrame names no
    log."""
    _remove(_start_up_logs())


def _start_up_logs():
    """The files ReFrame's logger writes that ReFrame made itself, as it
    does for its start-up; [] outside ReFrame's command line."""
    from reframe.core import logging as rfm_logging
    try:
        logged = rfm_logging.log_files()
    except AttributeError:        # no logger: not loaded by ReFrame's command line
        return []
    return [path for path in logged if _made_by_reframe_for_its_start_up(path)]


def _made_by_reframe_for_its_start_up(path):
    """Whether `path` is a name ReFrame gives a log it makes itself
    (reframe.utility.osext.mkstemp_path: rfm-*.log in the temporary
    folder), never a log a configuration named."""
    name = os.path.basename(path)
    return (os.path.dirname(path) == tempfile.gettempdir()
            and name.startswith("rfm-") and name.endswith(".log"))


def _remove_unless_still_logged(start_up):
    if not set(start_up) & set(_start_up_logs()):
        _remove(start_up)


def _remove(files):
    for path in files:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
