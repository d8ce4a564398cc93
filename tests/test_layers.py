"""The house's shape (../shared/ARCHITECTURE.md), enforced: one floor per folder; a module imports only
modules on its own floor or below; no import cycle anywhere in fxviz/ (imports inside functions and
under ``if TYPE_CHECKING:`` included: an annotation's import is knowledge too); no module imports
another module's private (``_x``) names; no function over 120 lines (80 on the top floors)."""

from __future__ import annotations

import ast
import pathlib

import fxviz

ROOT = pathlib.Path(fxviz.__file__).parent

# floor -> the folders (and the package's own files) on it: one floor per folder, so the layout is the
# house.  The root holds only the public doors: ``__init__``, ``__main__`` and ``examples``.
FLOORS: dict[int, tuple[str, ...]] = {
    1: ("_torch",),  # torch's private API, the quarantine: it imports nothing of fxviz
    2: ("core", "examples"),  # facts and conventions below everything; the example models
    3: ("sources",),  # where a joint graph comes from: a model traced now, a log read and rebuilt
    4: ("analysis",),  # plain data about captured graphs
    5: ("render",),  # presentation; never computes a fact
    6: ("api",),  # what users hold: Trace, Run, Diff, advice; the one floor that builds Traces
    7: ("payloads",),  # what one view shows, as data both front ends read
    8: ("frontends",),  # the notebook explorer, the HTML reports, the CLI
    9: ("__init__", "__main__"),
}


def floor_of(module: str) -> int:
    top = module.split(".")[0]
    for floor, names in FLOORS.items():
        if top in names:
            return floor
    raise AssertionError(f"fxviz.{module} is on no floor: put it in a floor's folder (ARCHITECTURE.md)")


def test_every_folder_is_one_floor():
    """The package root holds only the public doors; every other module lives in a floor's folder."""
    loose = sorted(p.name for p in ROOT.glob("*.py"))
    assert loose == ["__init__.py", "__main__.py", "examples.py"], loose
    folders = sorted(p.name for p in ROOT.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert folders == sorted(n for names in FLOORS.values() for n in names if (ROOT / n).is_dir()), folders


def _module_name(path: pathlib.Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: pathlib.Path, with_names: bool = False, type_checking: bool = True) -> list[tuple[int, str]]:
    """(line, fxviz module) for every fxviz import, those under ``if TYPE_CHECKING:`` included unless
    ``type_checking`` is False (an annotation's import is still a dependency of the room's knowledge);
    ``with_names``: (line, "module:name") for every name a ``from fxviz... import name`` takes."""
    tree = ast.parse(path.read_text())
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    skip: set[int] = set()
    for node in ast.walk(tree):
        if not type_checking and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
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


# the small modules others are built on import nothing of the machinery beside them: a module that needs
# only ``JointGraph`` or ``Scene`` does not pull in the capture routes, the log rebuild or the scene builders
LEAVES = {
    "sources.graphs": ("sources.model", "sources.log"),  # the JointGraph / Capture / Source types
    "render.graph.scene_types": ("render.graph",),  # Item / Group / Scene, not the builders
    "_torch.meta": ("_torch",),  # node-meta keys and descriptors, not the capture machinery
}


def test_type_modules_are_leaves_of_their_package():
    offenders = []
    for module, packages in LEAVES.items():
        path = ROOT.joinpath(*module.split(".")).with_suffix(".py")
        assert path.exists(), path
        offenders += [f"fxviz/{path.relative_to(ROOT)}:{line} imports fxviz.{target}"
                      for line, target in _imports(path)
                      if any(target == p or target.startswith(p + ".") for p in packages)]
    assert not offenders, "\n".join(offenders)


# packages whose __init__ is a door (names users or the quarantine's callers take from it)
DOORS = {"__init__", "_torch", "frontends.widgets"}


def test_a_package_init_imports_nothing_but_is_a_door():
    """One door per answer: a name is imported from the module that defines it, so a package's
    ``__init__`` holds its docstring only (``fxviz``, the ``_torch`` quarantine and ``explore`` excepted);
    importing ``fxviz.sources.log.index`` then loads the index, not the rebuild's torch."""
    offenders = [f"fxviz/{MODULES[m].relative_to(ROOT)}:{line} imports fxviz.{target}"
                 for m in MODULES if MODULES[m].name == "__init__.py" and m not in DOORS
                 for line, target in _imports(MODULES[m])]
    assert not offenders, "\n".join(offenders)


TOP_FLOORS = (6, 7, 8, 9)
MAX_TOP_FUNCTION_LINES = 80


def test_top_floors_have_short_functions():
    """The facade, payloads, logs, diff, widgets, reports and CLI choose and call: no function over 80
    lines there (a room is the size of its job; issue 43 let the per-file cap go)."""
    big = []
    for name, path in MODULES.items():
        if floor_of(name) not in TOP_FLOORS:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno is not None:
                n = node.end_lineno - node.lineno + 1
                if n > MAX_TOP_FUNCTION_LINES:
                    big.append(f"fxviz/{path.relative_to(ROOT)}:{node.lineno} {node.name} ({n} lines)")
    assert not big, "functions on the top floors grown too long:\n" + "\n".join(big)


def test_only_the_rebuild_classifies_logged_nodes():
    """The log index lists; the rebuild (``sources.log.rebuild.from_log``) is the only place a logged
    graph's nodes are classified, with the one ``classify_nodes`` call there."""
    callers = [f"fxviz/{p.relative_to(ROOT)}" for name, p in MODULES.items()
               if name.startswith("sources.log") and name != "sources.log.rebuild.from_log"
               and "classify_nodes" in p.read_text()]
    assert not callers, f"the log index classifies nodes: {callers}"


def test_only_the_api_floor_builds_a_trace():
    """A ``Trace`` is what users hold: the api floor builds it (``fxviz.trace``, ``Run.trace``, advice's
    ``Option.trace`` through the class the facade hands it); no floor below or above constructs one."""
    builders = []
    for name, path in MODULES.items():
        if name.startswith("api.") or name == "api":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Trace":
                builders.append(f"fxviz/{path.relative_to(ROOT)}:{node.lineno}")
    assert not builders, f"a Trace built outside fxviz/api/: {builders}"
