"""docs/architecture.md lists every module of the package once, in its "Modules" section: the
one description of the layout, so a module added, moved or removed without it fails here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "controller" / "innet"


def package_modules(package: Path = PACKAGE) -> set[str]:
    """Dotted names of the package's modules: its files (`__init__` and `__main__` left out),
    and a sub-package whose `__init__` is all it has (`innet.shipped`)."""
    names = set()
    for p in package.rglob("*.py"):
        parts = p.relative_to(package).with_suffix("").parts
        if p.stem not in ("__init__", "__main__"):
            names.add(".".join(("innet", *parts)))
        elif p.stem == "__init__" and len(parts) > 1 and not any(
                q != p for q in p.parent.rglob("*.py")):
            names.add(".".join(("innet", *parts[:-1])))
    return names


def documented_modules(text: str) -> list[str]:
    """The module named first on each row of the Modules section's tables."""
    section = text.split("\n## Modules\n", 1)[1].split("\n## ", 1)[0]
    return [m.group(1) for line in section.splitlines()
            if (m := re.match(r"\|\s*`(innet(?:\.\w+)+)`", line))]


def test_architecture_lists_every_module_once() -> None:
    listed = documented_modules((ROOT / "docs" / "architecture.md").read_text())
    twice = sorted({m for m in listed if listed.count(m) > 1})
    assert twice == [], f"listed more than once: {twice}"
    modules = package_modules()
    assert sorted(modules - set(listed)) == [], "modules missing from docs/architecture.md"
    assert sorted(set(listed) - modules) == [], "listed in docs/architecture.md, not in the code"


def test_the_module_list_is_read_from_the_modules_section(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.py").write_text("")
    (tmp_path / "sub" / "__init__.py").write_text("")
    (tmp_path / "only").mkdir()
    (tmp_path / "only" / "__init__.py").write_text("")
    assert package_modules(tmp_path) == {"innet.a", "innet.sub.b", "innet.only"}
    doc = ("# x\n`innet.not_here` in prose\n## Modules\n| module | owns |\n|---|---|\n"
           "| `innet.a` | this, see `innet.c` |\n| `innet.sub.b` | that |\n## Next\n"
           "| `innet.d` | elsewhere |\n")
    assert documented_modules(doc) == ["innet.a", "innet.sub.b"]
