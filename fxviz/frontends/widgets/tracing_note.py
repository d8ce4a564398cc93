"""While ``explore(model, ...)`` traces (torch.compile takes seconds to minutes), a line in IPython
saying what is being traced."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

__all__ = ["tracing_note"]


@contextlib.contextmanager
def tracing_note(model: Any, params: str) -> Iterator[None]:
    """In IPython, a line saying what is being traced while ``explore(model, ...)`` traces
    (torch.compile takes seconds to minutes), replaced by nothing when done."""
    handle = None
    try:
        from IPython import get_ipython
        from IPython.display import HTML, display

        if get_ipython() is not None:
            from html import escape

            what = escape(getattr(model, "__class__", type(model)).__name__)
            handle = display(HTML(f"<p class='fxviz-tracing'>fxviz: tracing {what} (torch.compile + AOTAutograd, "
                                  f"parameters {escape(params)}): joint graph, then the first view…</p>"),
                             display_id=True)
    except ImportError:  # pragma: no cover - IPython comes with ipywidgets
        handle = None
    try:
        yield
    finally:
        if handle is not None:
            handle.update(HTML(""))
