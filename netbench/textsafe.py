"""Measured text made safe to show: host names, launcher messages and
other text netbench did not write reach failure reasons, headlines, logs
and `vcluster status`, and through them an operator's terminal.  A name
such as "n3\\x1b]0;owned\\x07" would retitle, recolour or rewrite that
terminal; `printable` shows it as the escapes it is made of instead.

One function, used wherever such text is put into a line for a person."""

import re

#: C0 and C1 control characters (ESC, BEL, CR, LF, TAB, DEL, CSI, ...),
#: and the Unicode line separators and bidirectional overrides that make
#: text display as something else than it is
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029"
                     "\u202a-\u202e\u2066-\u2069]")


def _escape(match):
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text):
    """`text` (any object, as str) on one line with every control
    character written as its escape (\\x1b, \\n, \\u202e): what is shown
    is what was there, and nothing in it drives the terminal."""
    return CONTROL.sub(_escape, str(text))
