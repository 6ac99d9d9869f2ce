"""The docs follow the code (#24): README's "Layout" table says what every
module and folder of netbench/ holds, and docs/architecture.md what every
folder holds, so a module added without a word fails here."""

import re

from netbench import paths

PACKAGE = paths.REPO / "netbench"


def layout_rows():
    """{path cell: what cell} of README's Layout table."""
    readme = (paths.REPO / "README.md").read_text()
    section = readme[readme.index("\n## Layout\n"):]
    section = section[:section.index("\n## ", 1)] if "\n## " in section[1:] else section
    rows = {}
    for line in section.splitlines():
        cells = line.split(" | ")
        if line.startswith("| `") and len(cells) >= 2:
            rows[cells[0].lstrip("| ")] = " | ".join(cells[1:])
    return rows


def modules(folder):
    return sorted(p.stem for p in folder.glob("*.py") if p.stem != "__init__")


def folders():
    return sorted(p.name for p in PACKAGE.iterdir()
                  if p.is_dir() and not p.name.startswith((".", "__")))


def test_the_readme_layout_names_every_module_of_every_folder():
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
    assert missing == [], f"README's Layout table does not name: {', '.join(missing)}"


def test_the_architecture_names_every_folder():
    text = (paths.REPO / "docs" / "architecture.md").read_text()
    missing = [name for name in folders() if not re.search(rf"`netbench/{name}/`", text)]
    assert missing == [], missing
