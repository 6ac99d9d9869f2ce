"""Make the venv's activate script export what ReFrame needs.

ReFrame reads RFM_CONFIG_FILES (never ~/.reframe): without it, `reframe -c
reframe_checks -r` would fall back to its generic configuration.
"""

import sys
from pathlib import Path

from . import paths

BEGIN, END = "# >>> netbench >>>", "# <<< netbench <<<"


def hook_text():
    return "\n".join([
        BEGIN,
        "# the netbench ReFrame configuration (added by `make setup`)",
        f'export RFM_CONFIG_FILES="{paths.CONFIG}"',
        END,
    ]) + "\n"


def install(venv):
    """Append (or refresh) the netbench block in VENV/bin/activate."""
    script = Path(venv) / "bin" / "activate"
    text = script.read_text()
    if BEGIN in text:
        head, _, rest = text.partition(BEGIN)
        _, _, tail = rest.partition(END + "\n")
        text = head + tail
    script.write_text(text.rstrip("\n") + "\n\n" + hook_text())
    return script


if __name__ == "__main__":
    print(f"netbench: RFM_CONFIG_FILES set in {install(sys.argv[1] if len(sys.argv) > 1 else paths.REPO / '.venv')}")
