"""One build recipe and one option list for the benchmark
(netbench/data/benchmark.yaml, read through netbench.benchspec): the
builds that cannot read YAML (the container recipes, the Spack package)
compile it by that recipe, and netbench.c takes exactly the options the
list names.  Each test fails where a copy diverges, naming it."""

import ast
import re
import shlex
from pathlib import PurePosixPath

import pytest

from netbench import benchspec, datafiles, paths
from netbench.checks import NetbenchBuild
from netbench.rfm import config as rfm_config

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside

CONTAINERS = paths.REPO / "containers"
SPACK_PACKAGE = paths.REPO / "spack_repo" / "netbench" / "packages" / "netbench" / "package.py"
SOURCE = paths.SOURCES / "netbench.c"
#: where the container recipes put the source and the binaries
IMAGE_SOURCES = PurePosixPath("/opt/netbench/src")
IMAGE_BINARY = "/opt/netbench/bin/{executable}-$mpi"


def shell_compile_command(recipe_text):
    """The mpicc command of a container recipe, as argv (comments left
    out, continuation lines joined; the command ends at `;` or the end of
    its line)."""
    code = "\n".join(line for line in recipe_text.splitlines()
                     if not line.lstrip().startswith("#"))
    text = code.replace("\\\n", " ")
    match = re.search(r"(\S*/mpicc\s[^;\n]*)", text)
    assert match, "no mpicc command"
    return shlex.split(match.group(1))


def image_command(cc):
    build = benchspec.recipe()
    return benchspec.compile_command(cc, IMAGE_BINARY.format(**build), folder=IMAGE_SOURCES)


@pytest.mark.parametrize("recipe", ["Containerfile", "netbench.def"])
def test_container_recipes_compile_by_the_recipe(recipe):
    text = (CONTAINERS / recipe).read_text()
    argv = shell_compile_command(text)
    assert argv == image_command(argv[0]), f"containers/{recipe}: {' '.join(argv)}"
    source = benchspec.recipe()["source"]
    assert f"reframe_checks/src/{source} {IMAGE_SOURCES / source}" in text.replace("COPY ", "")


def python_argument(node):
    """A literal argument of package.py's mpicc call: strings, join_path of
    them, and `prefix.bin` as $prefix/bin."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"${node.value.id}/{node.attr}"
    if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "join_path":
        return "/".join(python_argument(a) for a in node.args)
    raise AssertionError(f"package.py: mpicc argument {ast.dump(node)} is no literal")


def test_the_spack_package_compiles_by_the_recipe():
    tree = ast.parse(SPACK_PACKAGE.read_text())
    (call,) = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
               and getattr(n.func, "id", "") == "mpicc"]
    argv = ["mpicc", *map(python_argument, call.args)]
    build = benchspec.recipe()
    expected = benchspec.compile_command("mpicc", f"$prefix/bin/{build['executable']}",
                                         folder=PurePosixPath("reframe_checks/src"))
    assert argv == expected, f"{SPACK_PACKAGE}: {argv}"


def test_the_checks_build_by_the_recipe():
    build = benchspec.recipe()
    assert (NetbenchBuild.sourcepath, NetbenchBuild.executable) == \
        (build["source"], build["executable"])
    assert benchspec.source_path() == SOURCE and SOURCE.exists()


def test_the_reframe_environments_build_by_the_recipe(mpis, families):
    build = benchspec.recipe()
    for mpi in mpis.values():
        env = rfm_config.environment(mpi, families)
        assert (env["cflags"], env["ldflags"]) == (build["cflags"], build["ldflags"]), mpi.name


def test_no_python_module_spells_a_build_flag():
    """The flags are benchmark.yaml's alone: a module that spells one (as
    rfm/config.py's environments did) keeps it when the recipe changes."""
    build = benchspec.recipe()
    flags = set(build["cflags"]) | set(build["ldflags"])
    spelled = []
    for path in sorted([*(paths.REPO / "netbench").rglob("*.py"), *paths.CHECKS.rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and node.value in flags:
                spelled.append(f"{path.relative_to(paths.REPO)}:{node.lineno}: {node.value}")
    assert spelled == [], spelled


def getopt_string():
    match = re.search(r'getopt\(argc, argv, "([^"]+)"\)', SOURCE.read_text())
    assert match, "netbench.c: no getopt call"
    return match.group(1)


def test_netbench_c_takes_exactly_the_listed_options():
    """getopt's string, letter by letter (`:` after one that takes a
    value), against the option list; `-h` is netbench.c's own help."""
    taken = {m.group(1): bool(m.group(2)) for m in re.finditer(r"(\w)(:?)", getopt_string())}
    taken.pop("h")
    listed = {spec["flag"][1]: "value" in spec for spec in benchspec.load()["options"].values()}
    assert taken == listed


def test_netbench_c_has_exactly_the_listed_modes():
    match = re.search(r"mode_names\[\] = \{([^}]*)\}", SOURCE.read_text())
    assert re.findall(r'"(\w+)"', match.group(1)) == benchspec.load()["modes"]


def test_its_usage_text_names_every_option():
    usage = SOURCE.read_text().split("static void usage(void)")[1].split("\n}\n")[0]
    for name, spec in benchspec.load()["options"].items():
        assert f"  {spec['flag']} " in usage, name


def test_command_lines_are_built_from_the_option_list():
    assert benchspec.command_line("pingpong", max_bytes=8388608, budget=0.05,
                                  precision=0.01, verify=True) == \
        ["pingpong", "-x", "8388608", "-t", "0.05", "-r", "0.01", "-V"]
    assert benchspec.command_line("tcp", stream=True, sizes=[61440, 65536]) == \
        ["tcp", "-S", "-s", "61440,65536"]
    assert benchspec.options(verify=False, one_buffer=True) == ["-1"]
    with pytest.raises(ValueError, match="no option 'verbose'"):
        benchspec.option("verbose")
    with pytest.raises(ValueError, match="no mode 'alltoall'"):
        benchspec.command_line("alltoall")


def test_a_malformed_data_file_names_file_and_key(tmp_path):
    broken = tmp_path / "benchmark.yaml"
    broken.write_text(benchspec.PATH.read_text().replace("{flag: -V}", "{flag: V}"))
    with pytest.raises(datafiles.DataError) as err:
        benchspec.load(broken)
    assert str(err.value) == f"{broken}: options.verify.flag: a dash and one letter or " \
                             f"digit (getopt)"
