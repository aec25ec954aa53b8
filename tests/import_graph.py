"""The import graph between tfcert's rooms, from the source alone (``ast``; nothing is imported).

A room is a subpackage of ``tfcert`` (``tfcert.cli``, ``tfcert.verify``, …) or a module directly in
``tfcert/`` (``tfcert.api``, ``tfcert.errors``, …). Folders map into the namespace as
pyproject.toml's ``package-dir`` says, so the script reads any commit of the project.

    python tests/import_graph.py [ROOT] [--mermaid]

prints one line per edge, ``FROM -> TO (N)``, N the import statements that make it; with
``--mermaid``, the same edges as a mermaid flowchart (docs/architecture.md holds one).
"""
from __future__ import annotations

import ast
import re
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def packages(root: Path) -> dict[str, Path]:
    """``package-dir`` of pyproject.toml: dotted package -> its folder."""
    text = (root / "pyproject.toml").read_text()
    line = re.search(r"^package-dir\s*=\s*\{(.*)\}\s*$", text, re.MULTILINE).group(1)
    return {name: root / folder for name, folder in re.findall(r'"([\w.]+)"\s*=\s*"([\w/]+)"', line)}


def modules(root: Path) -> dict[str, Path]:
    """Every module of the installed namespace: dotted name -> source file (``a.b`` for a/b/__init__.py)."""
    out: dict[str, Path] = {}
    mapped = packages(root)
    for package, folder in mapped.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if any(p == "__pycache__" for p in parts):
                continue
            name = ".".join((package, *parts)).removesuffix(".__init__")
            inner = ".".join((package, *parts[:1]))
            if len(parts) > 1 and inner in mapped and mapped[inner] != folder / parts[0]:
                continue  # a folder that package-dir maps elsewhere
            out.setdefault(name, path)
    return out


def imported(path: Path, name: str) -> list[str]:
    """The absolute modules ``path`` (module ``name``) imports, relative imports resolved;
    ``from X import a`` yields X.a, which room() maps to X's room when a is a name."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - (node.level - 1)] + ([node.module] if node.module else []))
            out += [f"{base}.{alias.name}" for alias in node.names]
    return out


def room(module: str) -> str | None:
    """``tfcert.X`` for any module at or below it; None outside tfcert and for ``tfcert`` itself."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "tfcert" and len(parts) > 1 else None


def edges(root: Path = REPO) -> Counter:
    """(from room, to room) -> import statements, between different rooms."""
    found = modules(root)
    count: Counter = Counter()
    for name, path in found.items():
        for target in imported(path, name):
            a, b = room(name), room(target)
            if a and b and a != b:
                count[a, b] += 1
    return count


def mermaid(count: Counter) -> str:
    ident = lambda r: r.replace("tfcert.", "").replace("__", "")
    lines = ["flowchart TD"]
    lines += [f"    {ident(a)}[{a}] --> {ident(b)}[{b}]" for a, b in sorted(count)]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    count = edges(Path(args[0]) if args else REPO)
    if "--mermaid" in argv:
        print(mermaid(count))
    else:
        for (a, b), n in sorted(count.items()):
            print(f"{a} -> {b} ({n})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
