"""ReFrame's logging, its JUnit file and its working folders below the
repository (paths.STATE): every output ReFrame writes stays inside the
checkout."""

import os

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
