"""Reading netbench's data files (YAML, JSON) with errors that name file
and key.

Types are checked where the data is read: `validate` holds a parsed file
against a JSON Schema (the `jsonschema` library) and turns the first
violation into one line, `<file>: <dotted key>: <what was expected>`;
`require` does the same for one key where a whole schema would be more
than the check.
"""

import json
import math
import re

import jsonschema
import yaml


class DataError(Exception):
    """A data file is unreadable or malformed; str() is one line naming
    the file and the offending key."""

    def __init__(self, path, key, problem):
        self.path, self.key, self.problem = str(path), key, problem
        where = f"{self.path}: {key}" if key else self.path
        super().__init__(f"{where}: {problem}")


def read_bytes(path):
    """The bytes of `path`, or DataError."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as err:
        raise DataError(path, None, f"cannot read: {err.strerror}") from err


def _read_text(path, raw=None):
    raw = read_bytes(path) if raw is None else raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise DataError(path, None, f"not UTF-8 text (byte {err.start}: "
                                    f"{raw[err.start:err.start + 1]!r})") from err


def load_yaml(path, top=dict):
    """The parsed document in `path` (a mapping unless `top` says otherwise),
    or DataError."""
    text = _read_text(path)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = f"line {mark.line + 1}: " if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise DataError(path, None, f"{line}invalid YAML: {problem}") from err
    return _top_level(data, top, path)


def load_json(path, top=dict, raw=None):
    """The parsed JSON document in `path` (or in `raw`, its bytes as read
    already), or DataError."""
    text = _read_text(path, raw)
    try:
        data = json.loads(text)
    except ValueError as err:
        raise DataError(path, None, f"invalid JSON: {err}") from err
    except RecursionError as err:
        raise DataError(path, None, "nested too deeply to read (thousands of levels of "
                                    "[ or {): not a report netbench wrote") from err
    return _top_level(data, top, path)


def _top_level(data, top, path):
    if top is not None and not isinstance(data, top):
        expected = {dict: "a mapping", list: "a list"}.get(top, top.__name__)
        raise DataError(path, None, f"expected {expected} at the top level, got "
                                    f"{type(data).__name__}")
    return data


def dotted(parts):
    """['classes', 'veth', 'rows', 3, 'id'] -> 'classes.veth.rows[3].id'."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _finite_numbers(checker, instance):
    """JSON Schema's `number`, without booleans, NaN or infinity (YAML's
    .nan and .inf parse as floats, and ReFrame fails on them much later)."""
    return (isinstance(instance, (int, float)) and not isinstance(instance, bool)
            and math.isfinite(instance))


_TYPES = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("number", _finite_numbers)
Validator = jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=_TYPES)


def validate(data, schema, path, where=()):
    """`data` (read from `path`) against a JSON Schema; DataError naming the
    file, the dotted key of the first violation and what was expected.
    `where`: the key path of `data` inside the file."""
    try:
        errors = sorted(Validator(schema).iter_errors(data),
                        key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    except RecursionError as err:
        raise DataError(path, dotted(where) or None, "nested too deeply to check") from err
    if not errors:
        return data
    error = jsonschema.exceptions.best_match(errors)
    parts = list(where) + list(error.absolute_path)
    if error.validator == "required":          # name the missing key itself
        missing = re.search(r"'([^']+)' is a required property", error.message)
        return_key = parts + [missing.group(1)] if missing else parts
        raise DataError(path, dotted(return_key) or None, "missing")
    if error.validator == "additionalProperties":
        extra = re.findall(r"'([^']+)'", error.message.split("(")[-1])
        allowed = ", ".join(sorted(error.schema.get("properties", {})))
        raise DataError(path, dotted(parts + extra[:1]) or None,
                        f"unknown key (known: {allowed})")
    problem = error.schema.get("description") if error.validator in ("pattern", "enum") \
        and error.schema.get("description") else _short(error)
    raise DataError(path, dotted(parts) or None, problem)


#: JSON Schema's type names as a YAML author knows them
_TYPE_NAMES = {"number": "a finite number", "integer": "an integer", "string": "a string",
               "object": "a mapping", "array": "a list", "boolean": "true or false"}


def _short(error):
    """jsonschema's message, shortened to what the user needs: the value is
    repeated only when short."""
    value = repr(error.instance)
    value = value if len(value) <= 60 else value[:57] + "..."
    kind = type(error.instance).__name__
    if error.validator == "type":
        expected = error.validator_value
        expected = expected if isinstance(expected, list) else [expected]
        expected = " or ".join(_TYPE_NAMES.get(e, e) for e in expected)
        return f"expected {expected}, got {kind} {value}"
    if error.validator == "enum":
        return f"{value}: use one of {', '.join(map(str, error.validator_value))}"
    message = error.message
    if message.startswith(repr(error.instance)):
        message = message[len(repr(error.instance)):]
    return f"{value}: {message.strip()}"


def require(mapping, key, kind, path, where):
    """mapping[key], checked to be of `kind`; `where` is the dotted key path
    used in the error message."""
    full = f"{where}.{key}" if where else key
    if not isinstance(mapping, dict):
        raise DataError(path, where or None,
                        f"expected a mapping, got {type(mapping).__name__} {mapping!r}")
    if key not in mapping:
        raise DataError(path, full, "missing")
    value = mapping[key]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        name = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise DataError(path, full, f"expected {name}, got {type(value).__name__} {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise DataError(path, full, f"expected a finite number, got {value!r}")
    return value
