"""``fxviz.trace``: the door from a model (or a function) and its example inputs to a :class:`Trace`.
Kept apart from the facade it opens, so that neither module is named like the function it defines."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fxviz.api.facade import Trace
from fxviz.core.errors import InputError
from fxviz.sources.model.routes import capture

__all__ = ["trace"]


def trace(model_or_fn: Callable, *example_inputs: Any, loss_fn: Callable | None = None,
          params: str = "lifted", capture_route: str = "auto", backend: str | None = None,
          dynamic: bool = False, inputs: dict[str, Any] | None = None, compile_loss: bool = False,
          **keyword_inputs: Any) -> Trace:
    """Trace ``model_or_fn(*example_inputs, **keyword_inputs)`` into its joint forward+backward graph.

    Args:
        model_or_fn: an ``nn.Module`` or a function of tensors.
        *example_inputs: the inputs to call it with (tensors; token ids are fine).
        **keyword_inputs: keyword inputs, as the model is called:
            ``fxviz.trace(model, input_ids=ids, labels=ids)``.  A keyword that is also an fxviz
            option (``loss_fn``, ``params``, ``capture_route``, ``backend``, ``dynamic``, ``inputs``,
            ``compile_loss``) goes in ``inputs``.
        inputs: keyword inputs as a dict, the one way that always works:
            ``fxviz.trace(model, ids, inputs={"params": p})``.
        loss_fn: maps the outputs to a scalar, applied where a ``torch.compile(model)`` step applies
            it: outside the compiled model (``loss_fn(out).backward()``), so the graph returns every
            output the model returns and its backward gets their gradients as tangents.  Default: the
            model's own loss when it returns one (``out.loss`` of a ``ModelOutput``, dict or
            namedtuple), applied outside the graph too; else the output itself if it is a scalar,
            else the sum of every floating output (traced into the graph).
        compile_loss: trace ``loss_fn`` into the graph, as ``torch.compile`` of a step that computes
            the loss does.
        params: ``"lifted"`` (parameters and buffers become graph inputs, as torch.compile does)
            or ``"closure"`` (parameters are captured as constants, as ``aot_function`` on a
            closure does: the backward then computes no parameter gradient).
        capture_route: ``"auto"`` (dynamo, or aot for meta-device models and closure mode),
            ``"dynamo"`` (torch.compile's capture: module paths, source lines, graph breaks) or
            ``"aot"`` (aot_function over fake tensors: no weights touched, no graph breaks).
        backend: whose joint graph to capture.  Default: what ``torch.compile(model)`` runs,
            ``"inductor"`` (inductor's decompositions, e.g. gelu as erf, and its joint-graph passes;
            min-cut called as inductor calls it; no kernel is generated), and for the ``aot`` and
            ``closure`` routes what ``aot_function`` traces.  ``"aot_eager"``: the graph AOTAutograd
            traces with its own decompositions, before any inductor pass.  Views show the partition
            the user's step makes by default: min-cut as torch.compile calls it (its knapsack under
            torch's ``activation_memory_budget``), or ``default_partition`` for ``aot_function``.
        dynamic: torch.compile's flag: trace with symbolic sizes (SymInts saved for the backward
            are listed; bytes are evaluated at the example sizes).

    Returns:
        A :class:`Trace`.  With graph breaks, it is the first graph; ``tr.pieces`` has them all,
        ``tr.draw(piece=i)`` draws one, ``tr.overview()`` all of them in execution order,
        ``tr.memory_table(scope="step")`` tabulates each and the whole step, and ``tr.doctor()``
        reasons over all of them (code that ran outside every graph, graphs reused for several modules).

    The model, its ``.grad`` fields, buffers, ``training`` flags and the RNG are left untouched.
    """

    both = sorted(set(keyword_inputs) & set(inputs or {}))
    if both:
        raise InputError(f"keyword input(s) {both} given both as keywords and in inputs=", "pass each input once")
    return Trace(capture(model_or_fn, tuple(example_inputs), loss_fn=loss_fn, params=params,
                         route=capture_route, backend=backend, dynamic=dynamic,
                         keyword_inputs={**(inputs or {}), **keyword_inputs}, compile_loss=compile_loss))
