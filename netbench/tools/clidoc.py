"""`python -m netbench.tools.clidoc`: the command-line reference,
docs/reference/cli.md, written from the `netbench` command's own parser:
every subcommand with its usage, arguments and help, and the exit codes
(netbench/exitcodes.py).  Generated, never edited by hand:
tests/test_cli.py fails when the committed file differs from what this
writes.  `--check` only compares (exit 1 when stale).
"""

import argparse
import sys
from pathlib import Path

from .. import cli, exitcodes, paths
from ..safefile import atomic_write

#: the reference, relative to the checkout
OUTPUT = Path("docs") / "reference" / "cli.md"
#: usage lines wrap here whatever the terminal: the file must not depend on it
WIDTH = 100


def subcommands(parser):
    """[(name, help, parser)] of a parser's subcommands, in the order given."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: (a.help or "") % {"prog": parser.prog}
                     for a in action._choices_actions}
            return [(name, helps.get(name, ""), sub) for name, sub in action.choices.items()]
    return []


def every_command(parser, words=()):
    """[(words, help, parser)] of every subcommand, depth first."""
    found = []
    for name, help_text, sub in subcommands(parser):
        found.append((words + (name,), help_text, sub))
        found += every_command(sub, words + (name,))
    return found


def usage(parser):
    formatter = parser.formatter_class(prog=parser.prog, width=WIDTH)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    return formatter.format_help().strip()


def cell(text):
    """Text safe inside a Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def expanded_help(action, parser):
    """An argument's help as argparse shows it (`%%` is `%`)."""
    return (action.help or "") % dict(vars(action), prog=parser.prog)


def spelling(action):
    """`-o DIR`, `--output DIR`; a positional's name."""
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    if action.nargs == 0:
        return ", ".join(f"`{o}`" for o in action.option_strings)
    metavar = action.metavar or (
        "{" + ",".join(map(str, action.choices)) + "}" if action.choices
        else action.dest.upper())
    return ", ".join(f"`{o} {metavar}`" for o in action.option_strings)


def argument_rows(parser):
    """Table rows of a parser's arguments, hidden aliases and -h left out."""
    rows = []
    for action in parser._actions:
        if (action.help == argparse.SUPPRESS or isinstance(action, argparse._HelpAction)
                or isinstance(action, argparse._SubParsersAction)):
            continue
        words = [expanded_help(action, parser)]
        if action.required and action.option_strings:
            words.append("(required)")
        shows_default = action.default not in (None, False, argparse.SUPPRESS) and \
            "default" not in words[0]
        if shows_default:
            words.append(f"(default: {action.default})")
        rows.append(f"| {spelling(action)} | {cell(' '.join(w for w in words if w))} |")
    return rows


def command_section(words, help_text, parser):
    lines = [f"## netbench {' '.join(words)}", "", cell(help_text), "",
             "```text", usage(parser), "```", ""]
    rows = argument_rows(parser)
    if rows:
        lines += ["| argument | meaning |", "|---|---|", *rows, ""]
    actions = subcommands(parser)
    if actions:
        lines += ["Actions: " + ", ".join(f"`{name}`" for name, _, _ in actions) + ".", ""]
    return lines


def exit_code_section():
    lines = ["## Exit codes", "",
             "The same for every command and for a ReFrame session of netbench's checks "
             "(`netbench/exitcodes.py`).", "",
             "| code | name | meaning |", "|---|---|---|"]
    lines += [f"| {c.value} | {c.name} | {cell(c.meaning)} |" for c in exitcodes.CODES]
    return lines + [""]


def markdown():
    """docs/reference/cli.md as the parser says it."""
    parser = cli.build_parser()
    lines = ["# The `netbench` command", "",
             "Generated from the command's parser by `python -m netbench.tools.clidoc`: "
             "edit the parser (`netbench/cli.py`), not this file.", "",
             "```text", usage(parser), "", cli.DESCRIPTION, "```", "",
             "| argument | meaning |", "|---|---|", *argument_rows(parser), ""]
    lines += exit_code_section()
    for words, help_text, sub in every_command(parser):
        lines += command_section(words, help_text, sub)
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help=f"only compare {OUTPUT} with what the parser says")
    args = parser.parse_args(argv)
    path = paths.REPO / OUTPUT
    text = markdown()
    if args.check:
        current = path.read_text() if path.exists() else ""
        print(f"clidoc: {path} is {'current' if current == text else 'STALE'}")
        return exitcodes.OK if current == text else exitcodes.LOSS
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, text)
    print(f"clidoc: wrote {path}")
    return exitcodes.OK


if __name__ == "__main__":
    sys.exit(main())
