"""Reading netbench's YAML data files with errors that name file and key."""

import yaml


class DataError(Exception):
    """A data file is unreadable or malformed; str() is one line naming
    the file and the offending key."""

    def __init__(self, path, key, problem):
        self.path, self.key, self.problem = str(path), key, problem
        where = f"{self.path}: {key}" if key else self.path
        super().__init__(f"{where}: {problem}")


def load_yaml(path):
    """The parsed mapping in `path`, or DataError."""
    try:
        with open(path) as f:
            data = yaml.safe_load(f)
    except OSError as err:
        raise DataError(path, None, f"cannot read: {err.strerror}") from err
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = f"line {mark.line + 1}: " if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise DataError(path, None, f"{line}invalid YAML: {problem}") from err
    if not isinstance(data, dict):
        raise DataError(path, None, "expected a mapping at the top level")
    return data


def require(mapping, key, kind, path, where):
    """mapping[key], checked to be of `kind`; `where` is the dotted key path
    used in the error message."""
    full = f"{where}.{key}" if where else key
    if not isinstance(mapping, dict) or key not in mapping:
        raise DataError(path, full, "missing")
    value = mapping[key]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        name = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise DataError(path, full, f"expected {name}, got {type(value).__name__} {value!r}")
    return value
