"""One declared category per check (netbench/data/check_categories.yaml),
from which the thresholds' check kind (`kind`, Judging), the report
section (`section`, Recording) and the benchmark's mode (`bench_mode`,
NetbenchRun) follow: a check states what it is once, and the three cannot
disagree."""

import functools

import reframe as rfm
from reframe.core.builtins import run_after

from .. import benchspec, paths
from ..datafiles import DataError, load_yaml, validate
from ..results import record as results_record

PATH = paths.DATA / "check_categories.yaml"
#: a category's mode that the check's `pattern` parameter names
PATTERN = "pattern"

SCHEMA = {
    "type": "object", "required": ["categories"], "additionalProperties": False,
    "properties": {"categories": {
        "type": "object", "minProperties": 1,
        "propertyNames": {"pattern": "^[a-z][a-z0-9_]*$",
                          "description": "lower-case words joined by _"},
        "additionalProperties": {
            "type": "object", "required": ["kind", "section", "mode"],
            "additionalProperties": False,
            "properties": {"kind": {"type": "string", "pattern": "^[a-z][a-z0-9-]*$"},
                           "section": {"type": "string"},
                           "mode": {"type": ["string", "null"]}}}}},
}


@functools.lru_cache(maxsize=None)
def categories(path=PATH):
    """{category: {"kind", "section", "mode"}}, checked: every section is
    one the report draws, every mode one the benchmark has (or `pattern`,
    or null); DataError naming the file and key otherwise."""
    data = validate(load_yaml(path), SCHEMA, path)["categories"]
    modes = benchspec.load()["modes"]
    for name, spec in data.items():
        if spec["section"] not in results_record.SECTIONS:
            raise DataError(path, f"categories.{name}.section",
                            f"{spec['section']!r} is not one of "
                            f"{', '.join(results_record.SECTIONS)} (results/record.py)")
        if spec["mode"] not in (*modes, PATTERN, None):
            raise DataError(path, f"categories.{name}.mode",
                            f"{spec['mode']!r} is not one of {', '.join(modes)}, "
                            f"{PATTERN} or null (benchmark.yaml `modes`)")
    return data


def category_of(check, name, path=PATH):
    """The category `name` that check `check` declares; ValueError, one line
    naming the check and the value, for a name the data file does not list."""
    known = categories(path)
    if name not in known:
        raise ValueError(f"{check}: category {name!r} is not one of {', '.join(known)} "
                         f"(netbench/data/check_categories.yaml)")
    return known[name]


class Categorized(rfm.RegressionTestPlugin):
    """`category` in, `kind`, `section` and `bench_mode` out, when ReFrame
    loads the check (its first init hook): an unknown category stops the
    session there, before any case is generated, with one line naming the
    check and the value."""

    #: one of data/check_categories.yaml's categories: every check names one
    category = ""

    def declared_category(self):
        """The case's category: `category`, unless a check's parameters
        choose (ImbMpi1: PingPong or a throughput chain)."""
        return self.category

    @run_after("init")
    def take_category(self):
        try:
            spec = category_of(type(self).__name__, self.declared_category())
        except (ValueError, DataError) as err:
            # ReFrame's loader skips a check whose init fails with a warning
            # and runs the others: a check of no known category must stop
            # the session instead, with this one line
            raise SystemExit(f"netbench: {err}") from None
        self.kind = spec["kind"]
        self.section = spec["section"]
        self.bench_mode = getattr(self, "pattern", None) if spec["mode"] == PATTERN \
            else spec["mode"]
