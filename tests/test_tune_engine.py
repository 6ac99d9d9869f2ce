"""How `netbench tune` runs Ansible (netbench/tuning/engine.py): Mitogen's
strategy, which the `test` extra installs beside ansible-core, unless the
user chose a strategy; the tuning record names the one that ran.  That
the playbooks do the same under it, and revert exactly, is the live
tuning tests' (tests/test_tune_loop.py, test_tune_faults_live.py,
test_tune_hosts.py); a plain ansible-playbook is test_tune.py's."""

import importlib.metadata
from pathlib import Path

import pytest

from netbench.tuning import engine

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside


def test_mitogen_is_installed_and_netbench_runs_its_strategy():
    env = engine.environment({"PATH": "/usr/bin"})
    assert env["ANSIBLE_STRATEGY"] == "mitogen_linear"
    (folder,) = env["ANSIBLE_STRATEGY_PLUGINS"].split(":")
    assert (Path(folder) / "mitogen_linear.py").is_file()
    assert env["PATH"] == "/usr/bin"
    assert engine.describe(env) == {
        "strategy": "mitogen_linear", "ansible_core": importlib.metadata.version("ansible-core"),
        "mitogen": importlib.metadata.version("mitogen")}


def test_a_strategy_the_user_chose_is_kept():
    env = engine.environment({"ANSIBLE_STRATEGY": "free"})
    assert env == {"ANSIBLE_STRATEGY": "free"}
    assert engine.describe(env)["strategy"] == "free" and engine.describe(env)["mitogen"] is None


def test_the_user_s_strategy_plugins_stay_on_the_path_after_mitogen_s():
    env = engine.environment({"ANSIBLE_STRATEGY_PLUGINS": "/site/strategies"})
    assert env["ANSIBLE_STRATEGY_PLUGINS"].split(":")[1:] == ["/site/strategies"]


def test_without_mitogen_ansible_runs_its_own_strategy_and_the_record_says_so(monkeypatch):
    monkeypatch.setattr(engine.importlib.util, "find_spec", lambda name: None)
    env = engine.environment({"PATH": "/usr/bin"})
    assert env == {"PATH": "/usr/bin"}
    assert engine.describe(env) == {
        "strategy": "linear", "ansible_core": importlib.metadata.version("ansible-core"),
        "mitogen": None}
