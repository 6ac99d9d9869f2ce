"""Loading netbench's ReFrame configuration changes nothing: it reads files
and probes the MPIs, and that is all.  What a session needs besides
(launchers, the empty-run guard, folders, SLURM_CONF, publishing) is done by
reframe_checks/settings.py, step by step, where a reader sees it.

What the configuration does is watched with Python's audit hooks (PEP 578),
which see every process start, environment change and file write of this
interpreter without replacing anything."""

import contextlib
import os
import sys
from pathlib import Path

from netbench import report
from netbench.probe import discovery
from netbench.rfm import config as rfm_config

#: the audit events of a change outside the interpreter
WRITES = {"os.mkdir", "os.rename", "os.remove", "os.rmdir", "os.symlink", "os.link",
          "os.truncate", "os.chmod", "os.chown", "os.utime", "shutil.rmtree",
          "shutil.copyfile", "shutil.move", "os.putenv", "os.unsetenv"}
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
DISCOVERY = Path(discovery.__file__).resolve()

_events = None      # a list while recording (an audit hook cannot be removed)


def _started_by_discovery():
    frame = sys._getframe(2)
    while frame:
        if Path(frame.f_code.co_filename).resolve() == DISCOVERY:
            return True
        frame = frame.f_back
    return False


def _writes_a_file(args):
    path, mode, flags = args
    if path == os.devnull or isinstance(path, int):
        return False
    if mode is not None:
        return any(c in str(mode) for c in "wax+")
    return bool(flags & WRITE_FLAGS)


def _audit(event, args):
    if _events is None:
        return
    if event == "subprocess.Popen":
        _events.append(("process", list(args[1]), _started_by_discovery()))
    elif event == "open" and _writes_a_file(args):
        _events.append(("write", args[0], None))
    elif event in WRITES:
        _events.append((event, args[0], None))


sys.addaudithook(_audit)


@contextlib.contextmanager
def recorded():
    """The audit events of the block: (kind, what, started by discovery)."""
    global _events
    _events = []
    try:
        yield _events
    finally:
        _events = None


def publishing():
    """Whether this interpreter publishes its session at exit."""
    return getattr(report.publish_after_session, "registered", False)


def configuration(monkeypatch):
    """site_configuration(), its MPIs discovered afresh, with every import
    it makes done before (an import may write bytecode)."""
    from reframe.core import backends
    from reframe.frontend.executors import Runner
    before = (dict(os.environ), Runner.runall, dict(backends._launchers), publishing())
    rfm_config.site_configuration()
    rfm_config.discovered_mpis.cache_clear()
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    with recorded() as events:
        config = rfm_config.site_configuration()
    after = (dict(os.environ), Runner.runall, dict(backends._launchers), publishing())
    return config, events, before, after


def test_loading_the_configuration_changes_nothing(monkeypatch):
    config, events, before, after = configuration(monkeypatch)
    assert config["systems"] and config["environments"]
    environ, runall, launchers, publishes = before
    assert after[0] == environ, "the configuration changed os.environ"
    assert after[1] is runall, "the configuration wrapped ReFrame's runner"
    assert after[2] == launchers, "the configuration registered a launcher"
    assert after[3] == publishes, "the configuration set up publishing"
    changes = [(kind, what) for kind, what, _ in events if kind != "process"]
    assert changes == [], f"the configuration wrote: {changes}"
    foreign = [argv for kind, argv, probe in events if kind == "process" and not probe]
    assert foreign == [], f"processes other than discovery's probes: {foreign}"
    if any("mpi" in env.get("features", []) for env in config["environments"]):
        # the recording sees processes: discovery probed the MPIs it found
        assert any(probe for kind, _, probe in events if kind == "process")


def test_the_mpis_are_discovered_once_per_process(monkeypatch):
    configuration(monkeypatch)          # discovers
    with recorded() as events:
        rfm_config.site_configuration()
    assert [e for e in events if e[0] == "process"] == []



def test_the_patches_name_the_reframe_release_pinned_and_installed():
    """rfm/patches.py wraps ReFrame internals written for one release: the
    release it names is the one pyproject.toml pins and the one installed,
    so a ReFrame upgrade fails here before a patch silently stops working."""
    import re

    import reframe

    from netbench import paths
    from netbench.rfm import patches
    pin = re.search(r'"reframe-hpc==([^"]+)"', (paths.REPO / "pyproject.toml").read_text())
    assert pin and pin.group(1) == patches.REFRAME_VERSION == reframe.VERSION


def deprecation_seen(warn, inside_reframe):
    """(file, line, text) of the warnings `warn` gives when ReFrame's own
    code (`inside_reframe`, a module named reframe*) calls it from this line."""
    import warnings
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        inside_reframe.read_deprecated(warn)
    return [(w.filename, w.lineno, str(w.message)) for w in seen]


def test_deprecation_warnings_name_the_same_line_without_reading_sources(tmp_path,
                                                                        monkeypatch):
    """The patched deprecation warning names the line ReFrame's named: the
    first frame outside ReFrame's modules."""
    import importlib
    import sys

    import reframe.core.variables
    from reframe.core import warnings as rfm_warnings

    from netbench.rfm import patches
    (tmp_path / "reframe_example.py").write_text(
        "def read_deprecated(warn):\n    warn('old, use new')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "reframe_example", raising=False)
    inside_reframe = importlib.import_module("reframe_example")
    patches.find_deprecation_callers_without_source()
    patched = rfm_warnings.user_deprecation_warning
    assert patched.netbench_without_source
    assert reframe.core.variables.user_deprecation_warning is patched
    seen = deprecation_seen(patched, inside_reframe)
    assert seen == deprecation_seen(patched.netbench_replaces, inside_reframe)
    ((filename, line, text),) = seen
    assert (filename, text) == (__file__, "old, use new")
    source = open(__file__).read().splitlines()[line - 1]
    assert "read_deprecated" in source, source


def test_reframe_looks_often_only_at_jobs_of_the_local_scheduler():
    """A local job's end is a waitpid away, so ReFrame looks often; a batch
    scheduler's look asks its controller, so those systems keep ReFrame's
    default polling."""
    def system(name, *schedulers):
        return {"name": name, "partitions": [{"name": f"p{i}", "scheduler": s}
                                             for i, s in enumerate(schedulers)]}

    systems = [system("site", "slurm", "local"), system("local", "local"),
               system("vcluster-a", "local"), system("vcluster-b-slurm", "squeue")]
    entries = rfm_config.local_polling(systems)
    assert [e["target_systems"] for e in entries] == [["local", "vcluster-a"]]
    assert entries[0]["poll_rate_max"] > 10 and entries[0]["poll_rate_decay"] < 0.1
    assert rfm_config.local_polling([system("site", "slurm")]) == []
    general = rfm_config.site_configuration(mpis=[])["general"]
    assert general[0].get("target_systems") is None and "report_file" in general[0]
    assert any("local" in e.get("target_systems", ()) for e in general[1:])
