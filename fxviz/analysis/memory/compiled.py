"""Inductor's wrapper code run as text: which storages exist after each line, with Python's reference
semantics (a storage lives while a name, a tuple or a view holds it).  No kernel runs; nothing is
allocated.

This is how the compiled step's peak is found: the wrapper code already says everything inductor
decided (what it fused away, which buffer it reuses, where it frees), so stepping through it line by
line on one ``Pool`` of storages gives the memory curve of the real step.  ``empty_strided`` lines
allocate (size from the line's shape, stride and dtype); an extern kernel that returns new tensors
allocates its outputs (sizes from the IR on a model's route, from the ``assert_size_stride`` that
follows on a log's); ``X = Y; del Y  # reuse`` renames; ``reinterpret_tensor`` makes a view; ``del``
drops a name; ``args.clear()`` releases the caller's list; ``return`` hands the outputs over and
the frame's names die.  What an extern kernel allocates inside itself (oneDNN's weight reorders,
attention workspaces) is not in the text: ``line_peaks`` brings it, measured
(``analysis.real.probe``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from fxviz.analysis.memory.code_text import (
    ALIAS,
    ALLOC,
    CALL,
    DEL,
    ITEM,
    REINTERPRET,
    REUSE,
    SYMBOL,
    CodeText,
    item_path,
)

__all__ = ["Storage", "Peak", "Event", "Pool", "simulate"]


@dataclass
class Storage:
    """One storage of the step: its bytes, the name that made it (``buf3``, ``tangents_1``, ``loss
    gradient``), how (``buffer``, ``extern``, ``input``, ``tangent``, ``zeros``, ``grad sum``,
    ``grad copy``, ``eager``), and the graph run and phase that made it (run -1: the runtime)."""

    sid: int
    nbytes: int
    name: str
    made: str
    run: int
    phase: str
    refs: int = 0
    counted: bool = True  # False: held by the caller anyway (a parameter, a user input): not step memory


@dataclass(frozen=True)
class Peak:
    """The highest point of a phase: bytes, where (run, line index in that run's code, the line), the
    storages live then, and bytes an extern kernel held inside itself at that moment."""

    nbytes: int = 0
    run: int = -1
    index: int = -1
    line: str = ""
    live: tuple[int, ...] = ()
    transient: int = 0


@dataclass(frozen=True)
class Event:
    """One line that changed memory (or allocated inside a kernel): the pool's bytes after it, the
    highest point while it ran, and the storage it made."""

    run: int
    phase: str
    index: int
    line: str
    live: int
    high: int
    made: int | None = None


@dataclass
class Pool:
    """Every storage of one simulated step, the bytes live now, each phase's peak and the events."""

    storages: dict[int, Storage] = field(default_factory=dict)
    live: int = 0
    phase: str = "forward"
    granule: int = 1  # what the allocator rounds every block up to (CUDA's caching allocator: 512 B)
    peaks: dict[str, Peak] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    _alive: set[int] = field(default_factory=set)

    def new(self, nbytes: int, name: str, made: str, run: int, *, counted: bool = True, refs: int = 0) -> int:
        sid = len(self.storages) + 1
        if nbytes > 0 and self.granule > 1:
            nbytes = -(-nbytes // self.granule) * self.granule
        self.storages[sid] = Storage(sid, nbytes, name, made, run, self.phase, refs, counted)
        if counted and refs > 0:
            self.live += nbytes
            self._alive.add(sid)
        return sid

    def ref(self, sid: int | None, n: int = 1) -> None:
        if sid is None:
            return
        s = self.storages[sid]
        if s.refs == 0 and s.counted:
            self.live += s.nbytes
            self._alive.add(sid)
        s.refs += n

    def unref(self, sid: int | None, n: int = 1) -> None:
        if sid is None:
            return
        s = self.storages[sid]
        s.refs -= n
        if s.refs <= 0 and s.counted and sid in self._alive:
            s.refs = 0
            self.live -= s.nbytes
            self._alive.discard(sid)

    def alive(self) -> tuple[int, ...]:
        return tuple(sorted(self._alive))

    def note(self, run: int, index: int, line: str, high: int | None = None, made: int | None = None,
             keep: bool = True) -> None:
        """Record a line (``high``: the highest point while it ran, when above what is live after it)."""
        top = max(self.live, high or 0)
        best = self.peaks.get(self.phase)
        if best is None or top > best.nbytes:
            self.peaks[self.phase] = Peak(top, run, index, line, self.alive(), top - self.live)
        if keep:
            self.events.append(Event(run, self.phase, index, line, self.live, top, made))


def _bind(pool: Pool, names: dict[str, int | tuple[int, ...]], name: str, value: int | tuple[int, ...]) -> None:
    for sid in value if isinstance(value, tuple) else (value,):
        pool.ref(sid)
    old = names.get(name)
    names[name] = value
    if old is not None:
        _release(pool, old)


def _release(pool: Pool, value: int | tuple[int, ...]) -> None:
    for sid in value if isinstance(value, tuple) else (value,):
        pool.unref(sid)


def _drop(pool: Pool, names: dict[str, int | tuple[int, ...]], name: str) -> None:
    value = names.pop(name, None)
    if value is not None:
        _release(pool, value)


def _returned(text: CodeText, names: Mapping[str, int | tuple[int, ...]]) -> list[int | None]:
    out: list[int | None] = []
    for expr in text.returned:
        base = expr.split("(", 1)[1].split(",", 1)[0].strip() if expr.startswith("reinterpret_tensor(") else expr
        value = names.get(base)
        out.append(value if isinstance(value, int) else None)
    return out


def simulate(text: CodeText, pool: Pool, *, run: int, inputs: Sequence[int | None] = (),
             sizes: Mapping[str, int] | None = None, line_peaks: Mapping[int, int] | None = None
             ) -> list[int | None]:
    """Step through ``text``'s ``call`` body on ``pool``; returns each returned value's storage.

    ``inputs[k]``: the storage the caller passes as input ``k``, with one reference held by the
    caller's argument list (``args.clear()`` drops it); an input without one is a tensor the caller
    holds anyway (a parameter, a user input): not counted.  ``sizes``: bytes of extern outputs from
    the IR (else their ``assert_size_stride``).  ``line_peaks``: bytes an extern line allocates
    inside itself, outputs included, measured.  The returned storages keep one reference each (the
    returned tuple), which the caller takes over."""
    sizes = sizes or {}
    line_peaks = line_peaks or {}
    names: dict[str, int | tuple[int, ...]] = {}
    paths: dict[str, list[tuple[int, ...]]] = {}  # a tuple's index paths, in the order of its storages
    held: list[int] = []  # the caller's argument list
    for i, line in enumerate(text.body):
        before = pool.live
        high: int | None = None
        made: int | None = None
        if not line or line.startswith("#") or line.startswith("assert_size_stride") or SYMBOL.match(line):
            continue
        if line.endswith("= args") and not held and not names:
            for k, name in enumerate(text.inputs):
                given = inputs[k] if k < len(inputs) else None
                if given is None:
                    layout = text.input_layouts.get(name)
                    given = pool.new(layout.nbytes if layout else 0, name, "input", run, counted=False)
                else:
                    held.append(given)
                _bind(pool, names, name, given)
        elif line == "args.clear()":
            for sid in held:
                pool.unref(sid)
            held = []
        elif (m := ALLOC.match(line)):
            layout = text.layouts[m.group(1)]
            made = pool.new(layout.nbytes, m.group(1), "buffer", run)
            _bind(pool, names, m.group(1), made)
        elif (m := REUSE.match(line)):
            _bind(pool, names, m.group(1), names[m.group(2)])
            _drop(pool, names, m.group(3))
        elif (m := REINTERPRET.match(line)):
            if m.group(2) in names:
                _bind(pool, names, m.group(1), names[m.group(2)])
            if m.group(6):
                _drop(pool, names, m.group(6))
        elif (m := DEL.match(line)):
            for name in m.group(1).split(","):
                _drop(pool, names, name.strip())
        elif (m := ITEM.match(line)):
            whole, path = names.get(m.group(2)), item_path(m.group(3))
            if isinstance(whole, tuple) and path in paths.get(m.group(2), ()):
                _bind(pool, names, m.group(1), whole[paths[m.group(2)].index(path)])
            else:  # an element of a tuple the text did not show being made
                made = pool.new(_extern_bytes(text, sizes, m.group(1), i), m.group(1), "extern", run)
                _bind(pool, names, m.group(1), made)
        elif (m := ALIAS.match(line)):
            if m.group(2) in names:
                _bind(pool, names, m.group(1), names[m.group(2)])
        elif (m := CALL.match(line)) and not line.startswith("return "):
            name = m.group(1)
            items = text.items_of(i, name)
            if items:  # several outputs: one storage each (by index path: nested tuples flattened)
                paths[name] = [path for path, _ in items]
                several = tuple(pool.new(_extern_bytes(text, sizes, item, i), item, "extern", run) for _, item in items)
                made = several[0] if several else None
                _bind(pool, names, name, several)
            else:
                made = pool.new(_extern_bytes(text, sizes, name, i), name, "extern", run)
                _bind(pool, names, name, made)
            if i in line_peaks:
                high = before + line_peaks[i]
        elif line.startswith("return "):
            outputs = _returned(text, names)
            for out in outputs:
                pool.ref(out)
            for name in list(names):
                _drop(pool, names, name)
            for sid in held:
                pool.unref(sid)
            pool.note(run, i, line)
            return outputs
        elif i in line_peaks:  # an out= extern call: what it allocates inside itself
            high = before + line_peaks[i]
        else:
            continue  # a kernel writing into buffers that exist already
        if pool.live != before or (high is not None and high > pool.live) or made is not None:
            pool.note(run, i, line, high, made)
    return []


def _extern_bytes(text: CodeText, sizes: Mapping[str, int], name: str, index: int) -> int:
    if name in sizes:
        return sizes[name]
    layout = text.asserted(index, name)
    return layout.nbytes if layout is not None else 0
