"""Putting model-derived text into an HTML page safely.

Model strings reach a page only as JSON data (read with ``JSON.parse`` and shown with
``textContent``) or inside graphviz SVG whose labels fxviz escaped.  ``script_json`` escapes JSON
so no ``</script>`` or ``<!--`` can end its ``<script>`` element; ``clean_svg`` checks that an SVG
holds only graphviz's own elements and attributes, so a label that escaped its escaping is
refused rather than shown.
"""

from __future__ import annotations

import base64
import gzip
import json
import math
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from typing import Any

from fxviz.core.errors import RenderError

__all__ = ["clean_svg", "page_data", "page_json", "script_json", "packed_json", "unpack_json", "SVG_ELEMENTS"]

# graphviz's SVG vocabulary for fxviz drawings; anything else is refused (see clean_svg)
SVG_ELEMENTS = {"svg", "g", "title", "polygon", "polyline", "path", "ellipse", "circle", "rect", "line", "text",
                 "tspan", "a", "defs", "linearGradient", "radialGradient", "stop"}
_PROLOG = re.compile(r"^\s*(<\?xml[^>]*\?>\s*)?(<!DOCTYPE[^>]*>\s*)?", re.S)
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_XMLNS = re.compile(r'\s+xmlns(:xlink)?="[^"]*"')



def clean_svg(svg: str) -> str:
    """graphviz SVG -> an ``<svg>`` element ready to sit inside HTML: no prolog, no comments, no
    namespace URLs (HTML's parser puts ``<svg>`` in the SVG namespace by itself).

    Raises ``RenderError`` if the SVG holds anything graphviz does not write for fxviz (a script,
    an event-handler attribute, a link): it would mean a model string escaped its escaping.
    """
    try:
        root = ET.fromstring(svg.encode("utf-8"))
    except ET.ParseError as exc:
        raise RenderError(f"graphviz produced SVG that does not parse: {exc}",
                          "this is a bug in fxviz's DOT output; please report it") from exc
    for el in root.iter():
        tag = el.tag.rsplit("}", 1)[-1]
        if tag not in SVG_ELEMENTS:
            raise RenderError(f"refusing SVG with a <{tag}> element", "please report this model to fxviz")
        for attr, value in el.attrib.items():
            name = attr.rsplit("}", 1)[-1].lower()
            low = value.strip().lower()
            if name.startswith("on") or name == "href" or name == "style" or low.startswith("javascript:") or (
                    "url(" in low and not re.fullmatch(r"url\(#[\w.-]+\)", low)):
                raise RenderError(f"refusing SVG with attribute {name}={value[:40]!r}",
                                  "please report this model to fxviz")
    text = _PROLOG.sub("", svg, count=1)
    text = _COMMENT.sub("", text)
    start = text.find("<svg")
    head_end = text.find(">", start)
    text = text[:start] + _XMLNS.sub("", text[start:head_end]) + text[head_end:]
    return text.strip()


def page_data(data: Any) -> Any:
    """``data`` as plain JSON values, the one conversion every page datum goes through (widget traits
    and report alike): NaN and infinities become ``None`` (the page shows "—"), numpy scalars and
    arrays become Python numbers and lists, tuples and sets become lists.  Anything else that JSON
    cannot hold raises ``TypeError`` naming it, rather than a page that fails to parse.

    >>> page_data({"a": float("nan"), "b": (1, float("inf")), "c": None})
    {'a': None, 'b': [1, None], 'c': None}
    """
    if data is None or isinstance(data, (str, bool)):
        return data
    if isinstance(data, int):
        return int(data)
    if isinstance(data, float):
        return float(data) if math.isfinite(data) else None
    if isinstance(data, Mapping):
        return {str(k): page_data(v) for k, v in data.items()}
    if isinstance(data, (list, tuple, set, frozenset)):
        return [page_data(v) for v in data]
    if hasattr(data, "tolist") and callable(data.tolist):  # numpy (and torch) scalars and arrays
        return page_data(data.tolist())
    if hasattr(data, "item") and callable(data.item):
        return page_data(data.item())
    raise TypeError(f"page data cannot hold a {type(data).__name__}: {data!r:.60}")


def page_json(data: Any) -> str:
    """``data`` as strict JSON (``page_data`` first, then ``allow_nan=False``): no ``NaN`` or
    ``Infinity`` token, which ``JSON.parse`` refuses, can reach a page."""
    return json.dumps(page_data(data), ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def script_json(data: Any) -> str:
    """JSON that is safe inside ``<script type="application/json">``: ``<``, ``>``, ``&`` and the
    two JavaScript line separators are written as ``\\u`` escapes, so no string can close the
    element or open a comment; ``JSON.parse`` reads back the same values."""
    text = page_json(data)
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def packed_json(data: Any) -> str:
    """``data`` as JSON, gzipped and base64-encoded, wrapped in a small JSON object that is safe
    inside ``<script type="application/json">`` (base64 has no ``<``, ``>`` or ``&``).  The page
    reads it back with ``DecompressionStream("gzip")`` and ``JSON.parse``.  Graphviz SVG and the
    node records compress about eightfold: this keeps a report of a real model a few MB."""
    raw = page_json(data).encode("utf-8")
    payload = base64.b64encode(gzip.compress(raw, compresslevel=9, mtime=0)).decode("ascii")
    return script_json({"encoding": "gzip+base64", "payload": payload})


def unpack_json(text: str) -> Any:
    """The inverse of :func:`packed_json` (and plain :func:`script_json` text passes through)."""
    outer = json.loads(text)
    if isinstance(outer, dict) and outer.get("encoding") == "gzip+base64":
        return json.loads(gzip.decompress(base64.b64decode(outer["payload"])).decode("utf-8"))
    return outer
