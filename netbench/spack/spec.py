"""Spack spec syntax, enough to validate an environment without Spack:
`name@versions +bool ~bool key=value ^dep ...`, and the two questions
netbench asks of specs: does a version match a constraint, does a spec
satisfy an anonymous constraint (view projections, variant conditions).

Spack's own parser is the authority; this covers the subset spack.yaml
files use and rejects what it does not understand, never guesses.
"""

import re
from dataclasses import dataclass, field

#: versions Spack orders after every numbered release
INFINITY_VERSIONS = ("develop", "main", "master", "head", "trunk", "stable")
TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<dep>\^)
  | (?P<compiler>%%?\s*[\w.+-]+(?:@[\w.:,=-]+)?)
  | (?P<kv>(?P<key>[A-Za-z_][\w-]*)(?P<eq>==?)(?P<value>[^\s^%~+@]*))
  | (?P<version>@=?[\w.:,=-]+)
  | (?P<bool>(?:\+\+|~~|\+|~)[A-Za-z_][\w-]*)
  | (?P<hash>/[a-z0-9]+)
  | (?P<name>[A-Za-z0-9_][\w.-]*)
""", re.VERBOSE)
#: spec attributes that are not package variants
NON_VARIANTS = {"arch", "target", "os", "platform", "namespace", "dev_path", "patches",
                "commit", "cflags", "cxxflags", "fflags", "cppflags", "ldflags", "ldlibs"}
#: attributes whose values add up when given twice (Spack joins compiler flags)
FLAGS = {"cflags", "cxxflags", "fflags", "cppflags", "ldflags", "ldlibs"}


class SpecError(ValueError):
    """`node`: the text of the node at fault, where the error is its own
    (a variant given twice), so that it can be reported once however many
    specs repeat that node."""

    def __init__(self, message, node=None):
        super().__init__(message)
        self.node = node


@dataclass
class Node:
    """One package of a spec: the root or a `^` dependency."""
    name: str = ""                     # empty for an anonymous constraint
    versions: str = ""                 # text after @, "" when unconstrained
    variants: dict = field(default_factory=dict)   # name -> True/False/str

    def __str__(self):
        text = self.name + (f"@{self.versions}" if self.versions else "")
        for key, value in self.variants.items():
            text += f" +{key}" if value is True else f" ~{key}" if value is False \
                else f" {key}={value}"
        return text.strip()


@dataclass
class Spec:
    root: Node
    deps: list = field(default_factory=list)

    def dependency(self, name):
        return next((d for d in self.deps if d.name == name), None)


def parse(text):
    """The Spec of `text`; SpecError naming what could not be read, or a
    variant a node gives twice (Spack refuses `+slurm +slurm ~slurm`)."""
    root, deps, node = Node(), [], None
    node = root
    given = {}              # variant -> the token that set it, for the current node
    pos = start = 0         # start: where the current node's text begins
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if not m:
            raise SpecError(f"cannot read {text[pos:]!r}")
        pos = m.end()
        kind = m.lastgroup if m.lastgroup not in ("key", "eq", "value") else "kv"
        if kind in ("ws", "compiler", "hash"):
            continue            # compilers and hashes are not checked here
        if kind == "dep":
            node = Node()
            deps.append(node)
            given, start = {}, m.end()
        elif kind == "name":
            if node.name or node.versions or node.variants:
                raise SpecError(f"{m.group()!r} after {node}: one name per node "
                                f"(a dependency needs ^)")
            node.name = m.group()
        elif kind == "version":
            node.versions = m.group()[1:]
        elif kind == "bool":
            token = m.group().lstrip("+~")
            _once(given, node, token, m.group(), m.group().startswith("+"), text[start:])
            node.variants[token] = m.group().startswith("+")
        else:
            if not m.group("value"):
                raise SpecError(f"{m.group()!r}: no value")
            if m.group("key") not in FLAGS:
                _once(given, node, m.group("key"), m.group(), m.group("value"), text[start:])
            node.variants[m.group("key")] = m.group("value")
    if any(not d.name for d in deps):
        raise SpecError("^ without a package name")
    return Spec(root, deps)


def _once(given, node, name, token, value, rest):
    """SpecError when `node` already set variant `name`; `given` holds the
    token that set each of the node's variants, `rest` the spec's text from
    the node on."""
    if name in node.variants:
        same = str(node.variants[name]).lower() == str(value).lower()
        raise SpecError(f"variant {name} {'given twice' if same else 'contradicts itself'}: "
                        f"{given[name]} and {token}"
                        f"{' (' + node.name + ')' if node.name else ''}",
                        node=rest.split("^")[0].strip())
    given[name] = token


# ---- versions -----------------------------------------------------------------

def version_key(text):
    """A sortable key; the infinity names sort after every number."""
    if text in INFINITY_VERSIONS:
        return ((2, INFINITY_VERSIONS[::-1].index(text)),)
    return tuple((1, int(p)) if p.isdigit() else (0, p) for p in re.split(r"[._-]", text))


def _prefix(version, bound):
    key, b = version_key(version), version_key(bound)
    return key[:len(b)] == b


def version_satisfies(version, constraint):
    """Does `version` (one known version) lie in `constraint` (Spack syntax:
    `1.2` means 1.2 and 1.2.x, `=1.2` exactly 1.2, `1.2:1.4`, `1.2:`,
    `:1.4`, lists with commas)."""
    for part in constraint.split(","):
        if part.startswith("="):
            if version == part[1:]:
                return True
        elif ":" in part:
            lo, hi = part.split(":", 1)
            if (not lo or version_key(version) >= version_key(lo)) and \
                    (not hi or version_key(version) <= version_key(hi) or _prefix(version, hi)):
                return True
        elif version == part or _prefix(version, part):
            return True
    return False


def exact_version(constraint):
    """The single version a constraint pins (`5.0.1`, `=main`), else None."""
    if not constraint or "," in constraint or ":" in constraint:
        return None
    return constraint.lstrip("=")


# ---- satisfying constraints -----------------------------------------------------

def variant_value(node, name, defaults):
    """The node's value of a variant: set explicitly or the package's
    default (None where unknown)."""
    if name in node.variants:
        return node.variants[name]
    return defaults.get(name)


def value_matches(actual, wanted):
    """A variant value against a constraint: booleans equal, strings as
    value sets (a multi-valued constraint is met by a superset)."""
    if actual is None:
        return None                       # unknown: cannot decide
    if isinstance(wanted, bool) or isinstance(actual, bool):
        truth = {"true": True, "false": False}
        a = truth.get(str(actual).lower(), actual) if not isinstance(actual, bool) else actual
        w = truth.get(str(wanted).lower(), wanted) if not isinstance(wanted, bool) else wanted
        return a == w
    return set(str(wanted).split(",")) <= set(str(actual).split(","))


def node_satisfies(node, constraint, defaults):
    """True, False, or None (undecidable without concretizing)."""
    if constraint.name and constraint.name != node.name:
        return False
    verdicts = []
    if constraint.versions:
        pinned = exact_version(node.versions)
        verdicts.append(version_satisfies(pinned, constraint.versions) if pinned else None)
    for name, wanted in constraint.variants.items():
        verdicts.append(value_matches(variant_value(node, name, defaults), wanted))
    if False in verdicts:
        return False
    return None if None in verdicts else True


def satisfies(spec, constraint, defaults_of):
    """Does `spec` satisfy the anonymous or named `constraint` (a view
    projection key, say)?  `defaults_of(name)` gives a package's variant
    defaults.  Undecidable parts count as not satisfied."""
    if constraint.root.name or constraint.root.versions or constraint.root.variants:
        if node_satisfies(spec.root, constraint.root, defaults_of(spec.root.name)) is not True:
            return False
    for want in constraint.deps:
        have = spec.dependency(want.name)
        if have is None or node_satisfies(have, want, defaults_of(want.name)) is not True:
            return False
    return True
