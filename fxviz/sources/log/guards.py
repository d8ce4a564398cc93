"""What dynamo's guards tell about the compiled frame's modules (issue 33).

A log records no module tree, but dynamo guards every module its frame reads, and logs those guards
(``dynamo_cpp_guards_str``): each ``GuardManager`` line names a source and its type
(``L['self']._modules['blocks']._modules['0']._modules['act']``, ``SiLU``), and a tied weight is
guarded as one object under both names (``LAMBDA_GUARD: L['self']._modules['emb']._parameters['weight']
is L['self']._modules['head']._parameters['weight']``).  From that fxviz knows:

- the child modules that own no parameter (a Llama MLP's ``act_fn``), which the parameters an op reads
  cannot show;
- both names of a tied weight (GPT-2's ``wte`` and ``lm_head``), named once in the graph;
- the modules ``fully_shard`` made FSDP2 modules (their class becomes ``FSDP<Class>``): the parameters
  under one are its all-gathered (unsharded) parameters while the compiled frame runs, as in
  torchtitan's recipe (each block compiled, then sharded: FSDP's hooks run eagerly around the graph,
  which takes the unsharded parameters as inputs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["Guards", "read_guards", "ALLGATHERED", "allgathered_note"]

_MANAGER = re.compile(r"GuardManager: source=(L\[[^,]*?\]),.*?type=<class '([^']+)'>")
_TIED = re.compile(r"LAMBDA_GUARD: (L\[\S+\]) is (L\[\S+\])")
_PART = re.compile(r"\._(modules|parameters|buffers)\[['\"]([^'\"]+)['\"]\]")
_ROOT = re.compile(r"L\[['\"](\w+)['\"]\]")
_EQUALS = re.compile(r"EQUALS_MATCH: (L\[\S+\])\.(\w+) == (\S+)")

ALLGATHERED = "all-gathered by FSDP2"
"""How a parameter's note starts when it is an FSDP2 module's unsharded parameter (every view says it)."""


@dataclass
class Guards:
    """The frame's modules (path -> class, ``""`` the frame's own ``self``) and tied parameters."""

    modules: dict[str, str] = field(default_factory=dict)
    tied: dict[str, list[str]] = field(default_factory=dict)  # parameter -> all its names, first the graph's
    attrs: dict[str, str] = field(default_factory=dict)  # ``drop.p`` -> ``0.0``: a module's guarded constants

    @property
    def fsdp(self) -> dict[str, str]:
        """The FSDP2 modules (path -> class name, ``FSDPBlock``)."""
        return {p: c.rsplit(".", 1)[-1] for p, c in self.modules.items()
                if c.startswith("torch.distributed.fsdp.") and c.rsplit(".", 1)[-1].startswith("FSDP")}

    def fsdp_owner(self, qualname: str) -> tuple[str, str] | None:
        """(path, class) of the innermost FSDP2 module a parameter lies in, None when in none (its
        enclosing paths looked up, innermost first: a 300-layer log asks once per parameter)."""
        parts = qualname.split(".")
        for k in range(len(parts) - 1, -1, -1):
            cls = self.modules.get(".".join(parts[:k]))
            if cls is not None and cls.startswith("torch.distributed.fsdp.") and \
                    cls.rsplit(".", 1)[-1].startswith("FSDP"):
                return ".".join(parts[:k]), cls.rsplit(".", 1)[-1]
        return None


def _path(source: str) -> str | None:
    """``L['self']._modules['h']._modules['0']`` -> ``h.0`` (the frame's module: ``L['self']``, or
    ``L['args'][0]`` when dynamo compiled the module's call); None for a source that is not a chain of
    modules, parameters or buffers from it."""
    m = _ROOT.match(source)
    if m is None or m.group(1) not in ("self", "args"):
        return None
    rest = source[m.end():]
    if m.group(1) == "args":
        if not rest.startswith("[0]"):
            return None
        rest = rest[3:]
    parts = _PART.findall(rest)
    if "".join(f"._{kind}['{name}']" for kind, name in parts) != rest.replace('"', "'"):
        return None
    return ".".join(name for _, name in parts)


def read_guards(text: str) -> Guards:
    """The modules and tied parameters of one compile's guard tree (its ``dynamo_cpp_guards_str``)."""
    g = Guards()
    for m in _MANAGER.finditer(text):
        path = _path(m.group(1))
        if path is None or "._parameters" in m.group(1) or "._buffers" in m.group(1):
            continue
        cls = m.group(2)
        if cls.startswith("torch.nn.parameter") or cls in ("dict", "collections.OrderedDict", "NoneType"):
            continue
        g.modules.setdefault(path, cls)
    for m in _EQUALS.finditer(text):
        path = _path(m.group(1))
        if path is not None and path in g.modules:
            g.attrs[f"{path}.{m.group(2)}" if path else m.group(2)] = m.group(3)
    for m in _TIED.finditer(text):
        a, b = _path(m.group(1)), _path(m.group(2))
        if a and b and "._parameters" in m.group(1) and "._parameters" in m.group(2):
            _tie(g.tied, a, b)
    return g


def _tie(tied: dict[str, list[str]], a: str, b: str) -> None:
    """Parameters ``a`` and ``b`` are one tensor: every name of their group maps to the group's one list."""
    names = tied.get(a) or tied.get(b) or [a]
    for n in (a, b):
        if n not in names:
            names.append(n)
    for n in names:
        tied[n] = names


def allgathered_note(qualname: str, guards: Guards) -> str | None:
    """The note an all-gathered parameter carries in every view, None for any other."""
    owner = guards.fsdp_owner(qualname)
    if owner is None:
        return None
    path, cls = owner
    where = f"`{path}`" if path else "the compiled module"
    return f"{ALLGATHERED}'s {cls} ({where}); unsharded while the graph runs"
