"""The real names of a logged graph's inputs, without torch: dynamo's graph names each input after its
source (``L['self']._modules['h']._parameters['w']`` -> ``L_self_modules_h_parameters_w_``), the log's
``describe_source`` records say which source each is and the ``describe_tensor`` records which are
parameters; the AOT graphs' descriptors (``PlainAOTInput(idx=3)``) say which input each placeholder is.

dynamo's graph of a 64-layer step is thousands of lines: its input and output names are read from its
``def forward(...)`` and ``return (...)`` lines, never by parsing the whole graph (two ``ast`` parses of it
were 4 s of a rebuild, issue 46).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping

from fxviz.sources.log.index import Compile
from fxviz.sources.log.signature import is_tangent

__all__ = ["mangle", "qualname", "def_names", "returned_names", "input_names", "input_kind", "InputKindText",
           "placeholder_roles"]

InputKindText = tuple[str, int | str | None]
"""An input's kind by its descriptor's text: ``("plain", 3)``, ``("param", "fc.weight")``, ``("buffer", name)``,
``("tangent", None)``, ``("rng", None)``, ``("token", None)``, ``("other", None)``; ``("none", None)`` when
the log printed no descriptor."""

_DEF = re.compile(r"^    def forward\(self,?(.*?)\):\s*$", re.M | re.S)
_DEF_ARG = re.compile(r'(\w+)\s*(?::\s*"[^"]*")?\s*(?:,|$)')
_RETURN = re.compile(r"^        return \((.*?),?\)\s*$", re.M)
_INNER = re.compile(r"^(?:ViewBaseAOTInput|SyntheticBaseAOTInput)\(base_of=(.*)\)$")
_PLAIN = re.compile(r"^PlainAOTInput\(idx=(\d+)\)$")
_TARGET = re.compile(r"""^(Param|Buffer)AOTInput\(target=['"]([^'"]*)['"]\)$""")


def mangle(source: str) -> str:
    """dynamo's placeholder name for a source: every run of non-alphanumerics becomes ``_``."""
    return re.sub(r"[^a-zA-Z0-9]+", "_", source)


def qualname(source: str) -> tuple[str, str]:
    """(role, real name) of a dynamo source: ``L['self']._modules['h']._modules['0']._parameters['w']``
    -> ("parameter", "h.0.w"); ``L['idx']`` -> ("primal", "idx")."""
    parts = re.findall(r"\._(modules|parameters|buffers)\[['\"]([^'\"]+)['\"]\]", source)
    if parts:
        role = {"parameters": "parameter", "buffers": "buffer"}.get(parts[-1][0], "primal")
        return role, ".".join(name for _, name in parts)
    m = re.fullmatch(r"[LG]\[['\"]([^'\"]+)['\"]\](.*)", source)
    if m:
        return "primal", m.group(1) + m.group(2)
    return "primal", source


def def_names(code: str) -> list[str]:
    """The input names of dynamo's graph (its ``def forward(self, a: "...", b: "...")`` line); [] when it
    has none this reads (the caller keeps the graph's own names)."""
    m = _DEF.search(code)
    if m is None:
        return []
    text = m.group(1)
    try:  # the signature alone, as Python: an annotation holding a comma is no argument boundary
        tree = ast.parse(f"def f(self, {text}): pass")
    except SyntaxError:
        return [a for a in _DEF_ARG.findall(text) if a]
    fn = tree.body[0]
    assert isinstance(fn, ast.FunctionDef)
    return [a.arg for a in fn.args.args[1:]]


def returned_names(code: str) -> dict[int, str]:
    """dynamo's names for what the frame returns (``cross_entropy``), by output position: its graph's own
    ``return (...)`` line (8 spaces in; a subgraph's are deeper)."""
    m = _RETURN.search(code)
    if m is None:
        return {}
    items = [t.strip() for t in m.group(1).split(",")]
    return {i: t for i, t in enumerate(items) if re.fullmatch(r"[A-Za-z_]\w*", t)}


def input_names(c: Compile, dynamo_names: Iterable[str]) -> dict[int, tuple[str, str]]:
    """Input position -> (role, real name): each of dynamo's input names matched to the source the log
    describes (a size or a value dynamo made without describing it keeps dynamo's name)."""
    by_mangled: dict[str, tuple[str, str]] = {}
    for tid, src in c.sources:
        role, qual = qualname(src)
        if tid in c.parameters:
            role = "parameter"
        by_mangled.setdefault(mangle(src), (role, qual))
    out: dict[int, tuple[str, str]] = {}
    for i, name in enumerate(dynamo_names):
        out[i] = by_mangled.get(name) or by_mangled.get(re.sub(r"_\d+$", "", name)) or ("primal", name)
    return out


def input_kind(desc: str) -> InputKindText:
    """What an input is by its printed AOT descriptor (``PlainAOTInput(idx=3)``), as
    ``_torch.describe_input`` says it of the descriptor object."""
    desc = desc.strip()
    while (inner := _INNER.match(desc)) is not None:
        desc = inner.group(1)
    if not desc:
        return "none", None
    if desc.startswith("TangentAOTInput("):
        return "tangent", None
    if (m := _PLAIN.match(desc)) is not None:
        return "plain", int(m.group(1))
    if (m := _TARGET.match(desc)) is not None:
        return m.group(1).lower(), m.group(2)
    head = desc.split("(")[0]
    return ("rng" if "Philox" in head else "token" if "Token" in head else "other"), None


def placeholder_roles(placeholders: Iterable[tuple[str, str]], names: Mapping[int, tuple[str, str]]
                      ) -> dict[str, tuple[str, str | None]]:
    """Placeholder name -> (role, real name), from each ``(name, printed descriptor)`` in order, as
    ``roles.input_roles`` says it of a rebuilt graph's: by the descriptor, else the input's position in
    ``names`` (:func:`input_names`); a tangent is a tangent whatever else it is described as."""
    out: dict[str, tuple[str, str | None]] = {}
    for i, (name, desc) in enumerate(placeholders):
        kind, what = input_kind(desc)
        if kind == "tangent" or is_tangent(name, desc):
            out[name] = ("tangent", None)
        elif kind == "none":
            known = names.get(i)
            out[name] = known if known is not None else ("primal", None)
        elif kind in ("param", "buffer"):
            out[name] = ("parameter" if kind == "param" else "buffer", str(what or ""))
        elif kind == "plain" and isinstance(what, int):
            out[name] = names.get(what) or ("primal", f"input {what}")
        else:
            out[name] = ("primal", kind)
    return out
