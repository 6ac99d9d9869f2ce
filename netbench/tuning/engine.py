"""How `netbench tune` runs Ansible: with Mitogen's strategy where it is
installed (the `test` extra installs it beside ansible-core).

Mitogen keeps one Python interpreter per host for the whole play instead
of starting one, and copying the module, for every task of every host:
tune.yml and revert.yml take about half the time, on the virtual cluster
and more so on many nodes (docs/validation.md).  The playbooks are the
same; a plain `ansible-playbook tune.yml` runs them with Ansible's own
strategy.  A strategy the user chose (ANSIBLE_STRATEGY) is theirs to keep,
and the tuning record names the one that ran (`describe`).
"""

import importlib.metadata
import importlib.util
import os
from pathlib import Path

#: Ansible's linear strategy (each task on every host before the next),
#: run through Mitogen's connection
STRATEGY = "mitogen_linear"


def mitogen_strategies():
    """The folder of Mitogen's strategy plugins, None without Mitogen."""
    spec = importlib.util.find_spec("ansible_mitogen")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(list(spec.submodule_search_locations)[0]) / "plugins" / "strategy"
    return folder if (folder / f"{STRATEGY}.py").is_file() else None


def environment(base=None):
    """The environment netbench runs ansible and ansible-playbook in."""
    env = dict(os.environ if base is None else base)
    folder = mitogen_strategies()
    if env.get("ANSIBLE_STRATEGY") or folder is None:
        return env
    others = env.get("ANSIBLE_STRATEGY_PLUGINS")
    env["ANSIBLE_STRATEGY_PLUGINS"] = os.pathsep.join(filter(None, [str(folder), others]))
    env["ANSIBLE_STRATEGY"] = STRATEGY
    return env


def version_of(distribution):
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def describe(env):
    """What the tuning record says of the engine that ran its playbooks."""
    strategy = env.get("ANSIBLE_STRATEGY") or "linear"
    return {"strategy": strategy, "ansible_core": version_of("ansible-core"),
            "mitogen": version_of("mitogen") if strategy.startswith("mitogen") else None}
