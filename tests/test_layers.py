"""The house's floors (../shared/ARCHITECTURE.md), enforced: a module imports only modules on its
own floor or below.  Imports under ``if TYPE_CHECKING:`` are for annotations and do not count."""

from __future__ import annotations

import ast
import pathlib

import fxviz

ROOT = pathlib.Path(fxviz.__file__).parent

# floor -> module names or dotted prefixes (relative to the package); the longest match decides
FLOORS: dict[int, tuple[str, ...]] = {
    1: ("_torch", "_fx", "_io", "_state", "_supported", "errors", "examples", "units"),
    2: ("capture", "roles", "logs.reader", "logs.graph_code"),
    3: ("analysis",),
    4: ("render",),
    5: ("trace", "payloads", "logs", "logs.run"),  # a logged Run hands out Traces
    6: ("widgets", "html_report"),
    7: ("__init__", "cli", "__main__"),
}


def floor_of(module: str) -> int:
    best: tuple[int, int] | None = None
    for floor, names in FLOORS.items():
        for name in names:
            if module == name or module.startswith(name + "."):
                if best is None or len(name) > best[0]:
                    best = (len(name), floor)
    if best is None:
        raise AssertionError(f"fxviz.{module} is on no floor: add it to FLOORS and to ARCHITECTURE.md")
    return best[1]


def _module_name(path: pathlib.Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: pathlib.Path) -> list[tuple[int, str]]:
    """(line, fxviz module) for every fxviz import outside ``if TYPE_CHECKING:`` blocks."""
    tree = ast.parse(path.read_text())
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    found = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
                names = [target] if node.module else [f"{target}.{a.name}".strip(".") for a in node.names]
            elif node.module and node.module.startswith("fxviz"):
                names = [node.module.removeprefix("fxviz").lstrip(".")]
            else:
                continue
            found += [(node.lineno, n) for n in names if n]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name.removeprefix("fxviz.")) for a in node.names
                      if a.name.startswith("fxviz.")]
    return found


def test_every_module_imports_only_its_floor_or_below():
    offenders = []
    for path in sorted(ROOT.rglob("*.py")):
        me = _module_name(path)
        mine = floor_of(me)
        for line, target in _imports(path):
            if floor_of(target) > mine:
                offenders.append(f"fxviz/{path.relative_to(ROOT)}:{line} (floor {mine}) imports fxviz.{target} "
                                 f"(floor {floor_of(target)})")
    assert not offenders, "imports up the floors:\n" + "\n".join(offenders)


def test_render_never_calls_the_facade():
    for path in (ROOT / "render").rglob("*.py"):
        assert "Trace" not in {n.id for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Name)}, path
