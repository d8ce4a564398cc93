"""What an extern kernel of inductor's code allocates inside itself, measured: each extern line run
once on tensors of the code's shapes, strides and dtypes, under the profiler.

The wrapper code shows a kernel's outputs, not its scratch: oneDNN reorders a channels-last
convolution weight to its blocked format on every call (AlexNet's conv 4: 3,538,944 B beside its
output), the CPU flash-attention kernels take a workspace (8 KiB on one thread; it grows with the
thread count), a convolution's backward reorders again.  Those decide AlexNet's forward peak (the
code alone is 21% low).  The line's highest allocation point, its outputs included, becomes the
line's peak in the simulation (``analysis.memory.compiled.simulate(line_peaks=...)``).

Calls are deduplicated by their text and argument layouts (a block graph's identical layers are one
probe each).  Ops whose memory depends on the values (``nonzero``, masked selects) are not probed.
The global RNG is put back (an ``aten.randint`` line draws).  A call that cannot run here (another
device, an op this build lacks) is left out: the simulation then has no transient for it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import torch

from fxviz._torch.lowering import extern_call_namespace
from fxviz._torch.profiling import high_water
from fxviz.analysis.memory.code_text import CodeText, Layout
from fxviz.core.expressions import call_expression
from fxviz.core.state import restore_rng, rng_state

__all__ = ["line_peaks"]

_VALUE_DEPENDENT = ("nonzero", "masked_select", "unique", "index_put", "_local_scalar_dense")
_NAME = re.compile(r"\b([A-Za-z_]\w*)\b")


def _tensor(layout: Layout, device: str) -> torch.Tensor:
    dtype = getattr(torch, layout.dtype.replace("torch.", ""))
    t = torch.empty_strided(layout.size, layout.stride, dtype=dtype, device=device)
    if dtype.is_floating_point:
        t.normal_()
    elif dtype == torch.bool:
        t.fill_(True)
    else:
        t.zero_()
    return t


def _call_peak(expr: str, layouts: Mapping[str, Layout], device: str) -> int | None:
    """Highest bytes allocated while ``expr`` runs, its outputs included; None if it cannot run here."""
    try:
        namespace = extern_call_namespace()
        for name in set(_NAME.findall(expr)) & set(layouts):
            namespace[name] = _tensor(layouts[name], device)
        call = call_expression(expr, namespace)  # checked: names, attributes, literals, calls; no eval
        with torch.no_grad():
            call()
            return high_water(call, device)
    except Exception:
        return None


def line_peaks(text: CodeText, device: str = "cpu") -> dict[int, int]:
    """Body line index -> what that extern line allocates at its highest, outputs included (every
    extern call: those that return tensors and those that write ``out=``)."""
    layouts = text.layouts
    measured: dict[tuple[object, ...], int | None] = {}
    out: dict[int, int] = {}
    state = rng_state()
    try:
        for i, line in enumerate(text.body):
            expr = text.extern_call(line)
            if expr is None or any(word in expr.split("(", 1)[0] for word in _VALUE_DEPENDENT):
                continue
            names = sorted(set(_NAME.findall(expr)) & set(layouts))
            key = (_NAME.sub(lambda m: "T" if m.group(0) in layouts else m.group(0), expr),
                   tuple(layouts[n] for n in names))
            if key not in measured:
                measured[key] = _call_peak(expr, layouts, device)
            peak = measured[key]
            if peak is not None:
                out[i] = peak
    finally:
        restore_rng(state)
    return out
