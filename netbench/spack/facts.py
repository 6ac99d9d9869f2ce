"""What netbench knows of Spack packages without Spack: the facts of Spack's
builtin repository (versions, variants, what each provides) from
`netbench/data/spack-builtin-packages.json`, and the same read from the
`version()`, `variant()` and `provides()` directives of a local repository's
package.py files (parsed, never executed: they import Spack).  Used by
spackcheck, which checks spack.yaml against them."""

import ast
from dataclasses import dataclass, field
from pathlib import Path

from .. import paths
from ..datafiles import DataError, load_json, validate

#: versions and variants of the packages spack.yaml uses, from Spack's builtin
#: repository at the commit in the file (a copy of the project's
#: ../shared/spack/builtin-packages.json, so the check works in any checkout)
FACTS = paths.DATA / "spack-builtin-packages.json"

_STRING = {"type": "string"}
_STRINGS = {"type": "array", "items": _STRING}

#: the package facts of Spack's builtin repository (FACTS)
FACTS_SCHEMA = {
    "type": "object",
    "required": ["packages"],
    "properties": {
        "commit": _STRING,
        "packages": {"type": "object", "additionalProperties": {
            "type": "object",
            "properties": {
                "versions": _STRINGS,
                "provides": _STRINGS,
                "variants": {"type": "object", "additionalProperties": {
                    "type": "array", "minItems": 1, "items": {
                        "type": "object",
                        "properties": {"multi": {"type": "boolean"}, "when": _STRING,
                                       "values": {"type": "array"},
                                       "values_expr": _STRING}}}}}}},
    },
}
#: a package repository's repo.yaml
REPO_SCHEMA = {
    "type": "object",
    "required": ["repo"],
    "properties": {"repo": {"type": "object", "properties": {"namespace": _STRING}}},
}


@dataclass
class Package:
    name: str
    versions: list
    variants: dict          # name -> [definition dicts: default, values, multi, when]
    provides: list = field(default_factory=list)
    source: str = "builtin"
    #: the patch files a local recipe names (`patch("file")`), beside it
    patches: list = field(default_factory=list)

    def defaults(self):
        """Variant defaults: a bool, a value string, or None where the
        default is an expression Spack evaluates (e.g. per platform)."""
        out = {}
        for name, defs in self.variants.items():
            default = defs[0].get("default")
            if is_boolean(defs[0]):
                out[name] = default if isinstance(default, bool) else None
            else:
                out[name] = None if default is None else str(default)
        return out


def is_boolean(definition):
    return "values" not in definition and "values_expr" not in definition


# ---- package facts ----------------------------------------------------------------

def load_facts(path=FACTS):
    data = validate(load_json(path), FACTS_SCHEMA, path)
    packages = {name: Package(name, spec.get("versions", []), spec.get("variants", {}),
                              spec.get("provides", []))
                for name, spec in data.get("packages", {}).items()}
    return packages, data.get("commit", "")


def _literal(node):
    try:
        return ast.literal_eval(node)
    except ValueError:
        return ast.unparse(node)          # an expression Spack evaluates


def load_local_repo(folder):
    """Packages of a Spack repository read from their package.py files: the
    `version()`, `variant()`, `provides()` and `patch()` directives (never
    executed: they import Spack)."""
    folder = Path(folder)
    packages = {}
    for recipe in sorted(folder.glob("packages/*/package.py")):
        name = recipe.parent.name.replace("_", "-")
        versions, variants, provides, patches = [], {}, [], []
        try:
            tree = ast.parse(recipe.read_bytes(), str(recipe))
        except SyntaxError as err:      # also undecodable bytes (PEP 263)
            raise DataError(recipe, None, f"line {err.lineno}: {err.msg}") from err
        except ValueError as err:       # NUL bytes
            raise DataError(recipe, None, f"not Python source: {err}") from err
        for call in ast.walk(tree):
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)):
                continue
            args = [_literal(a) for a in call.args]
            kwargs = {k.arg: _literal(k.value) for k in call.keywords}
            if call.func.id == "version" and args:
                versions.append(str(args[0]))
            elif call.func.id == "variant" and args:
                definition = {k: kwargs[k] for k in ("default", "values", "multi", "when")
                              if k in kwargs}
                if isinstance(definition.get("values"), tuple):
                    definition["values"] = list(definition["values"])
                variants.setdefault(args[0], []).append(definition)
            elif call.func.id == "provides" and args:
                provides.append(str(args[0]))
            elif call.func.id == "patch" and args and "://" not in str(args[0]):
                patches.append(str(args[0]))
        packages[name] = Package(name, versions, variants, provides, source=str(recipe),
                                 patches=patches)
    return packages
