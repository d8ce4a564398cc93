"""The house's shape (../shared/ARCHITECTURE.md), enforced: a module imports only modules on its
own floor or below; no import cycle anywhere in fxviz/ (imports inside functions included); no
module imports another module's private (``_x``) names; no function over 120 lines.  Imports under
``if TYPE_CHECKING:`` are for annotations and do not count."""

from __future__ import annotations

import ast
import pathlib

import fxviz

ROOT = pathlib.Path(fxviz.__file__).parent

# floor -> module names or dotted prefixes (relative to the package); the longest match decides
FLOORS: dict[int, tuple[str, ...]] = {
    1: ("_torch", "_fx", "_gc", "_io", "_state", "_supported", "errors", "examples", "example_names", "units",
        "graph_facts", "logs.signature"),
    2: ("capture", "roles", "logs.reader", "logs.graph_code", "logs.foreign", "logs.index", "logs.guards",
        "logs.totals"),
    3: ("analysis",),
    4: ("render",),
    # a logged Run hands out Traces
    5: ("facade", "tracing", "payloads", "logs", "logs.run", "diffing", "trace_drawing"),
    6: ("widgets", "html_report", "diff_report"),
    7: ("__init__", "cli", "__main__"),
}


def floor_of(module: str) -> int:
    best: tuple[int, int] | None = None
    for floor, names in FLOORS.items():
        for name in names:
            if (module == name or module.startswith(name + ".")) and (best is None or len(name) > best[0]):
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


def _imports(path: pathlib.Path, with_names: bool = False) -> list[tuple[int, str]]:
    """(line, fxviz module) for every fxviz import outside ``if TYPE_CHECKING:`` blocks;
    ``with_names``: (line, "module:name") for every name a ``from fxviz... import name`` takes."""
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
            if with_names:
                found += [(node.lineno, f"{names[0]}:{a.name}") for a in node.names] if node.module else []
                continue
            found += [(node.lineno, n) for n in names if n]
        elif isinstance(node, ast.Import) and not with_names:
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


MODULES = {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _as_module(target: str) -> str:
    """An import target as the fxviz module it loads (``render.draw`` names a package's export)."""
    while target and target not in MODULES:
        target = target.rpartition(".")[0]
    return target


def test_no_import_cycle_in_fxviz():
    """Lazy imports (inside functions) count: a cycle they hide is still a circle of knowledge."""
    edges = {m: sorted({_as_module(t) for _, t in _imports(p)} - {m, ""}) for m, p in MODULES.items()}
    # a package's __init__ re-exporting its modules is not a cycle with them
    edges = {m: [t for t in ts if not m.startswith(t + ".") or MODULES[t].name != "__init__.py"]
             for m, ts in edges.items()}
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in edges.get(m, []):
            if state.get(t) == 1:
                cycles.append(" -> ".join([*stack[stack.index(t):], t]))
            elif t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in MODULES:
        if m not in state:
            visit(m)
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_no_private_name_imported_across_modules():
    """``from .memory import _alias_base`` reaches into another module's insides; a fact several
    modules need gets a public home (graph_facts).  Importing a private *module* (``_torch``, the
    quarantine; ``_fx``) is fine."""
    offenders = []
    for path in MODULES.values():
        for line, item in _imports(path, with_names=True):
            module, name = item.split(":")
            if name.startswith("_") and f"{module}.{name}".strip(".") not in MODULES:
                offenders.append(f"fxviz/{path.relative_to(ROOT)}:{line} imports {name} from fxviz.{module}")
    assert not offenders, "private names imported across modules:\n" + "\n".join(offenders)


MAX_FUNCTION_LINES = 120


def test_no_function_over_120_lines():
    """Long functions hide their seams (``measure_eager`` was 196 lines); as the JS check does."""
    long = []
    for path in MODULES.values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno is not None:
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long.append(f"fxviz/{path.relative_to(ROOT)}:{node.lineno} {node.name} ({n} lines)")
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(long)


# the small modules others are built on import nothing of their own package: a module that needs
# only ``JointGraph`` or ``Scene`` does not pull in the capture routes or the scene builders
LEAVES = {
    "capture.graphs": "capture",  # the JointGraph / Capture types, not the routes
    "render.scene_types": "render",  # Item / Group / Scene, not the builders
    "_torch.meta": "_torch",  # node-meta keys and descriptors, not the capture machinery
}


def test_type_modules_are_leaves_of_their_package():
    offenders = []
    for module, package in LEAVES.items():
        path = ROOT.joinpath(*module.split(".")).with_suffix(".py")
        assert path.exists(), path
        offenders += [f"fxviz/{path.relative_to(ROOT)}:{line} imports fxviz.{target}"
                      for line, target in _imports(path) if target == package or target.startswith(package + ".")]
    assert not offenders, "\n".join(offenders)


def test_packages_that_were_modules_keep_their_names():
    """``_torch``, ``capture`` and ``render.scene`` were single modules; their packages and the
    facade re-export every name the rest of fxviz (and users' code) imported from them."""
    from fxviz import _torch, capture
    from fxviz.render import scene

    for name in _torch.__all__:
        assert hasattr(_torch, name), name
    for name in capture.__all__:
        assert hasattr(capture, name), name
    for name in scene.__all__:
        assert hasattr(scene, name), name
    assert capture.capture.__module__ == "fxviz.capture.routes"


TOP_FLOORS = (5, 6, 7)
MAX_TOP_FILE_LINES = 400
MAX_TOP_FUNCTION_LINES = 80


def test_top_floors_are_small_rooms():
    """The facade, payloads, logs, diff, widgets, reports and CLI hold one job per room (issue 31:
    five files there had grown past 600 lines): no file over 400 lines, no function over 80."""
    big = []
    for name, path in MODULES.items():
        if floor_of(name) not in TOP_FLOORS:
            continue
        lines = len(path.read_text().splitlines())
        if lines > MAX_TOP_FILE_LINES:
            big.append(f"fxviz/{path.relative_to(ROOT)}: {lines} lines")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno is not None:
                n = node.end_lineno - node.lineno + 1
                if n > MAX_TOP_FUNCTION_LINES:
                    big.append(f"fxviz/{path.relative_to(ROOT)}:{node.lineno} {node.name} ({n} lines)")
    assert not big, "rooms on the top floors grown too big:\n" + "\n".join(big)


def test_nothing_in_logs_classifies_nodes():
    """The log index lists and the rebuild lives on the capture floor (``capture.from_log``): the
    only place a logged graph's nodes are classified is the one ``classify_nodes`` call there."""
    callers = [f"fxviz/{p.relative_to(ROOT)}" for name, p in MODULES.items()
               if name.startswith("logs") and "classify_nodes" in p.read_text()]
    assert not callers, f"logs/ classifies nodes: {callers}"
