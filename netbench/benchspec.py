"""netbench's benchmark as netbench/data/benchmark.yaml describes it: the
build recipe (source, compiler and linker flags, executable) and the
command-line options, by name.  Every Python user builds the benchmark's
compile command and command lines here, so a flag is spelled in one place.
"""

import functools

from . import datafiles, paths

PATH = paths.DATA / "benchmark.yaml"

_NAME = {"type": "string", "minLength": 1}
_FLAGS = {"type": "array", "items": {"type": "string", "pattern": "^-"}}
SCHEMA = {
    "type": "object",
    "required": ["build", "modes", "options"],
    "additionalProperties": False,
    "properties": {
        "build": {
            "type": "object", "additionalProperties": False,
            "required": ["source", "cflags", "ldflags", "executable"],
            "properties": {"source": _NAME, "cflags": _FLAGS, "ldflags": _FLAGS,
                           "executable": _NAME}},
        "modes": {"type": "array", "items": _NAME, "minItems": 1},
        "options": {
            "type": "object",
            "additionalProperties": {
                "type": "object", "required": ["flag"], "additionalProperties": False,
                "properties": {
                    "flag": {"type": "string", "pattern": "^-[A-Za-z0-9]$",
                             "description": "a dash and one letter or digit (getopt)"},
                    "value": {"enum": ["bytes", "number", "sizes", "text"]}}}},
    },
}


@functools.lru_cache(maxsize=None)
def load(path=PATH):
    """The validated description; DataError naming file and key."""
    return datafiles.validate(datafiles.load_yaml(path), SCHEMA, path)


def recipe():
    """{source, cflags, ldflags, executable} of the build."""
    return load()["build"]


def source_path(folder=paths.SOURCES):
    """The benchmark's source file in `folder` (the repository's by default)."""
    return folder / recipe()["source"]


def compile_command(cc, output, extra_cflags=(), folder=paths.SOURCES):
    """argv compiling the benchmark with `cc` (an MPI's mpicc) into
    `output`: cc, cflags, -o output, the source, ldflags (the libraries
    after the source that needs them)."""
    build = recipe()
    return [str(cc), *build["cflags"], *extra_cflags, "-o", str(output),
            str(source_path(folder)), *build["ldflags"]]


def option(name, value=True):
    """The arguments that set option `name`: its flag for a switch that is
    on ([] when off), else the flag and the value (a list of sizes joined
    by commas)."""
    try:
        spec = load()["options"][name]
    except KeyError:
        raise ValueError(f"the benchmark has no option {name!r} ({PATH})") from None
    if "value" not in spec:
        return [spec["flag"]] if value else []
    text = ",".join(map(str, value)) if spec["value"] == "sizes" else str(value)
    return [spec["flag"], text]


def options(**named):
    """The arguments of several options, in the order given."""
    return [arg for name, value in named.items() for arg in option(name, value)]


def command_line(mode, **named):
    """The benchmark's arguments: `mode`, then the named options in order."""
    if mode not in load()["modes"]:
        raise ValueError(f"the benchmark has no mode {mode!r} ({PATH})")
    return [mode, *options(**named)]
