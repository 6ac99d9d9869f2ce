"""Reading netbench's data files (YAML, JSON) with errors that name file
and key.

Types are checked where the data is read: `validate` holds a parsed file
against a JSON Schema (the `jsonschema` library) and turns the first
violation into one line, `<file>: <dotted key>: <what was expected>`;
`require` does the same for one key where a whole schema would be more
than the check.
"""

import errno
import json
import math
import os
import re
import stat

import jsonschema
import yaml

from .safefile import invoking_uid


class DataError(Exception):
    """A data file is unreadable or malformed; str() is one line naming
    the file and the offending key."""

    def __init__(self, path, key, problem):
        self.path, self.key, self.problem = str(path), key, problem
        where = f"{self.path}: {key}" if key else self.path
        super().__init__(f"{where}: {problem}")


#: the most netbench reads of each kind of file, in MiB: generous for real
#: use (a run report of a 1000-node sweep holds a million pairs, a few
#: hundred MB), small enough that a wrong or hostile path (/dev/zero, a
#: file of gigabytes) is refused before it is read
READ_LIMITS_MIB = {
    "data": 16,            # netbench's own data, references, profiles, baselines
    "site": 4,             # a real cluster's site file
    "topology": 16,        # topology.conf or netbench's topology YAML
    "suspects": 32,        # a session's suspects.json
    "record": 64,          # provenance, summary, findings, tuning and resume records
    "run-report": 1024,    # ReFrame's run report, every case's record in it
}
MIB = 1 << 20


def read_limit(kind):
    """The most bytes netbench reads of a file of `kind` (READ_LIMITS_MIB)."""
    return READ_LIMITS_MIB[kind] * MIB


_FILE_TYPES = {stat.S_IFDIR: "a directory", stat.S_IFCHR: "a character device",
               stat.S_IFBLK: "a block device", stat.S_IFIFO: "a FIFO",
               stat.S_IFSOCK: "a socket", stat.S_IFLNK: "a symbolic link"}


def read_bytes(path, kind="data", follow=True):
    """The bytes of `path`, a regular file of at most READ_LIMITS_MIB[kind],
    or DataError.  Opened without blocking (a FIFO is refused, not waited
    on), checked on the open descriptor (no stat-then-open race), and read
    to at most the limit and one byte; `follow=False` refuses a symbolic
    link (a file netbench wrote itself is never one)."""
    limit = read_limit(kind)
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as err:
        if err.errno == errno.ELOOP and not follow:
            raise DataError(path, None, "not a regular file (a symbolic link)") from err
        raise DataError(path, None, f"cannot read: {err.strerror}") from err
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            what = _FILE_TYPES.get(stat.S_IFMT(info.st_mode), "another kind of file")
            raise DataError(path, None, f"not a regular file ({what})")
        if info.st_size > limit:
            raise DataError(path, None, too_large(kind))
        with os.fdopen(fd, "rb", closefd=False) as f:
            raw = f.read(limit + 1)
    except OSError as err:
        raise DataError(path, None, f"cannot read: {err.strerror}") from err
    finally:
        os.close(fd)
    if len(raw) > limit:                       # it grew while read
        raise DataError(path, None, too_large(kind))
    return raw


def too_large(kind):
    return (f"larger than {READ_LIMITS_MIB[kind]} MiB (the most netbench reads of a {kind} "
            f"file)")


def _read_text(path, raw=None, kind="data"):
    raw = read_bytes(path, kind) if raw is None else raw
    if isinstance(raw, str):
        return raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise DataError(path, None, f"not UTF-8 text (byte {err.start}: "
                                    f"{raw[err.start:err.start + 1]!r})") from err


def load_yaml(path, top=dict, kind="data"):
    """The parsed document in `path` (a mapping unless `top` says otherwise;
    `kind`: the file's kind, its size limit), or DataError."""
    text = _read_text(path, kind=kind)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = f"line {mark.line + 1}: " if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise DataError(path, None, f"{line}invalid YAML: {problem}") from err
    return _top_level(data, top, path)


def text_of(path, raw):
    """`raw`, the bytes read from `path`, as text (UTF-8), or DataError."""
    return _read_text(path, raw)


def load_json(path, top=dict, raw=None, kind="data"):
    """The parsed JSON document in `path` (or in `raw`, its bytes or text
    as read already; `kind`: the file's kind, its size limit), or
    DataError."""
    text = _read_text(path, raw, kind)
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


class _Unsupported(Exception):
    """A schema keyword (or value) `plainly_valid` does not decide."""


#: keywords that say nothing about validity
_ANNOTATIONS = {"description", "title", "$comment", "default", "examples"}


def _is_type(value, name):
    """JSON Schema's types as Validator checks them (`number` finite)."""
    if name == "object":
        return type(value) is dict
    if name == "array":
        return type(value) is list
    if name == "string":
        return type(value) is str
    if name == "null":
        return value is None
    if name == "boolean":
        return type(value) is bool
    if name == "number":
        return type(value) in (int, float) and math.isfinite(value)
    if name == "integer":
        return type(value) is int or (type(value) is float and value.is_integer())
    raise _Unsupported(name)


def plainly_valid(data, schema):
    """Whether `data` holds to `schema`, decided by plain Python for the
    keywords netbench's schemas use, as Validator decides it; _Unsupported
    for any other keyword.  Validator walks a large run report's records at
    a few microseconds a node; this at a fraction of it (validate asks it
    first and Validator only to name a fault)."""
    if schema is True or schema == {}:
        return True
    if schema is False:
        return False
    if type(schema) is not dict:
        raise _Unsupported(schema)
    for key, rule in schema.items():
        if key in _ANNOTATIONS or key in ("properties", "additionalProperties"):
            continue
        if key == "type":
            names = [rule] if type(rule) is str else rule
            if not any(_is_type(data, name) for name in names):
                return False
        elif key == "required":
            if type(data) is dict and not all(k in data for k in rule):
                return False
        elif key == "enum":
            if not all(type(v) is str for v in rule):
                raise _Unsupported(key)
            if data not in rule if type(data) is str else True:
                return False
        elif key in ("items", "prefixItems"):
            if type(data) is list:
                start = len(schema.get("prefixItems", ())) if key == "items" else 0
                rules = [rule] * (len(data) - start) if key == "items" else rule
                if not all(plainly_valid(item, sub)
                           for item, sub in zip(data[start:], rules)):
                    return False
        elif key in ("minItems", "maxItems"):
            if type(data) is list and (len(data) < rule if key == "minItems"
                                       else len(data) > rule):
                return False
        elif key in ("minimum", "maximum"):
            if type(data) in (int, float) and (data < rule if key == "minimum"
                                               else data > rule):
                return False
        elif key == "pattern":
            if type(data) is str and not re.search(rule, data):
                return False
        elif key == "anyOf":
            if not any(plainly_valid(data, sub) for sub in rule):
                return False
        else:
            raise _Unsupported(key)
    if type(data) is dict and ("properties" in schema or "additionalProperties" in schema):
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for k, value in data.items():
            if not plainly_valid(value, properties[k] if k in properties else extra):
                return False
    return True


def first_violation(data, schema, path, where=()):
    """jsonschema's best match among the ways `data` (read from `path`;
    `where`: its key path there) breaks `schema`, or None when it holds:
    plainly_valid decides first, Validator only where it cannot or to name
    the fault."""
    try:
        if plainly_valid(data, schema):
            return None
    except (_Unsupported, OverflowError, RecursionError):
        pass            # Validator decides
    try:
        errors = sorted(Validator(schema).iter_errors(data),
                        key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    except RecursionError as err:
        raise DataError(path, dotted(where) or None, "nested too deeply to check") from err
    return jsonschema.exceptions.best_match(errors) if errors else None


def validate(data, schema, path, where=()):
    """`data` (read from `path`) against a JSON Schema; DataError naming the
    file, the dotted key of the first violation and what was expected.
    `where`: the key path of `data` inside the file."""
    error = first_violation(data, schema, path, where)
    if error is None:
        return data
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


# ---- files a user named, read as root: errors that never quote them ---------

def checked_unquoted(path, schema, load=None):
    """The document in `path` (read by `load`, default load_yaml) held to
    `schema`, for a file a user named that netbench reads as root (a site's
    judging profile): DataError naming the file, the line or the schema's
    own keys and what was expected, and never a line, key or value of the
    file, which need not be what the user thought (/etc/shadow is valid
    YAML).  `schema` closes every mapping (additionalProperties: false), so
    the keys a violation's path holds are the schema's."""
    try:
        data = (load or load_yaml)(path)
    except DataError as err:
        raise unquoted(err) from err
    error = first_violation(data, schema, path)
    if error is None:
        return data
    raise DataError(path, dotted(error.absolute_path) or None, _unquoted_problem(error))


def caller_may_read(path):
    """Whether the user who ran netbench (through sudo, the one sudo names)
    could read `path` without it, by the file's mode bits: an error may
    quote a file only then.  Group rights count as none (a conservative
    no); netbench run by root itself may read anything."""
    uid = invoking_uid()
    if uid == 0:
        return True
    try:
        info = os.stat(path)
    except OSError:
        return True             # nothing was read: the error quotes nothing
    return bool(info.st_mode & (0o400 if info.st_uid == uid else 0o004))


def without_contents(err, what):
    """`err`, read from a file that must not be quoted, as one line naming
    the file, the line where known and `what` the file was not."""
    line = err.key if re.fullmatch(r"line \d+", str(err.key)) else None
    return DataError(err.path, line, f"not {what}")


def unquoted(err):
    """A DataError of reading or parsing a file, without the file's text:
    a YAML or JSON parser's problem quotes the characters it met, a
    decoding error the byte.  What reading says (cannot read, its type at
    the top level, its size) quotes nothing and stays."""
    cause = err.__cause__
    if isinstance(cause, yaml.YAMLError):
        mark = getattr(cause, "problem_mark", None)
        line = f"line {mark.line + 1}: " if mark else ""
        return DataError(err.path, None, f"{line}not valid YAML")
    if isinstance(cause, UnicodeDecodeError):
        return DataError(err.path, None, f"not UTF-8 text (byte {cause.start})")
    if isinstance(cause, json.JSONDecodeError):
        return DataError(err.path, None, f"line {cause.lineno}: not valid JSON")
    return err


def _unquoted_problem(error):
    """What `error` (a jsonschema violation) expected, in the schema's words
    only: never the value met, nor an unknown key's name."""
    rule = error.validator_value
    if error.validator == "additionalProperties":
        known = ", ".join(sorted(error.schema.get("properties", {})))
        return f"an unknown key (known: {known})"
    if error.validator == "required":
        return f"a required key is missing ({', '.join(rule)})"
    if error.validator == "type":
        names = rule if isinstance(rule, list) else [rule]
        return (f"expected {' or '.join(_TYPE_NAMES.get(n, n) for n in names)}, got "
                f"{_TYPE_NAMES.get(_json_type(error.instance), 'another type')}")
    if error.validator in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        return f"out of range ({error.validator} {rule})"
    if error.validator == "enum":
        return f"use one of {', '.join(map(str, rule))}"
    return error.schema.get("description") or f"does not hold to the schema's {error.validator}"


def _json_type(value):
    """The JSON Schema type name of a parsed value."""
    for name in ("boolean", "integer", "number", "string", "array", "object", "null"):
        if _is_type(value, name):
            return name
    return None
