"""Print the package's layout from its own files: one line per package (room) and module, its size in lines and the
first line of its docstring (the question it answers). docs/layout.md holds this between its LAYOUT markers;
``python scripts/layout.py --write`` rewrites that part.

Usage: python scripts/layout.py [--write]
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "traceprobe"
DOC = ROOT / "docs" / "layout.md"
BEGIN, END = "<!-- LAYOUT: written by scripts/layout.py -->", "<!-- /LAYOUT -->"


def _first_line(path: Path, width: int = 110) -> str:
    """The first sentence of the module's docstring, cut after a whole word (with an ellipsis) past ``width``."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    first = " ".join(doc.strip().split("\n\n")[0].split()).split(". ")[0].rstrip(".")
    return first if len(first) <= width else first[:width].rsplit(" ", 1)[0] + " …"


def lines() -> list[str]:
    """The layout, one line per package and module, packages before their modules, in path order."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py"), key=lambda p: (p.parent.relative_to(PACKAGE).parts, p.name != "__init__.py", p.name)):
        rel = path.relative_to(ROOT)
        depth = len(rel.parts) - 2
        if path.name == "__init__.py":
            size = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in path.parent.rglob("*.py"))
            out.append(f"{'  ' * depth}{path.parent.name}/ ({size:,} lines): {_first_line(path)}")
        else:
            n = len(path.read_text(encoding="utf-8").splitlines())
            out.append(f"{'  ' * (depth + 1)}{path.stem} ({n} lines): {_first_line(path)}")
    return out


def write() -> None:
    """Rewrite docs/layout.md's part between the markers (atomically: the new text is renamed over it)."""
    text = DOC.read_text(encoding="utf-8")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    body = "\n".join(["```", *lines(), "```"])
    tmp = DOC.with_suffix(".md.tmp")
    tmp.write_text(f"{head}{BEGIN}\n{body}\n{END}{tail}", encoding="utf-8")
    tmp.replace(DOC)


if __name__ == "__main__":
    if "--write" in sys.argv[1:]:
        write()
    else:
        print("\n".join(lines()))
