"""`netbench spack-check [spack.yaml]`: validate the Spack environment
without Spack (which cannot be installed everywhere netbench is developed).

Every spec of the environment (definitions, specs and matrices, develop
entries, view and module projections) is parsed, and every package,
version and variant value is checked against the facts of Spack's builtin
repository (`netbench/data/spack-builtin-packages.json`, or --facts) and the
project-local repository (`spack_repo/netbench`, read from its package.py
files).  Then the views: each MPI build must land in a view folder of its
own, and every benchmark in the folder of the MPI it was built with, the
layout netbench's MPI discovery turns into ReFrame environments.

A site chooses its fabric with `include:` entries under a `when:` (one
file per fabric, spack/fabrics/<fabric>.yaml, naming the libfabric and UCX
the MPI builds link): each such entry is one choice, and the whole check
runs once per choice, with that file's definitions before the manifest's
(the order Spack reads them in).  Per choice, each MPI build's view folder
`<mpi>-<fabric>` must name a fabric of netbench/data/fabrics.yaml, and the
build must link the library that fabric's transports need.
"""

import itertools
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from .. import exitcodes, paths
from ..probe import discovery, fabric
from ..datafiles import DataError, load_yaml, validate
from . import spec as spackspec
from .facts import FACTS, REPO_SCHEMA, is_boolean, load_facts, load_local_repo

SPACK_YAML = paths.REPO / "spack.yaml"
#: packages that provide MPI (whose builds get a view folder each)
MPI_PROVIDERS_VIRTUAL = "mpi"

_STRING = {"type": "string"}
_STRINGS = {"type": "array", "items": _STRING}
_PROJECTIONS = {"type": "object", "additionalProperties": _STRING}
#: a definitions list: named spec lists, each with an optional `when`
_DEFINITIONS = {"type": ["array", "null"], "items": {
    "type": "object",
    "properties": {"when": _STRING},
    "additionalProperties": {"type": ["array", "null"],
                             "items": {"$ref": "#/$defs/spec_item"}}}}
_SPEC_DEFS = {
    # a spec list: spec strings, `$name` references, nested lists, matrices
    "spec_list": {"type": "array", "items": {"$ref": "#/$defs/spec_item"}},
    "spec_item": {"type": ["string", "array", "object"],
                  "items": {"$ref": "#/$defs/spec_item"},
                  "required": ["matrix"], "additionalProperties": False,
                  "properties": {"matrix": {"type": "array",
                                            "items": {"$ref": "#/$defs/spec_list"}},
                                 "exclude": {"type": "array", "items": _STRING}}},
}
#: a file spack.yaml includes: a configuration scope, of which the check
#: reads the definitions
INCLUDED_SCHEMA = {"type": "object", "$defs": _SPEC_DEFS,
                   "properties": {"definitions": _DEFINITIONS}}
#: the parts of a Spack environment (the `spack:` mapping) the check reads,
#: with the types Spack's own schema gives them
ENV_SCHEMA = {
    "type": "object",
    "$defs": _SPEC_DEFS,
    "properties": {
        "include": {"type": ["array", "null"], "items": {
            "type": ["string", "object"], "required": ["path"],
            "properties": {"path": _STRING, "when": _STRING,
                           "optional": {"type": "boolean"}}}},
        "definitions": _DEFINITIONS,
        "specs": {"type": ["array", "null"], "items": {
            "type": ["string", "object"],
            "required": ["matrix"],
            "properties": {"matrix": {"type": "array", "items": {"$ref": "#/$defs/spec_list"}},
                           "exclude": _STRINGS}}},
        "repos": {"type": ["object", "array", "null"], "items": _STRING,
                  "additionalProperties": {"type": ["string", "object"]}},
        "develop": {"type": ["object", "null"], "additionalProperties": {
            "type": "object", "required": ["spec"],
            "properties": {"spec": _STRING, "path": _STRING}}},
        "view": {"type": ["boolean", "string", "object"], "additionalProperties": {
            "type": "object", "properties": {"projections": _PROJECTIONS}}},
        "modules": {"type": ["object", "null"], "additionalProperties": {
            "type": ["object", "null"],
            "properties": {tool: {"type": ["object", "null"],
                                  "properties": {"projections": _PROJECTIONS}}
                           for tool in ("lmod", "tcl")}}},
        "concretizer": {"type": "object", "properties": {
            "unify": {"enum": [True, False, "when_possible"]}}},
    },
}
# ---- the environment's specs ---------------------------------------------------------

@dataclass
class Located:
    """A spec and where in spack.yaml it comes from."""
    where: str
    text: str
    kind: str = "spec"        # spec | constraint


def _expand(items, definitions, where, path, included=False):
    """A definitions/specs list with `$name` and `$^name` references and
    matrices expanded; `path`: the file they come from (`included`: a file
    spack.yaml includes)."""
    out = []
    for i, item in enumerate(items):
        here = f"{where}[{i}]"
        if isinstance(item, dict) and "matrix" in item:
            out += _matrix(item, definitions, here, path, included)
            continue
        if isinstance(item, str) and item.startswith("$"):
            ref = item[1:]
            dep = ref.startswith("^")
            ref = ref.lstrip("^")
            if ref not in definitions:
                raise DataError(path, here, f"{item}: no definition named {ref!r}")
            out += [(w, ("^" + t) if dep else t) for w, t in definitions[ref]]
        elif isinstance(item, str):
            out.append(((path, here) if included else here, item))
        elif isinstance(item, list):
            out += _expand(item, definitions, here, path, included)
        else:
            raise DataError(path, here, f"expected a spec string, got {item!r}")
    return out


def _matrix(item, definitions, here, path, included=False):
    """A matrix entry: one spec per combination of its rows (none where a
    row is empty).  Where: the key, or (file, key) in an included file
    (the Checker names spack.yaml itself)."""
    rows = [_expand(row, definitions, f"{here}.matrix[{r}]", path, included)
            for r, row in enumerate(item["matrix"])]
    where = f"{here}.matrix"
    return [((path, where) if included else where, " ".join(t for _, t in combo))
            for combo in itertools.product(*rows)]


def add_definitions(definitions, entries, prefix, path, included=False):
    """Add a definitions list's named spec lists to `definitions`, in order
    (a list refers only to lists above it)."""
    for i, entry in enumerate(entries or []):
        for name, items in entry.items():
            if name == "when":
                continue
            definitions[name] = definitions.get(name, []) + _expand(
                items or [], definitions, f"{prefix}[{i}].{name}", path, included)
    return definitions


def environment_specs(env, path, included=()):
    """[(where, spec text)] of the root specs, with the definitions;
    `included`: [(file, its definitions list)], read before the manifest's
    own as Spack does."""
    definitions = {}
    for file, entries in included:
        add_definitions(definitions, entries, "definitions", file, included=True)
    add_definitions(definitions, env.get("definitions"), "spack.definitions", path)
    specs = []
    for i, item in enumerate(env.get("specs") or []):
        here = f"spack.specs[{i}]"
        if isinstance(item, dict) and "matrix" in item:
            specs += _matrix(item, definitions, here, path)
        elif isinstance(item, str):
            specs += [(here, t) for _, t in _expand([item], definitions, "spack.specs", path)]
        else:
            raise DataError(path, here, f"expected a spec or a matrix, got {item!r}")
    return definitions, specs


# ---- checks ------------------------------------------------------------------------

class Checker:
    def __init__(self, path, packages, facts_commit):
        self.path, self.packages, self.facts_commit = Path(path), packages, facts_commit
        self.problems = []
        self.seen = set()

    def problem(self, where, text, message, once=None):
        """One line per problem; a node's problem (`once`: the node) only
        where it first appears, usually its definition, not again in every
        spec built from it."""
        if once is not None:
            if (once, message) in self.seen:
                return
            self.seen.add((once, message))
        spec = f" '{text}'" if text else ""
        path = self.path
        if isinstance(where, tuple):        # in a file spack.yaml includes
            path, where = where
        line = f"{path}: {where}{spec}: {message}"
        if line not in self.problems:       # once, however many choices repeat it
            self.problems.append(line)

    def node_problem(self, node, where, text, message):
        self.problem(where, text, message, once=str(node))

    def defaults_of(self, name):
        pkg = self.packages.get(name)
        return pkg.defaults() if pkg else {}

    def is_virtual(self, name):
        return any(p.split("@")[0] == name for pkg in self.packages.values()
                   for p in pkg.provides)

    def check_spec(self, where, text, anonymous_ok=False):
        try:
            spec = spackspec.parse(text)
        except spackspec.SpecError as err:
            # a node's own error: once, where the node first appears
            self.problem(where, text, f"not a spec: {err}", once=err.node)
            return None
        if not spec.root.name and not anonymous_ok:
            self.problem(where, text, "a root spec needs a package name")
            return None
        for node in [spec.root] + spec.deps:
            if node.name:
                self.check_node(where, text, node)
        return spec

    def check_node(self, where, text, node):
        pkg = self.packages.get(node.name)
        if pkg is None:
            if not self.is_virtual(node.name):
                self.problem(where, text, f"unknown package {node.name!r} (neither in the "
                                          f"builtin facts nor the local repository)",
                             once=str(node))
            return
        if node.versions and not any(spackspec.version_satisfies(v, node.versions)
                                     for v in pkg.versions) \
                and not node.versions.lstrip("=") in pkg.versions:
            shown = ", ".join(pkg.versions[:8]) + (", ..." if len(pkg.versions) > 8 else "")
            self.problem(where, text, f"{node.name}@{node.versions}: no such version "
                                      f"(known: {shown})", once=str(node))
        for name, value in node.variants.items():
            if name not in spackspec.NON_VARIANTS:
                self.check_variant(where, text, node, pkg, name, value)

    def check_variant(self, where, text, node, pkg, name, value):
        defs = pkg.variants.get(name)
        if not defs:
            self.node_problem(node, where, text, f"{node.name} has no variant {name!r} "
                                      f"(variants: {', '.join(sorted(pkg.variants))})")
            return
        definition = defs[0]
        allowed = definition.get("values")
        boolean = is_boolean(definition)
        if isinstance(value, bool) or str(value).lower() in ("true", "false"):
            if not boolean and allowed is not None:
                self.node_problem(node, where, text, f"{node.name} variant {name} is not boolean: "
                                          f"give {name}=<{'|'.join(map(str, allowed))}>")
                return
        elif boolean:
            self.node_problem(node, where, text, f"{node.name} variant {name} is boolean: use +{name} "
                                      f"or ~{name}")
            return
        elif isinstance(allowed, list):
            chosen = str(value).split(",")
            bad = [v for v in chosen if v not in map(str, allowed)]
            if bad:
                self.node_problem(node, where, text, f"{node.name} variant {name}={value}: "
                                          f"{', '.join(map(repr, bad))} not allowed "
                                          f"(allowed: {', '.join(map(str, allowed))})")
                return
            if definition.get("multi") is False and len(chosen) > 1:
                self.node_problem(node, where, text, f"{node.name} variant {name} takes one value")
                return
            exclusive = [v for v in chosen if v in ("auto", "none")]
            if "disjoint_sets" in str(definition.get("values_expr", "")) and exclusive \
                    and len(chosen) > 1:
                self.node_problem(node, where, text, f"{node.name} variant {name}: {exclusive[0]} cannot "
                                          f"be combined with other values")
                return
        conditions = [d.get("when") for d in defs]
        if None not in conditions and not any(self.condition_holds(node, c) is not False
                                              for c in conditions):
            self.node_problem(node, where, text, f"{node.name} variant {name} exists only when "
                                      f"{' or '.join(conditions)}")

    def condition_holds(self, node, condition):
        try:
            wanted = spackspec.parse(str(condition)).root
        except spackspec.SpecError:
            return None
        return spackspec.node_satisfies(node, wanted, self.defaults_of(node.name))


def check_repos(env, path, checker, folder):
    repos = env.get("repos") or {}
    if isinstance(repos, list):
        repos = {f"[{i}]": r for i, r in enumerate(repos)}
    local = []
    for name, spec in repos.items():
        if isinstance(spec, str):
            repo = (folder / spec).resolve()
            if not (repo / "repo.yaml").exists():
                checker.problem(f"spack.repos.{name}", spec, "no repo.yaml there")
                continue
            namespace = validate(load_yaml(repo / "repo.yaml"), REPO_SCHEMA,
                                 repo / "repo.yaml")["repo"].get("namespace")
            if namespace != name and not name.startswith("["):
                checker.problem(f"spack.repos.{name}", spec,
                                f"the repository's namespace is {namespace!r}")
            local.append(repo)
        elif isinstance(spec, dict) and name == "builtin":
            pinned = spec.get("commit")
            if pinned != checker.facts_commit:
                checker.problem("spack.repos.builtin.commit", str(pinned),
                                f"the builtin facts are of commit {checker.facts_commit}: "
                                f"pin that one, or the check says nothing of the packages "
                                f"Spack will use")
    return local


def check_patches(pkg, checker):
    """Every patch file a local recipe names lies beside it: Spack says so
    only when it builds the package, on the cluster."""
    recipe = Path(pkg.source)
    for patch in pkg.patches:
        if not (recipe.parent / patch).is_file():
            checker.problem(str(recipe), patch, "no such patch file beside the recipe")


def view_folders(env, checker, root_specs):
    """{folder: [spec texts]} of the root specs under the view's projections."""
    view = env.get("view")
    if not isinstance(view, dict):
        checker.problem("spack.view", "", "one view with projections is needed: "
                                          "views/<mpi>-<fabric> per MPI build")
        return {}
    folders = {}
    for vname, settings in view.items():
        projections = settings.get("projections") or {}
        rules = []
        for key, folder in projections.items():
            where = f"spack.view.{vname}.projections"
            if key == "all":
                rules.append((None, folder))
            else:
                spec = checker.check_spec(where, key, anonymous_ok=True)
                if spec:
                    rules.append((spec, folder))
        for where, text, spec in root_specs:
            folder = next((f for rule, f in rules if rule is None
                           or spackspec.satisfies(spec, rule, checker.defaults_of)), None)
            if folder is not None:
                folders.setdefault(folder, []).append((where, text, spec))
    return folders


def check_views(env, checker, root_specs):
    """Each MPI build in a folder of its own; each benchmark with its MPI."""
    folders = view_folders(env, checker, root_specs)
    mpi_names = {name for name, pkg in checker.packages.items()
                 if any(p.split("@")[0] == MPI_PROVIDERS_VIRTUAL for p in pkg.provides)}
    builds = {}
    for folder, entries in folders.items():
        mpis = [(w, t) for w, t, s in entries if s.root.name in mpi_names]
        if len(mpis) > 1:
            checker.problem("spack.view", "", f"view folder {folder!r} gets "
                                              f"{len(mpis)} MPI builds: "
                                              f"{'; '.join(t for _, t in mpis)}")
        # a literal folder right under views/ is an environment (a template
        # or a nested folder is not discovered as one)
        literal = not any(c in folder for c in "/{")
        if mpis and literal and not re.fullmatch(discovery.ENVIRONMENT_NAME, folder):
            checker.problem("spack.view", "", f"view folder {folder!r} of "
                                              f"{mpis[0][1]}: an MPI's folder name is its "
                                              f"ReFrame environment's: letters, digits, _ "
                                              f"and -, starting with a letter or _")
        for w, t in mpis:
            builds[t] = folder
    parsed = {t: spackspec.parse(t) for t in builds}     # once, not per benchmark
    for folder, entries in folders.items():
        for where, text, spec in entries:
            if spec.root.name in mpi_names:
                continue
            home = next((f for t, f in builds.items() if built_with(spec, parsed[t])), None)
            if home is not None and home != folder:
                checker.problem(where, text, f"lands in view folder {folder!r}, its MPI "
                                             f"in {home!r}")
    return {f: [t for _, t, _ in e] for f, e in folders.items()}, builds


def built_with(spec, build):
    """Is `spec` (a benchmark) built against the MPI build `build`: the
    build's root and its dependencies among the spec's `^` nodes?"""
    return build.root in spec.deps and all(d in spec.deps for d in build.deps)


def fabric_choices(env, path):
    """[(label, [(file, its definitions)])]: one per conditional include
    (a site's fabric), each with the unconditional includes; one unlabelled
    choice where spack.yaml has no conditional include."""
    always, choices = [], []
    for i, entry in enumerate(env.get("include") or []):
        entry = {"path": entry} if isinstance(entry, str) else entry
        where = f"spack.include[{i}].path"
        if "://" in entry["path"] or "$" in entry["path"]:
            raise DataError(path, where, f"{entry['path']}: spack-check reads local "
                                         f"files named as they are")
        file = path.parent / entry["path"]
        if not file.is_file():
            if entry.get("optional"):
                continue
            raise DataError(path, where, f"{entry['path']}: no such file")
        data = validate(load_yaml(file) or {}, INCLUDED_SCHEMA, file)
        included = (file, data.get("definitions") or [])
        if "when" in entry:
            choices.append((f"{entry['path']} (when {entry['when']})", included))
        else:
            always.append(included)
    if not choices:
        return [("", always)]
    return [(label, always + [included]) for label, included in choices]


def check(path=SPACK_YAML, facts=FACTS):
    """(problems, summary) of one spack.yaml: the summary of its first
    fabric choice, with every choice's under "choices"."""
    path = Path(path)
    data = load_yaml(path)
    env = data.get("spack")
    if not isinstance(env, dict):
        raise DataError(path, "spack", "missing: a Spack environment file has a top-level "
                                       "`spack:` mapping")
    validate(env, ENV_SCHEMA, path, where=("spack",))
    packages, commit = load_facts(facts)
    checker = Checker(path, packages, commit)
    for repo in check_repos(env, path, checker, path.parent):
        for name, pkg in load_local_repo(repo).items():
            packages.setdefault(name, pkg)
            check_patches(pkg, checker)
    for name, entry in (env.get("develop") or {}).items():
        checker.check_spec(f"spack.develop.{name}.spec", entry.get("spec", ""))
        if not (path.parent / entry.get("path", name)).exists():
            checker.problem(f"spack.develop.{name}.path", entry.get("path", ""), "no such folder")
    for mset, settings in ((env.get("modules") or {}).items()):
        for tool in ("lmod", "tcl"):
            for key in ((settings or {}).get(tool) or {}).get("projections") or {}:
                if key != "all":
                    checker.check_spec(f"spack.modules.{mset}.{tool}.projections", key,
                                       anonymous_ok=True)
    choices = {label: check_choice(env, path, checker, included)
               for label, included in fabric_choices(env, path)}
    summary = dict(next(iter(choices.values())))
    summary["choices"] = choices
    return checker.problems, summary


def check_choice(env, path, checker, included):
    """The summary of the environment with one fabric choice's includes."""
    definitions, specs = environment_specs(env, path, included)
    for name, items in definitions.items():
        for where, text in items:
            checker.check_spec(where, text.lstrip("^"))
    root_specs = []
    for where, text in specs:
        spec = checker.check_spec(where, text)
        if spec:
            root_specs.append((where, text, spec))
    unify = (env.get("concretizer") or {}).get("unify", True)
    names = [s.root.name for _, _, s in root_specs]
    if unify is True and len(names) != len(set(names)):
        checker.problem("spack.concretizer.unify", "", "several builds of one package "
                                                       "cannot concretize together: use "
                                                       "false or when_possible")
    if checker.problems:
        # a spec already refused: where it lands would only repeat it
        return {"specs": len(root_specs), "mpi_builds": {}, "folders": {}}
    folders, builds = check_views(env, checker, root_specs)
    check_fabrics(checker, builds, {t: s for _, t, s in root_specs})
    return {"specs": len(root_specs), "mpi_builds": builds, "folders": folders}


#: what an MPI build in a view folder `<mpi>-<fabric>` must link, per
#: fabric of data/fabrics.yaml: (package, does it carry an RDMA transport)
FABRIC_LIBRARY = {"ofi": ("libfabric", True), "ucx": ("ucx", True), "tcp": ("libfabric", False)}
#: UCX variants that build a transport of the InfiniBand/RoCE fabric
UCX_RDMA_VARIANTS = ("verbs",)


def carries_rdma(node):
    """Does a libfabric or UCX node name a transport of an RDMA fabric?"""
    if node.name == "libfabric":
        return bool(set(str(node.variants.get("fabrics", "")).split(","))
                    & fabric.RDMA_PROVIDERS)
    return any(node.variants.get(v) is True for v in UCX_RDMA_VARIANTS)


def check_fabrics(checker, builds, specs):
    """Each MPI build's folder names a fabric netbench's discovery knows
    (its transports come from data/fabrics.yaml), and the build links the
    library that fabric runs on, carrying (or, for tcp, not carrying) an
    RDMA provider."""
    known = discovery.load_fabrics()
    for text, folder in builds.items():
        suffix = folder.rsplit("-", 1)[-1]
        if "-" not in folder or suffix not in known:
            checker.problem("spack.view", text, f"view folder {folder!r}: an MPI build's "
                                                f"folder is <mpi>-<fabric>, the fabric one of "
                                                f"{', '.join(known)} (data/fabrics.yaml)")
            continue
        if suffix not in FABRIC_LIBRARY:
            continue
        package, rdma = FABRIC_LIBRARY[suffix]
        node = specs[text].dependency(package)
        if node is None:
            checker.problem("spack.view", text, f"lands in views/{folder} but names no "
                                                f"^{package}: its fabric's library")
        elif carries_rdma(node) != rdma:
            wanted = "an RDMA provider" if rdma else "no RDMA provider"
            checker.problem("spack.view", text, f"lands in views/{folder}, whose transports "
                                                f"need {package} with {wanted} "
                                                f"({'/'.join(sorted(fabric.RDMA_PROVIDERS))})")


def main(path, facts):
    try:
        problems, summary = check(path or SPACK_YAML, facts or FACTS)
    except DataError as err:
        print(f"netbench: {err}", file=sys.stderr)
        return exitcodes.INVALID_INPUT
    for line in problems:
        print(line, file=sys.stderr)
    if problems:
        print(f"netbench spack-check: {len(problems)} problem(s)", file=sys.stderr)
        return exitcodes.INVALID_INPUT      # invalid input, as `references` says it
    for label, choice in summary["choices"].items():
        fabric_choice = f" with {label}" if label else ""
        print(f"netbench spack-check: {path or SPACK_YAML}{fabric_choice}: {choice['specs']} "
              f"root specs, {len(choice['mpi_builds'])} MPI builds, each in its own view "
              f"folder:")
        for spec, folder in choice["mpi_builds"].items():
            count = len(choice["folders"][folder]) - 1
            print(f"  views/{folder}: {spec} and {count} benchmark(s)")
    return 0
