"""Files netbench writes as root, often in a checkout that others can
write: a file is written under a name created exclusively beside it and
renamed into place, so a reader never sees half of it, a link planted at a
fixed temporary name is never followed, and a write that cannot complete
leaves what was there; a file name built from a record's text is one plain
name inside its folder, or refused."""

import contextlib
import os
import re
import stat
import tempfile
from pathlib import Path

#: what a name taken from a record may be, as one component of a path:
#: no separator, no leading dot (neither `..` nor a hidden file), no
#: control character or space
SAFE_NAME = re.compile(r"[A-Za-z0-9_+@=,-][A-Za-z0-9_.+@=,-]{0,199}")


def atomic_write(path, data, mode=0o644):
    """Write `data` (str or bytes) to `path`: to a temporary file that
    mkstemp creates exclusively (O_EXCL, never through a link) in the same
    folder, then renamed over `path`.  On any failure the temporary file is
    removed and `path` is as it was."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def is_safe_name(name):
    """Whether `name` can stand as one file name inside a folder."""
    return isinstance(name, str) and SAFE_NAME.fullmatch(name) is not None


def child(folder, name):
    """`folder / name` for a `name` taken from a record; ValueError naming
    it when it is not one plain name (a separator, `..`, an absolute path,
    a control character), so that nothing is written outside `folder`."""
    if not is_safe_name(name):
        raise ValueError(f"{name!r} is not a plain file name (letters, digits and "
                         f"_ . + @ = , - only, not starting with a dot)")
    return Path(folder) / name


def invoking_uid():
    """The user who ran netbench (through sudo, the one sudo names)."""
    with contextlib.suppress(ValueError):
        return int(os.environ.get("SUDO_UID", os.getuid()))
    return os.getuid()


def others_could_change(info, uids=None):
    """Why a user other than `uids` (default: root and this process's
    user) could change the file whose os.stat result is `info`, or None:
    another owner, or write rights for group or others (sshd's
    StrictModes)."""
    uids = {0, os.getuid()} if uids is None else uids
    if info.st_uid not in uids:
        return f"owned by uid {info.st_uid}, neither root nor the caller"
    if info.st_mode & 0o022:
        return f"writable by group or others (mode {stat.S_IMODE(info.st_mode):o})"
    return None
