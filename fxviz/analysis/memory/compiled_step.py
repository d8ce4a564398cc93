"""The compiled training step's memory, from inductor's code: every graph run's forward code in run
order, then their backward codes in reverse, on one pool of storages, with what AOTAutograd and the
autograd engine do between them.

What runs between the codes, as torch does it (checked against the profiler on real steps):

- after a forward, the values saved for the backward stay in the graph's autograd context; the user
  outputs go to the caller: a value that crosses a graph break is the producer's output, handed to the
  next graph as an input (an activation of the step, held while anything holds it); outputs nobody
  uses and that are not the loss die when the forward ends (a ``ModelOutput``'s logits, a KV cache);
- the backward begins with the loss's gradient (``torch.autograd.backward``'s ones, held until it
  returns); each compiled backward gets its saved values (the donated ones reused in place) and a
  tangent per differentiable output: the gradient a later graph's backward made, the loss's ones, or
  zeros AOTAutograd materializes for an output no gradient reached (Llama's KV cache and logits:
  196,612 B);
- where two consumers' gradients of one value meet, the engine adds them out of place (the sum is
  allocated, both freed); a parameter's gradient is kept by ``AccumulateGrad``, which copies a
  gradient whose strides break the parameter's layout (AlexNet's channels-last conv weight
  gradients: the copy and the gradient alive together).

Bytes are above the step's start: parameters and user inputs are held by the caller and not counted
(the memory table adds ``resident_bytes``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from fxviz.analysis.memory.code_text import CodeText
from fxviz.analysis.memory.compiled import Peak, Pool, simulate

__all__ = ["GraphCode", "StepRun", "StepMemory", "TapeEvent", "step_memory", "grad_copies"]


@dataclass
class GraphCode:
    """One graph's compiled forward and backward, and how their inputs and outputs map.

    ``user_outputs``: user output j -> its forward output position; ``tangents``: a backward tangent
    input's name -> the user output it is the gradient of; ``parameters``: forward input positions
    that hold model state (their gradients stay, kept by ``AccumulateGrad``); ``*_sizes``: IR bytes of
    extern outputs (empty from a log); ``*_peaks``: measured bytes extern lines allocate inside
    themselves; ``copies``: bytes of each gradient ``AccumulateGrad`` copies into its parameter's layout."""

    piece: int
    forward: CodeText
    backward: CodeText | None
    num_fwd_outputs: int
    user_outputs: dict[int, int] = field(default_factory=dict)
    tangents: dict[str, int] = field(default_factory=dict)
    parameters: frozenset[int] = frozenset()
    forward_sizes: dict[str, int] = field(default_factory=dict)
    backward_sizes: dict[str, int] = field(default_factory=dict)
    forward_peaks: dict[int, int] = field(default_factory=dict)
    backward_peaks: dict[int, int] = field(default_factory=dict)
    copies: tuple[int, ...] = ()

    def output_position(self, j: int) -> int:
        return self.user_outputs.get(j, j)


@dataclass(frozen=True)
class StepRun:
    """One run of a graph in the step: which graph, the inputs an earlier run's output fed (forward
    input position -> (that run's position, its user output index)), and the inputs code the
    simulation does not run made (eager code at a graph break, a graph left out): activations held
    from the run's start by the caller until the forward ends (and by the graph if it saves them)."""

    graph: int
    links: Mapping[int, tuple[int, int]] = field(default_factory=dict)
    made_outside: frozenset[int] = frozenset()


@dataclass
class StepMemory:
    """The simulated step: its pool (every storage and event), each phase's peak, and what was held
    when the backward began (``after_forward``, and those storages) and when it ended."""

    pool: Pool
    after_forward: int
    held_after_forward: tuple[int, ...]
    end: int
    outputs: dict[int, list[int | None]]  # run position -> its forward's returned storages
    # bytes code outside the graphs holds when the backward begins (an eager layer's saved input, a
    # graph output it keeps), beyond what the graphs save and the loss: known only with a tape
    outside_held: int | None = None
    gradients: frozenset[int] = frozenset()  # the storages AccumulateGrad keeps (parameters' gradients)

    @property
    def forward_peak(self) -> Peak:
        return self.pool.peaks.get("forward", Peak())

    @property
    def backward_peak(self) -> Peak:
        return self.pool.peaks.get("backward", Peak())


@dataclass(frozen=True)
class TapeEvent:
    """One thing the real step did outside its graphs' code, in time order (``analysis.real.eager_tape``):
    ``forward`` / ``backward`` a graph's code ran (``graph``: which); ``alloc`` / ``free`` eager code
    allocated or freed ``nbytes`` at ``ptr``; ``dead`` the last reference to run ``run``'s output
    ``output`` went; ``freed_in_graph`` a graph's code freed an eager allocation (a tangent it consumed)."""

    kind: str
    phase: str = "forward"
    graph: int = -1
    ptr: int = 0
    nbytes: int = 0
    run: int = -1
    output: int = -1


class _Step:
    """The step's state while its codes run: the pool, each run's returned storages, the user outputs
    the caller holds, the gradients the engine holds for earlier runs' outputs, the loss's gradient."""

    def __init__(self, codes: Sequence[GraphCode], runs: Sequence[StepRun], loss: tuple[int, int] | None) -> None:
        self.codes, self.runs, self.loss = codes, runs, loss
        self.pool = Pool(granule=max((c.forward.granule for c in codes), default=1))
        self.returned: dict[int, list[int | None]] = {}
        self.frame: dict[tuple[int, int], int] = {}
        self.gradients: dict[tuple[int, int], int] = {}
        self.kept: set[int] = set()  # parameters' gradients
        self.root: int | None = None

    def code(self, r: int) -> GraphCode:
        return self.codes[self.runs[r].graph]

    def forward(self, r: int, made_outside: bool = True) -> None:
        """Run ``r``'s forward code; its user outputs go to the caller, its saved values stay."""
        code, run, pool = self.code(r), self.runs[r], self.pool
        inputs: list[int | None] = [None] * len(code.forward.inputs)
        for position in sorted(run.made_outside - set(run.links)) if made_outside else ():
            if position < len(inputs):
                name = code.forward.inputs[position]
                layout = code.forward.input_layouts.get(name)
                made = pool.new(layout.nbytes if layout else 0, name, "input", r, refs=2)  # the caller's, the list's
                self.frame[(r, -1 - position)] = made
                inputs[position] = made
        for position, (producer, j) in run.links.items():
            if position < len(inputs) and producer in self.returned:
                fed = self.returned[producer][self.code(producer).output_position(j)]
                inputs[position] = fed
                pool.ref(fed)  # the caller's argument list
        outs = simulate(code.forward, pool, run=r, inputs=inputs, sizes=code.forward_sizes,
                        line_peaks=code.forward_peaks)
        self.returned[r] = outs
        users = {code.output_position(j): j for j in range(code.num_fwd_outputs)}
        for k, out in enumerate(outs[:code.num_fwd_outputs]):
            user = users.get(k)
            if user is None or out is None:
                pool.unref(out)  # a mutated input's new value, an intermediate base: the runtime drops it
            else:
                self.frame[(r, user)] = out
        pool.note(r, -1, "(graph returned)", keep=False)

    def release(self, source: tuple[int, int]) -> None:
        """The caller's reference to run ``source[0]``'s output ``source[1]`` goes."""
        self.pool.unref(self.frame.pop(source, None))

    def begin_backward(self) -> None:
        self.pool.phase = "backward"

    def loss_gradient(self) -> None:
        """``torch.autograd.backward``'s ones for the loss, held until it returns."""
        if self.loss is None or self.loss not in self.frame:
            return
        code = self.code(self.loss[0])
        tangent = next((n for n, j in code.tangents.items() if j == self.loss[1]), None)
        layout = code.backward.input_layouts.get(tangent) if code.backward and tangent else None
        self.root = self.pool.new(layout.nbytes if layout else 4, "loss gradient", "tangent", -1, refs=1)
        self.pool.note(-1, -1, "torch.autograd.backward: the loss's gradient (ones)")

    def tangent(self, r: int, name: str) -> int | None:
        """A gradient the step already holds for backward input ``name``: a later run's, or the loss's
        (its reference moves into the argument list); None when it holds none."""
        j = self.code(r).tangents.get(name)
        if j is not None and (r, j) == self.loss and self.root is not None:
            self.pool.ref(self.root)
            return self.root
        if j is not None and (r, j) in self.gradients:
            return self.gradients.pop((r, j))
        return None

    def zeros(self, r: int, name: str) -> int:
        """AOTAutograd's zeros for an output no gradient reached (or a gradient code outside the graphs made)."""
        backward = self.code(r).backward
        layout = backward.input_layouts.get(name) if backward is not None else None
        return self.pool.new(layout.nbytes if layout else 0, name, "zeros", r, refs=1)

    def backward(self, r: int, outside: Callable[[int, str], int | None]) -> None:
        """Run ``r``'s backward code: ``outside(r, name)`` gives a tangent the step holds no gradient for."""
        code, pool = self.code(r), self.pool
        text = code.backward
        if text is None:
            return
        symints = [n for n in text.inputs if n in text.int_inputs]
        saved = list(self.returned[r][code.num_fwd_outputs:])
        saved = saved[:len(saved) - len(symints)] if symints else saved  # saved SymInts: last out, first in
        inputs: list[int | None] = []
        for name in text.inputs:
            if name in text.int_inputs:
                inputs.append(None)
            elif name in code.tangents or name.startswith("tangents"):
                held = self.tangent(r, name)
                inputs.append(held if held is not None else outside(r, name))
            else:
                inputs.append(saved.pop(0) if saved else None)  # the autograd context's reference moves over
        outs = simulate(text, pool, run=r, inputs=inputs, sizes=code.backward_sizes, line_peaks=code.backward_peaks)
        for i, sid in enumerate(outs):
            source = self.runs[r].links.get(i)
            if sid is not None and source is None:
                self.kept.add(sid)  # a parameter's (or a leaf input's) gradient: AccumulateGrad keeps it
            if sid is None or source is None:
                continue
            if source in self.gradients:  # two consumers' gradients meet: the engine adds them out of place
                first = self.gradients.pop(source)
                total = pool.new(pool.storages[sid].nbytes, "gradient sum", "grad sum", r, refs=1)
                pool.note(r, -1, "autograd engine: two gradients of one value added")
                pool.unref(sid)
                pool.unref(first)
                self.gradients[source] = total
            else:
                self.gradients[source] = sid
        if code.copies:  # AccumulateGrad: a copy in the parameter's layout beside the gradient, then the swap
            pool.note(r, -1, "AccumulateGrad: a gradient copied into its parameter's layout",
                      high=pool.live + max(code.copies))

    def result(self, after_forward: int, held: tuple[int, ...], outside_held: int | None = None) -> StepMemory:
        self.pool.note(-1, -1, "(backward returned)", keep=False)
        return StepMemory(self.pool, after_forward, held, self.pool.live, self.returned, outside_held,
                          frozenset(self.kept))

    def held_outside(self) -> int:
        """Bytes alive now that eager code made or keeps (a graph output past its graph), beyond what
        the graphs save for their backward and the loss."""
        saved = {sid for r, outs in self.returned.items() for sid in outs[self.code(r).num_fwd_outputs:]}
        kept = {sid for source, sid in self.frame.items() if source != self.loss}
        loss = self.frame.get(self.loss) if self.loss is not None else None
        return sum(self.pool.storages[sid].nbytes for sid in self.pool.alive()
                   if sid not in saved and sid != loss and (sid in kept or self.pool.storages[sid].made == "eager"))


def step_memory(codes: Sequence[GraphCode], runs: Sequence[StepRun], loss: tuple[int, int] | None,
                tape: Sequence[TapeEvent] | None = None) -> StepMemory:
    """Simulate the step: ``runs`` in order (each names its ``codes`` entry), ``loss``: (run position,
    user output) of the loss when a graph returns it, None when code outside the graphs computes it.
    ``tape``: what the real step did outside its graphs (then its order, its eager allocations and
    its outputs' deaths are followed); without it, torch's rules (module docstring)."""
    if tape is not None:
        return _spliced(codes, runs, loss, tape)
    step = _Step(codes, runs, loss)
    last_use: dict[tuple[int, int], int] = {}
    for r, run in enumerate(runs):
        for source in run.links.values():
            last_use[source] = r
    for r, run in enumerate(runs):
        step.forward(r)
        for source in {s for s in run.links.values() if last_use.get(s) == r and s != loss}:
            step.release(source)  # the caller is done with a value it handed on
    for source in [s for s in step.frame if s != loss]:  # outputs no one reads: dropped as the forward ends
        step.release(source)
    after_forward, held = step.pool.live, step.pool.alive()
    step.begin_backward()
    step.loss_gradient()
    for r in reversed(range(len(runs))):
        step.backward(r, step.zeros)
    step.pool.unref(step.root)  # torch.autograd.backward returns
    if loss is not None:
        step.release(loss)
    return step.result(after_forward, held)


def _spliced(codes: Sequence[GraphCode], runs: Sequence[StepRun], loss: tuple[int, int] | None,
             tape: Sequence[TapeEvent]) -> StepMemory:
    """The step in the real step's order, its eager code's allocations spliced in by pointer."""
    step = _Step(codes, runs, loss)
    pool = step.pool
    eager: dict[int, int] = {}  # pointer -> storage of an eager allocation
    claimed: set[int] = set()  # eager allocations a graph took as a tangent (its code frees them)
    pending: list[int] = []  # eager allocations the next backward's code frees
    made_in_backward: list[int] = []
    forwards = 0
    seen_backward = False
    done: set[int] = set()
    after: tuple[int, tuple[int, ...]] | None = None

    def outside(r: int, name: str) -> int | None:
        backward = step.code(r).backward
        layout = backward.input_layouts.get(name) if backward is not None else None
        want = layout.nbytes if layout else -1
        for candidates in (pending, list(reversed(made_in_backward))):
            ptr = next((p for p in candidates if p in eager and pool.storages[eager[p]].nbytes == want), None)
            if ptr is not None:
                claimed.add(ptr)
                if ptr in made_in_backward:
                    made_in_backward.remove(ptr)
                return eager.pop(ptr)  # the tape's reference moves into the argument list
        return None

    outside_held = 0
    for e in tape:
        if e.phase == "backward" and after is None:
            after = (pool.live, pool.alive())
            outside_held = step.held_outside()
            step.begin_backward()
        if e.kind == "forward" and forwards < len(runs):
            step.forward(forwards, made_outside=False)
            forwards += 1
        elif e.kind == "alloc":
            first_in_backward = e.phase == "backward" and not seen_backward
            seen_backward = seen_backward or e.phase == "backward"
            eager[e.ptr] = pool.new(e.nbytes, "eager code" if not first_in_backward else "loss gradient", "eager", -1,
                                    refs=1)
            claimed.discard(e.ptr)
            if e.phase == "backward" and not first_in_backward:  # the first: the loss's ones, held throughout
                made_in_backward.append(e.ptr)
            pool.note(-1, -1, "eager code between graphs")
        elif e.kind == "free":
            if e.ptr in claimed:
                claimed.discard(e.ptr)
            else:
                pool.unref(eager.pop(e.ptr, None))
                pool.note(-1, -1, "eager code between graphs")
        elif e.kind == "dead":
            step.release((e.run, e.output))
        elif e.kind == "freed_in_graph":
            pending.append(e.ptr)
        elif e.kind == "backward":
            r = max((i for i, run in enumerate(runs) if run.graph == e.graph and i not in done), default=None)
            if r is None:
                continue
            done.add(r)
            step.backward(r, outside)
            for ptr in pending:
                if ptr in claimed:
                    claimed.discard(ptr)
                else:
                    pool.unref(eager.pop(ptr, None))
            pending = []
    if after is None:
        after = (pool.live, pool.alive())
    return step.result(*after, outside_held)


def grad_copies(forward: CodeText, backward: CodeText, parameters: frozenset[int]) -> tuple[int, ...]:
    """Bytes of each gradient ``AccumulateGrad`` copies: a parameter's gradient whose strides differ
    from the parameter's (its layout contract), unless every dimension but one is 1."""
    from fxviz.analysis.memory.code_text import Layout

    copies = []
    for position, (name, expr) in enumerate(zip(forward.inputs, backward.returned)):
        if position not in parameters or expr == "None" or name not in forward.input_layouts:
            continue
        if expr.startswith("reinterpret_tensor("):
            parts = expr[len("reinterpret_tensor("):]
            base = parts.split(",", 1)[0].strip()
            size, stride = _size_stride(backward, parts)
            layout = Layout(size, stride, backward.layouts[base].dtype if base in backward.layouts else "torch.float32")
        elif expr in backward.layouts:
            layout = backward.layouts[expr]
        else:
            continue
        param = forward.input_layouts[name]
        if tuple(layout.stride) != tuple(param.stride) and sum(1 for s in layout.size if s != 1) > 1:
            copies.append(param.nbytes)
    return tuple(copies)


def _size_stride(text: CodeText, args: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    from fxviz.analysis.memory.code_text import split_top_level

    items = split_top_level("(" + args.rstrip(")") + ")")
    return text.ints(items[1]), text.ints(items[2])
