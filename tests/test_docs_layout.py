"""The docs follow the code (#24) and keep their shape (#32): the README is
a short entry point; docs/reference/layout.md says what every module and
folder of netbench/ holds, docs/explanation/architecture.md what every
folder holds, docs/reference/configuration.md every data file, so a module
or file added without a word fails here."""

import re

import pytest

from netbench import paths

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside

PACKAGE = paths.REPO / "netbench"
DOCS = paths.REPO / "docs"
README_MAX_LINES = 250


def layout_rows():
    """{path cell: what cell} of the layout reference's table."""
    rows = {}
    for line in (DOCS / "reference" / "layout.md").read_text().splitlines():
        cells = line.split(" | ")
        if line.startswith("| `") and len(cells) >= 2:
            rows[cells[0].lstrip("| ")] = " | ".join(cells[1:])
    return rows


def modules(folder):
    return sorted(p.stem for p in folder.glob("*.py") if p.stem != "__init__")


def folders():
    return sorted(p.name for p in PACKAGE.iterdir()
                  if p.is_dir() and not p.name.startswith((".", "__")))


def test_the_layout_reference_names_every_module_of_every_folder():
    rows = layout_rows()
    top = next(what for path, what in rows.items() if path.startswith("`netbench/` "))
    missing = [f"netbench/{m}.py" for m in modules(PACKAGE) if f"`{m}`" not in top]
    for name in folders():
        row = rows.get(f"`netbench/{name}/`")
        if row is None:
            missing.append(f"netbench/{name}/")
            continue
        missing += [f"netbench/{name}/{m}.py" for m in modules(PACKAGE / name)
                    if f"`{m}`" not in row]
    assert missing == [], f"docs/reference/layout.md does not name: {', '.join(missing)}"


def test_the_architecture_names_every_folder():
    text = (DOCS / "explanation" / "architecture.md").read_text()
    missing = [name for name in folders() if not re.search(rf"`netbench/{name}/`", text)]
    assert missing == [], missing


def test_the_readme_fits_three_screens():
    lines = (paths.REPO / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"


def test_the_readme_says_early_what_a_run_without_a_baseline_is_judged_by():
    """The caveat a newcomer needs before reading a first verdict: in the
    first screen, with the command that makes a baseline."""
    first_screen = " ".join((paths.REPO / "README.md").read_text().splitlines()[:40])
    assert "2002-2005 references only: a floor, not this system's expected performance" \
        in re.sub(r"[*\s>]+", " ", first_screen).replace(" .", ".")
    assert "netbench baseline accept" in first_screen


def test_the_readme_has_a_section_and_a_link_per_task():
    readme = (paths.REPO / "README.md").read_text()
    assert "## Prerequisites" in readme and "## Quick start" in readme
    for heading in ("## A laptop run",
                    "## A virtual cluster", "## A real cluster with Spack and Slurm",
                    "## A baseline", "## Comparing sessions", "## Finding a bad node",
                    "## Tuning", "## Containers"):
        assert heading in readme, heading
        section = readme.split(heading, 1)[1].split("\n## ", 1)[0]
        assert "](docs/" in section, f"{heading} links nowhere into docs/"


def test_the_docs_keep_tutorials_guides_reference_and_explanation_apart():
    for path in ("tutorial.md", "validation.md", "howto", "reference/README.md",
                 "reference/configuration.md", "reference/exit-codes.md",
                 "reference/make-targets.md", "explanation/verdicts.md",
                 "explanation/architecture.md", "explanation/platform-facts.md"):
        assert (DOCS / path).exists(), path
    assert (paths.REPO / "CHANGELOG.md").exists()
    assert "cli.md" in (DOCS / "reference" / "README.md").read_text()


def test_the_configuration_reference_names_every_data_file():
    text = (DOCS / "reference" / "configuration.md").read_text()
    files = [*(PACKAGE / "data").glob("*.yaml"), *(PACKAGE / "data").glob("*.json"),
             *(paths.REPO / "reframe_checks" / "references").glob("*.yaml")]
    missing = [p.name for p in files if p.name not in text
               and not (p.name.startswith("seed") and "seed000" in text)]
    assert missing == [], f"docs/reference/configuration.md does not name: {missing}"


def test_the_make_targets_reference_names_every_target():
    text = (DOCS / "reference" / "make-targets.md").read_text()
    makefile = (paths.REPO / "Makefile").read_text()
    targets = re.findall(r"^([a-z][\w-]*):(?!=)", makefile, re.M)
    missing = [t for t in targets if f"`make {t}`" not in text]
    assert missing == [], missing
