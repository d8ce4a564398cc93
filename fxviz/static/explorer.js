// fxviz explorer front-end: the graph pane (zoom, pan, click for details, search) and its side
// panel (details, memory table, doctor findings, legend).
//
// One ES module, two uses:
//   * the notebook widget: anywidget loads this file from inside the fxviz package
//     (`export default { render }`);
//   * the HTML report: fxviz inlines this file, followed by report.js, into one
//     module script element, and report.js calls createPane() directly.
// Nothing is fetched from the network.  Strings from the model reach the page only through
// textContent, or inside SVG that fxviz produced with graphviz; that SVG is sanitized again here
// (an allowlist of graphviz's elements, no event-handler attributes, no links).
//
// One job per part, in this order: sanitize/parseSvg (SVG in), h (DOM out), ZoomPan (the view
// window), buildLayout (the pane's elements), bindZoomControls/bindDragAndClick (zoom and pan
// input), createViewLoader (loading views, parsed once), markSelection (selection),
// createDetailsPanel (details), applySearch (search), renderTable, renderDoctor, renderLegend
// (side sections); createPane only wires them and keeps the pane's state; render is the widget.
// It stays one file: anywidget loads it from a blob (no relative imports) and the report inlines
// it before report.js, which calls createPane.

const ALLOWED_ELEMENTS = new Set([
  "svg", "g", "title", "polygon", "polyline", "path", "ellipse", "circle", "rect", "line",
  "text", "tspan", "a", "defs", "lineargradient", "radialgradient", "stop",
]);
const RECOMPUTED_SUFFIX = "~recomputed";

/** Remove every element and attribute graphviz does not produce for fxviz drawings. */
function sanitize(root) {
  const walker = [root];
  while (walker.length) {
    const el = walker.pop();
    for (const child of Array.from(el.children)) {
      if (!ALLOWED_ELEMENTS.has(child.localName.toLowerCase())) {
        child.remove();
        continue;
      }
      walker.push(child);
    }
    for (const attr of Array.from(el.attributes)) {
      const name = attr.name.toLowerCase();
      const value = attr.value.trim().toLowerCase();
      const badUrl = value.includes("url(") && !/^url\(#[\w.-]+\)$/.test(value);
      if (name.startsWith("on") || name === "href" || name.endsWith(":href") || name === "style" ||
          value.startsWith("javascript:") || badUrl) {
        el.removeAttributeNode(attr);
      }
    }
  }
  return root;
}

/** Parse SVG text (graphviz output, without its XML prolog) into a sanitized, adopted element. */
export function parseSvg(text) {
  if (!text) return null;
  // An inert HTML document: nothing in it runs, loads or renders.
  const doc = new DOMParser().parseFromString(`<!DOCTYPE html><body>${text}`, "text/html");
  const svg = doc.body.querySelector("svg");
  if (!svg) return null;
  if (!ALLOWED_ELEMENTS.has("svg")) return null;
  sanitize(svg);
  return document.importNode(svg, true);
}

/** Small DOM builder: strings become text nodes, never HTML. */
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "text") el.textContent = v;
    else if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function baseName(id) {
  const i = id.indexOf("~");
  return i < 0 ? id : id.slice(0, i);
}

function quoteModule(path) {
  // the same quoting as fxviz.render.dot.group_scene: urllib.parse.quote(path, safe="._-")
  return encodeURIComponent(path).replace(/[!'()*~]/g, (c) => "%" + c.charCodeAt(0).toString(16).toUpperCase());
}

/** Zoom and pan by rewriting the SVG's viewBox; the SVG fills its viewport. */
class ZoomPan {
  constructor(viewport) {
    this.viewport = viewport;
    this.svg = null;
    this.base = null;
    this.vb = null;
    this.touched = false;  // has the user zoomed or panned this drawing?
    this.size = "";
    if (typeof ResizeObserver !== "undefined") {
      // a widget is often rendered before it is in the page: size the view once it has a size
      this.observer = new ResizeObserver(() => {
        const r = viewport.getBoundingClientRect();
        const size = `${Math.round(r.width)}x${Math.round(r.height)}`;
        if (size === this.size || !r.width || !r.height) return;
        this.size = size;
        if (this.svg && !this.touched) this.initial();
      });
      this.observer.observe(viewport);
    }
  }

  attach(svg, keep) {
    const old = this.svg && this.base && this.vb ? { base: this.base, vb: this.vb } : null;
    this.svg = svg;
    const vb = (svg.getAttribute("viewBox") || "").split(/[\s,]+/).map(Number);
    if (vb.length === 4 && vb.every(Number.isFinite)) {
      this.base = { x: vb[0], y: vb[1], w: vb[2], h: vb[3] };
    } else {
      const w = parseFloat(svg.getAttribute("width")) || 800;
      const hh = parseFloat(svg.getAttribute("height")) || 600;
      this.base = { x: 0, y: 0, w, h: hh };
    }
    svg.removeAttribute("width");
    svg.removeAttribute("height");
    svg.setAttribute("preserveAspectRatio", "xMidYMin meet");
    if (!keep) this.touched = false;
    if (keep && old) {
      // same kind of view: keep the same relative window onto the new layout
      const fx = this.base.w / old.base.w;
      const fy = this.base.h / old.base.h;
      this.vb = {
        x: this.base.x + (old.vb.x - old.base.x) * fx, y: this.base.y + (old.vb.y - old.base.y) * fy,
        w: old.vb.w * fx, h: old.vb.h * fy,
      };
      this.apply();
    } else {
      this.initial();
    }
  }

  /** the whole drawing when its labels stay readable, else its full width from the top;
   *  never magnified beyond 1:1 */
  initial() {
    const r = this.viewport.getBoundingClientRect();
    if (!r.width || !r.height) return this.fit(false);
    const pxPerUnit = Math.min(r.width / this.base.w, r.height / this.base.h);
    if (pxPerUnit >= 0.6) return this.oneToOne(Math.min(pxPerUnit, 96 / 72));
    this.fitWidth(false);
    if (this.unitsPerPixel() < 72 / 96) this.oneToOne(96 / 72);
  }

  /** `px` screen pixels per SVG unit, anchored at the top center */
  oneToOne(px) {
    const r = this.viewport.getBoundingClientRect();
    const w = r.width / px;
    const hh = r.height / px;
    this.vb = { x: this.base.x + (this.base.w - w) / 2, y: this.base.y, w, h: hh };
    this.apply();
  }

  apply() {
    if (!this.svg || !this.vb) return;
    const { x, y, w, h: hh } = this.vb;
    this.svg.setAttribute("viewBox", `${x} ${y} ${w} ${hh}`);
  }

  /** user units per screen pixel */
  unitsPerPixel() {
    const r = this.viewport.getBoundingClientRect();
    if (!r.width || !r.height) return 1;
    return Math.max(this.vb.w / r.width, this.vb.h / r.height);
  }

  fit(user = true) {
    if (!this.base) return;
    if (user) this.touched = true;
    this.vb = { ...this.base };
    this.apply();
  }

  /** fit the width of the drawing, top aligned (for tall graphs: readable labels at once) */
  fitWidth(user = true) {
    if (!this.base) return;
    if (user) this.touched = true;
    const r = this.viewport.getBoundingClientRect();
    if (!r.width || !r.height) return this.fit(user);
    const w = this.base.w;
    const hh = Math.min(this.base.h, (w * r.height) / r.width);
    this.vb = { x: this.base.x, y: this.base.y, w, h: hh };
    this.apply();
  }

  zoom(factor, clientX, clientY) {
    if (!this.vb) return;
    this.touched = true;
    const r = this.viewport.getBoundingClientRect();
    const px = clientX === undefined ? r.left + r.width / 2 : clientX;
    const py = clientY === undefined ? r.top + r.height / 2 : clientY;
    const p = this.toSvg(px, py);
    const w = Math.min(Math.max(this.vb.w / factor, this.base.w / 200), this.base.w * 20);
    const k = w / this.vb.w;
    this.vb = { x: p.x - (p.x - this.vb.x) * k, y: p.y - (p.y - this.vb.y) * k, w, h: this.vb.h * k };
    this.apply();
  }

  panBy(dx, dy) {
    if (!this.vb) return;
    this.touched = true;
    const u = this.unitsPerPixel();
    this.vb = { ...this.vb, x: this.vb.x - dx * u, y: this.vb.y - dy * u };
    this.apply();
  }

  toSvg(clientX, clientY) {
    const ctm = this.svg && this.svg.getScreenCTM();
    if (!ctm) return { x: this.vb.x + this.vb.w / 2, y: this.vb.y + this.vb.h / 2 };
    const p = new DOMPoint(clientX, clientY).matrixTransform(ctm.inverse());
    return { x: p.x, y: p.y };
  }

  /** bring an element into view (centered), zooming in only when it is unreadably small */
  reveal(el) {
    if (!this.vb || !el || typeof el.getBBox !== "function") return;
    this.touched = true;
    let box;
    try { box = el.getBBox(); } catch (e) { return; }
    const ctm = el.getCTM && el.getCTM();
    const rootCtm = this.svg.getCTM && this.svg.getCTM();
    let cx = box.x + box.width / 2;
    let cy = box.y + box.height / 2;
    if (ctm && rootCtm) {
      // getBBox is in the element's own coordinates; graphviz's root <g> translates them
      const m = rootCtm.inverse().multiply(ctm);
      const p = new DOMPoint(cx, cy).matrixTransform(m);
      cx = p.x; cy = p.y;
    }
    const u = this.unitsPerPixel();
    if (box.height / u < 12) {
      const w = Math.max(this.vb.w * ((box.height / u) / 24), this.base.w / 200);
      const k = w / this.vb.w;
      this.vb = { ...this.vb, w, h: this.vb.h * k };
    }
    this.vb = { ...this.vb, x: cx - this.vb.w / 2, y: cy - this.vb.h / 2 };
    this.clamp();
    this.apply();
  }

  /** keep the window on the drawing: no empty margins where the window is smaller than the
   *  drawing, the drawing centered (horizontally) or on top (vertically) where it is larger */
  clamp() {
    const { base, vb } = this;
    vb.x = vb.w < base.w ? Math.min(Math.max(vb.x, base.x), base.x + base.w - vb.w) : base.x + (base.w - vb.w) / 2;
    vb.y = vb.h < base.h ? Math.min(Math.max(vb.y, base.y), base.y + base.h - vb.h) : base.y;
  }
}

// --- the pane's elements ---------------------------------------------------------------------------
/** Build the pane's DOM inside `root` (no behaviour) and return its parts by name. */
function buildLayout(root) {
  const button = (cls, title, text) => h("button", { type: "button", class: cls, title, text });
  const buttons = {
    zoomIn: button("fxviz-zoom-in", "zoom in (+)", "+"),
    zoomOut: button("fxviz-zoom-out", "zoom out (-)", "\u2212"),
    zoomFit: button("fxviz-zoom-fit", "whole graph (0)", "fit"),
    zoomWidth: button("fxviz-zoom-width", "fit width (w)", "width"),
  };
  const status = h("div", { class: "fxviz-statusline", "aria-live": "polite" });
  const caption = h("div", { class: "fxviz-caption" });
  const hint = h("span", { class: "fxviz-hint", text: "scroll: zoom \u00b7 drag: pan \u00b7 click a node: details" });
  const toolbar = h("div", { class: "fxviz-toolbar" }, Object.values(buttons), hint, status);
  const viewport = h("div", { class: "fxviz-viewport", tabindex: "0", role: "application",
                              "aria-label": "graph: scroll to zoom, drag to pan, click a node for details" });
  const busyText = h("span", { class: "fxviz-busy-text" });
  const busy = h("div", { class: "fxviz-busy", hidden: true }, h("span", { class: "fxviz-spinner" }), busyText);
  const errorBox = h("div", { class: "fxviz-error", hidden: true });
  const graph = h("div", { class: "fxviz-graph" }, toolbar, h("div", { class: "fxviz-stage" }, viewport, busy), errorBox, caption);

  const details = h("div", { class: "fxviz-details-body" }, h("p", { class: "fxviz-muted", text: "Click a node in the graph." }));
  const tableBox = h("div", { class: "fxviz-table-body" }, h("p", { class: "fxviz-muted", text: "computing\u2026" }));
  const doctorBox = h("div", { class: "fxviz-doctor-body" }, h("p", { class: "fxviz-muted", text: "\u2014" }));
  const legendBox = h("div", { class: "fxviz-legend-body" });
  const section = (cls, title, body) => h("section", { class: `fxviz-section ${cls}` }, h("h4", { text: title }), body);
  const side = h("div", { class: "fxviz-side" },
    section("fxviz-details", "Details", details),
    section("fxviz-memory", "Memory", tableBox),
    section("fxviz-doctor", "Doctor", doctorBox),
    section("fxviz-legend", "Legend", legendBox));
  const el = h("div", { class: "fxviz-explorer" }, h("div", { class: "fxviz-main" }, graph, side));
  root.append(el);
  return { el, status, caption, viewport, busy, busyText, errorBox, details, tableBox, doctorBox, legendBox, buttons };
}

// --- zoom and pan: buttons, wheel, keys, drag ------------------------------------------------------
const ZOOM_STEP = 1.4;
const PAN_STEP = 60;  // screen pixels per arrow key

/** The zoom buttons, the wheel and the keyboard drive `zp`; returns a function that detaches the wheel. */
function bindZoomControls({ viewport, buttons }, zp) {
  buttons.zoomIn.addEventListener("click", () => zp.zoom(ZOOM_STEP));
  buttons.zoomOut.addEventListener("click", () => zp.zoom(1 / ZOOM_STEP));
  buttons.zoomFit.addEventListener("click", () => zp.fit(true));
  buttons.zoomWidth.addEventListener("click", () => zp.fitWidth(true));
  const onWheel = (e) => {
    if (!zp.vb) return;
    e.preventDefault();
    const delta = e.deltaMode === 1 ? e.deltaY * 16 : e.deltaY;
    zp.zoom(Math.exp(-delta * 0.0015), e.clientX, e.clientY);
  };
  viewport.addEventListener("wheel", onWheel, { passive: false });
  const keys = {
    "+": () => zp.zoom(ZOOM_STEP), "=": () => zp.zoom(ZOOM_STEP), "-": () => zp.zoom(1 / ZOOM_STEP), "0": () => zp.fit(),
    "w": () => zp.fitWidth(), "ArrowLeft": () => zp.panBy(PAN_STEP, 0), "ArrowRight": () => zp.panBy(-PAN_STEP, 0),
    "ArrowUp": () => zp.panBy(0, PAN_STEP), "ArrowDown": () => zp.panBy(0, -PAN_STEP),
  };
  viewport.addEventListener("keydown", (e) => {
    if (keys[e.key]) { e.preventDefault(); keys[e.key](); }
  });
  return () => viewport.removeEventListener("wheel", onWheel);
}

/** Dragging (beyond 4 px) pans `zp`; a click on a node that ends no drag calls `onNodeClick(title)`. */
function bindDragAndClick(viewport, zp, onNodeClick) {
  let drag = null;
  let dragged = false;
  viewport.addEventListener("pointerdown", (e) => {
    if (e.button !== 0) return;
    drag = { x: e.clientX, y: e.clientY, id: e.pointerId, active: false };
    dragged = false;
  });
  viewport.addEventListener("pointermove", (e) => {
    if (!drag || e.pointerId !== drag.id) return;
    const dx = e.clientX - drag.x;
    const dy = e.clientY - drag.y;
    if (!drag.active && Math.hypot(dx, dy) > 4) {
      drag.active = true;
      dragged = true;
      viewport.setPointerCapture(e.pointerId);
      viewport.classList.add("fxviz-dragging");
    }
    if (drag.active) {
      zp.panBy(dx, dy);
      drag.x = e.clientX;
      drag.y = e.clientY;
    }
  });
  const endDrag = (e) => {
    if (drag && drag.active && viewport.hasPointerCapture(e.pointerId)) viewport.releasePointerCapture(e.pointerId);
    viewport.classList.remove("fxviz-dragging");
    drag = null;
  };
  viewport.addEventListener("pointerup", endDrag);
  viewport.addEventListener("pointercancel", endDrag);
  viewport.addEventListener("click", (e) => {
    if (dragged) { dragged = false; return; }
    const unit = e.target.closest && e.target.closest("g.node");
    if (unit && viewport.contains(unit)) {
      const title = unit.querySelector(":scope > title");
      if (title) onNodeClick(title.textContent);
    }
  });
}

// --- loading views: parse a drawing once, show it many times ---------------------------------------
const PARSED_MAX = 64;

/** Ready a freshly parsed drawing for the pane (its class, its own viewBox, the node outlines) and
 *  index its drawn units (nodes and module boxes) by title. */
function prepareDrawing(svg) {
  svg.classList.add("fxviz-svg");
  svg.dataset.baseViewBox = svg.getAttribute("viewBox") || "";
  const units = new Map();
  for (const g of svg.querySelectorAll("g.node")) {
    const title = g.querySelector(":scope > title");
    if (title) units.set(title.textContent, g);
    // the node's outline (two for a double border): every shape before its first text
    for (const shape of g.querySelectorAll("path, polygon, ellipse, text")) {
      if (shape.localName === "text") break;
      shape.classList.add("fxviz-outline");
    }
  }
  return { svg, units };
}

/** `drawing(text)`: the parsed drawing of an SVG text, remembered (the least recently used of more
 *  than `max` dropped), so a view seen before is re-attached, not parsed again. */
function createDrawingCache(max = PARSED_MAX) {
  const parsed = new Map();
  return function drawing(text) {
    if (parsed.has(text)) {
      const hit = parsed.get(text);
      parsed.delete(text);
      parsed.set(text, hit);
      return hit;
    }
    const svg = parseSvg(text);
    if (!svg) return null;
    const entry = prepareDrawing(svg);
    parsed.set(text, entry);
    if (parsed.size > max) parsed.delete(parsed.keys().next().value);
    return entry;
  };
}

/** Shows one drawing (or none) in the viewport, handed to `zp`: `show(text, keepZoom)` returns its
 *  units, or null; `preload(text)` parses ahead of time. */
function createViewLoader(viewport, zp) {
  const drawing = createDrawingCache();
  return {
    preload(text) { if (text) drawing(text); },
    show(text, keepZoom) {
      const entry = text ? drawing(text) : null;
      viewport.replaceChildren();
      if (!entry) { zp.svg = null; return null; }
      if (entry.svg.dataset.baseViewBox) entry.svg.setAttribute("viewBox", entry.svg.dataset.baseViewBox);
      viewport.append(entry.svg);
      zp.attach(entry.svg, keepZoom);
      return entry.units;
    },
  };
}

// --- selection: the drawn unit of a node, and its marks ----------------------------------------------
/** the drawn unit (node or module box) that shows joint node `id` in this view */
function unitFor(units, nodes, id) {
  if (units.has(id)) return units.get(id);
  const name = baseName(id);
  if (units.has(name)) return units.get(name);
  if (units.has(name + RECOMPUTED_SUFFIX)) return units.get(name + RECOMPUTED_SUFFIX);
  const node = nodes[name];
  if (node && node.module) {
    const parts = node.module.split(".");
    const sides = id.endsWith(RECOMPUTED_SUFFIX) ? ["backward", node.phase] : [node.phase, "forward", "backward"];
    for (let d = parts.length; d >= 1; d--) {
      for (const s of sides) {
        const gid = `${s}/${quoteModule(parts.slice(0, d).join("."))}`;
        if (units.has(gid)) return units.get(gid);
      }
    }
  }
  return null;
}

/** Mark `state.selected`'s unit and the units of its producers and users (clearing old marks);
 *  bring it into view when `reveal`.  Returns the unit, or null when it is not drawn. */
function markSelection(viewport, state, zp, reveal) {
  for (const g of viewport.querySelectorAll(".fxviz-selected")) g.classList.remove("fxviz-selected");
  for (const g of viewport.querySelectorAll(".fxviz-neighbor")) g.classList.remove("fxviz-neighbor");
  if (!state.selected) return null;
  const unit = unitFor(state.units, state.nodes, state.selected);
  if (!unit) return null;
  unit.classList.add("fxviz-selected");
  const node = state.nodes[baseName(state.selected)];
  if (node) {
    for (const n of [...node.inputs, ...node.users]) {
      const u = state.units.get(n);
      if (u && u !== unit) u.classList.add("fxviz-neighbor");
    }
  }
  if (reveal) zp.reveal(unit);
  return unit;
}

// --- details panel: the selected node's facts --------------------------------------------------------
/** What strategy status `s` does with node `name`, in words. */
function statusText(s, name) {
  if (!s) return null;
  if (s.error) return `${s.label}: failed (${s.error})`;
  const bits = [];
  if (s.saved.includes(name)) bits.push("saved for the backward");
  if (s.recomputed.includes(name)) bits.push("recomputed in the backward");
  if (s.removed.includes(name)) bits.push("removed (dead code)");
  if (s.random && s.random.includes(name)) bits.push("a random op the backward redraws");
  return bits.length ? bits.join("; ") : "neither saved nor recomputed";
}

/** The module box `gid` (`side/quoted.module.path`): its side, its module path, the nodes inside. */
function groupMembers(nodes, gid) {
  const slash = gid.indexOf("/");
  const side = gid.slice(0, slash);
  const path = decodeURIComponent(gid.slice(slash + 1));
  const members = Object.values(nodes).filter((n) => n.phase === side && n.module &&
    (n.module === path || n.module.startsWith(path + ".")));
  return { side, path, members };
}

/** `linkList(names)`: node names as comma-separated links that call `onPick(name)`. */
function nodeLinks(state, onPick) {
  const link = (name) => {
    const known = Object.prototype.hasOwnProperty.call(state.nodes, name);
    return h("a", { href: "#", class: "fxviz-link", "data-node": name, title: known ? `select ${name}` : name,
                    onclick: (e) => { e.preventDefault(); onPick(name); } }, name);
  };
  return (names) => {
    if (!names || !names.length) return h("span", { class: "fxviz-muted", text: "none" });
    const out = h("span", { class: "fxviz-links" });
    names.forEach((n, i) => { if (i) out.append(", "); out.append(link(n)); });
    return out;
  };
}

/** The key/value table of node `node` (named `name`): what it is, where it comes from, what the
 *  strategy (or both compared strategies) does with it, its producers and users. */
function nodeFacts(node, name, state, linkList) {
  const rows = [];
  const row = (k, ...v) => rows.push(h("tr", {}, h("th", { text: k }), h("td", {}, ...v)));
  const muted = (text) => h("span", { class: "fxviz-muted", text });
  const status = (s, label) => [h("span", { class: "fxviz-status-text", text: statusText(s, name) }), muted(` (${label})`)];
  row("role", h("span", { class: `fxviz-swatch fxviz-role-${node.role}` }), node.role_label, muted(` (${node.phase} phase)`));
  row("op", h("code", { text: node.op }), node.target && node.target !== node.op ? muted(`  ${node.target}`) : null);
  if (node.shape) row("shape", h("code", { class: "fxviz-shape", text: `[${node.shape.join(", ")}]` }));
  if (node.symbolic_shape) row("symbolic size", h("code", { text: node.symbolic_shape }), muted("  (bytes at the example sizes)"));
  if (node.dtype) row("dtype", h("code", { text: node.dtype }));
  if (node.bytes !== null && node.bytes !== undefined) row("bytes", `${node.bytes_text} (${node.bytes.toLocaleString("en-US")} B)`);
  if (node.qualname) row("real name", h("code", { text: node.qualname }));
  if (node.checkpoint_policy || node.checkpoint_region !== null && node.checkpoint_region !== undefined)
    row("checkpoint", h("code", { text: node.checkpoint_policy || "no policy" }), muted(`  region ${node.checkpoint_region ?? "?"}`));
  row("module", node.module ? h("code", { text: node.module }) : muted("none recorded"));
  if (node.source) row("source", h("code", { text: node.source }), node.code ? h("div", { class: "fxviz-code", text: node.code }) : null);
  if (state.view === "compare" && state.compare) {
    row("A", ...status(state.status, state.status ? state.status.label : ""));
    row("B", ...status(state.compare, state.compare.label));
  } else if (state.status) {
    row("status", ...status(state.status, state.status.label));
  }
  row("producers", linkList(node.inputs));
  row("users", linkList(node.users), node.returned ? muted(" (returned by the graph)") : null);
  return h("table", { class: "fxviz-kv" }, h("tbody", {}, rows));
}

/** A note when node `unit` is not drawn as itself in this view (null when it is). */
function drawnWhere(unit, nodes) {
  if (!unit) return h("p", { class: "fxviz-note", text: "not drawn in this view" });
  if (!unit.classList.contains("fx-group")) return null;
  const t = unit.querySelector(":scope > title");
  const box = t ? groupMembers(nodes, t.textContent) : null;
  return h("p", { class: "fxviz-note",
                  text: box ? `drawn inside the module box \u201c${box.path}\u201d (${box.side})` : "drawn inside a module box" });
}

/** The details section: `render(unit)` shows `state.selected` (a node or a module box). */
function createDetailsPanel(box, state, linkList) {
  function renderGroup(gid) {
    const { side, path, members } = groupMembers(state.nodes, gid);
    box.append(h("div", { class: "fxviz-details-head" }, h("code", { class: "fxviz-node-name", text: path }),
      h("span", { class: "fxviz-badge", text: `module box, ${side}` })));
    box.append(h("p", { text: `${members.length} nodes collapsed into this box:` }));
    box.append(h("p", {}, linkList(members.map((m) => m.name))));
  }

  function render(unit) {
    box.replaceChildren();
    const id = state.selected;
    if (!id) {
      box.append(h("p", { class: "fxviz-muted", text: "Click a node in the graph." }));
      return;
    }
    const name = baseName(id);
    const node = state.nodes[name];
    if (!node) {
      if (unit && unit.classList.contains("fx-group")) return renderGroup(id);
      box.append(h("p", { text: `${id}: not a node of this graph` }));
      return;
    }
    const facts = nodeFacts(node, name, state, linkList);
    const head = h("div", { class: "fxviz-details-head" }, h("code", { class: "fxviz-node-name", text: name }));
    if (id.endsWith(RECOMPUTED_SUFFIX)) head.append(h("span", { class: "fxviz-badge", text: "the backward's recomputed copy" }));
    box.append(head);
    const where = drawnWhere(unit, state.nodes);
    if (where) box.append(where);
    box.append(facts);
  }

  return { render };
}

// --- search ------------------------------------------------------------------------------------------
function matches(node, q) {
  return [node.name, node.op, node.target, node.module, node.qualname]
    .some((f) => f && f.toLowerCase().includes(q));
}

/** Mark the drawn units that show a node of `hit` (or a module box whose path matches `q`);
 *  returns how many. */
function markMatches(state, hit, q) {
  let drawn = 0;
  for (const [id, g] of state.units) {
    let ok;
    if (g.classList.contains("fx-group")) {
      const { path, members } = groupMembers(state.nodes, id);
      ok = path.toLowerCase().includes(q) || members.some((m) => hit.has(m.name));
    } else {
      ok = hit.has(baseName(id));
    }
    if (ok) { g.classList.add("fxviz-match"); drawn += 1; }
  }
  return drawn;
}

/** Highlight the nodes matching `state.query` (names, ops, targets, modules, real names), fade
 *  the rest, say how many on the status line; sets and returns `state.lastSearch`. */
function applySearch(viewport, statusLine, state) {
  const q = state.query.trim().toLowerCase();
  for (const g of viewport.querySelectorAll(".fxviz-match")) g.classList.remove("fxviz-match");
  const svg = viewport.querySelector("svg");
  if (!q) {
    if (svg) svg.classList.remove("fxviz-searching");
    state.lastSearch = { query: "", nodes: 0, drawn: 0 };
    statusLine.textContent = "";
    return state.lastSearch;
  }
  const hit = new Set(Object.values(state.nodes).filter((n) => matches(n, q)).map((n) => n.name));
  const drawn = markMatches(state, hit, q);
  if (svg) svg.classList.add("fxviz-searching");
  state.lastSearch = { query: state.query, nodes: hit.size, drawn };
  statusLine.textContent = hit.size
    ? `search \u201c${state.query}\u201d: ${hit.size} matching node${hit.size === 1 ? "" : "s"}, ${drawn} highlighted in this view`
    : `search \u201c${state.query}\u201d: no node matches (names, ops, modules)`;
  statusLine.classList.toggle("fxviz-nomatch", hit.size === 0);
  return state.lastSearch;
}

// --- memory table ------------------------------------------------------------------------------------
const TABLE_HINT = "click a row to switch to that strategy";

/** One strategy's row: selected (`state.highlight`), compared with, failed; a click calls `onRowClick(key)`. */
function tableRow(r, state, onRowClick) {
  const tr = h("tr", { "data-strategy": r.key, class: "fxviz-row", title: r.error ? r.error : TABLE_HINT });
  if (r.key === state.highlight) { tr.classList.add("fxviz-row-selected"); tr.setAttribute("aria-selected", "true"); }
  if (state.view === "compare" && r.key === state.compareHighlight) tr.classList.add("fxviz-row-compare");
  if (r.error) tr.classList.add("fxviz-row-error");
  r.cells.forEach((c, i) => tr.append(h(i === 0 ? "th" : "td", { text: c, class: r.best && r.best[i] ? "fxviz-best" : null })));
  tr.addEventListener("click", () => onRowClick(r.key));
  return tr;
}

/** The memory section: `state.table` (columns, rows, caption), or its message while there is none. */
function renderTable(box, state, onRowClick) {
  box.replaceChildren();
  const t = state.table;
  if (!t || !t.rows) {
    box.append(h("p", { class: "fxviz-muted", text: t && t.message ? t.message : "computing\u2026" }));
    return;
  }
  const head = h("tr", {}, t.columns.map((c, i) => h("th", { text: c, title: (t.tips || [])[i] || null })));
  const body = t.rows.map((r) => tableRow(r, state, onRowClick));
  box.append(h("table", { class: "fxviz-table" }, h("thead", {}, head), h("tbody", {}, body)));
  if (t.caption) box.append(h("details", { class: "fxviz-table-caption" }, h("summary", { text: "how these are counted" }), h("p", { text: t.caption })));
}

// --- doctor ------------------------------------------------------------------------------------------
/** One finding: severity tag and title, its items, the fix, links to its nodes. */
function doctorFinding(f, linkList) {
  const item = h("div", { class: `fxviz-finding fxviz-severity-${f.severity || "info"}` },
    h("div", { class: "fxviz-finding-title" }, h("span", { class: "fxviz-severity", text: f.severity || "info" }), " ", f.title || ""));
  if (f.items && f.items.length) item.append(h("ul", {}, f.items.map((t) => h("li", { text: t }))));
  if (f.hint) item.append(h("p", { class: "fxviz-hint-text", text: `fix: ${f.hint}` }));
  if (f.nodes && f.nodes.length) item.append(h("p", {}, "nodes: ", linkList(f.nodes)));
  return item;
}

/** The doctor section: the headline (healthy or not) and every finding of `d`. */
function renderDoctor(box, d, linkList) {
  box.replaceChildren();
  if (!d) { box.append(h("p", { class: "fxviz-muted", text: "\u2014" })); return; }
  if (d.message) {
    const cls = d.healthy === true ? "fxviz-doctor-ok" : d.healthy === false ? "fxviz-doctor-bad" : "fxviz-muted";
    box.append(h("p", { class: `fxviz-doctor-headline ${cls}`, text: d.message }));
  }
  for (const f of d.findings || []) box.append(doctorFinding(f, linkList));
}

// --- legend ------------------------------------------------------------------------------------------
/** The legend section: role swatches and status marks; the compare marks in the compare view. */
function renderLegend(box, l, view) {
  box.replaceChildren();
  if (!l) return;
  const list = () => h("ul", { class: "fxviz-legend-list" });
  const mark = (k, m, text) => h("li", { title: m.description },
    h("span", { class: `fxviz-mark fxviz-mark-${k}` }), h("b", { text: k }), h("span", { class: "fxviz-muted", text: ` \u2014 ${text}` }));
  const roles = list();
  for (const [role, r] of Object.entries(l.roles)) {
    roles.append(h("li", { title: r.description }, h("span", { class: `fxviz-swatch fxviz-role-${role}` }), r.label));
  }
  const marks = list();
  for (const [k, m] of Object.entries(l.status)) marks.append(mark(k, m, m.cue));
  box.append(roles, marks);
  if (view === "compare") {
    const cmp = list();
    for (const [k, m] of Object.entries(l.compare)) cmp.append(mark(k, m, m.description));
    box.append(cmp);
  }
}

// --- the pane: wiring ----------------------------------------------------------------------------------
/**
 * The explorer pane.  `opts.onSelect(id)` is called when the user selects a node,
 * `opts.onRowClick(strategyKey)` when a memory-table row is clicked, `opts.onSearch(result)`
 * after every search.
 */
export function createPane(root, opts = {}) {
  const state = {
    nodes: {}, status: null, compare: null, view: "joint", selected: "", query: "",
    units: new Map(), table: null, highlight: "", compareHighlight: "", legend: null, doctor: null,
    lastSearch: { nodes: 0, drawn: 0 },
  };
  const ui = buildLayout(root);
  const { el } = ui;
  const zp = new ZoomPan(ui.viewport);
  const loader = createViewLoader(ui.viewport, zp);
  const linkList = nodeLinks(state, (name) => select(name, { reveal: true, notify: true }));
  const details = createDetailsPanel(ui.details, state, linkList);
  const detachWheel = bindZoomControls(ui, zp);
  bindDragAndClick(ui.viewport, zp, (title) => select(title, { reveal: false, notify: true }));

  const search = () => applySearch(ui.viewport, ui.status, state);
  const table = () => renderTable(ui.tableBox, state, (key) => { if (opts.onRowClick) opts.onRowClick(key); });
  const legend = () => renderLegend(ui.legendBox, state.legend, state.view);
  const markSelected = (reveal) => {
    const unit = markSelection(ui.viewport, state, zp, reveal);
    if (state.selected) details.render(unit);  // a cleared selection leaves the details as they were
  };
  function select(id, { reveal = true, notify = true } = {}) {
    state.selected = id || "";
    markSelected(reveal);
    if (notify && opts.onSelect) opts.onSelect(state.selected);
  }
  function setSvg(text, { keepZoom = false, key = "" } = {}) {
    const t0 = performance.now();
    const units = loader.show(text, keepZoom);
    state.units = units || new Map();
    if (units) {
      search();
      markSelected(false);
      el.dataset.renderMs = (performance.now() - t0).toFixed(1);
    }
    el.dataset.units = String(state.units.size);
    el.dataset.viewKey = key;
  }
  function setSearch(q) {
    state.query = q || "";
    const r = search();
    if (opts.onSearch) opts.onSearch(r);
    return r;
  }

  return {
    el,
    setSvg,
    select: (id) => select(id, { reveal: true, notify: false }),
    setSearch,
    setNodes(nodes) { state.nodes = nodes || {}; markSelected(false); search(); },
    setStatus(s, cmp) { state.status = s || null; state.compare = cmp || null; markSelected(false); },
    setView(view) { state.view = view || "joint"; el.dataset.view = state.view; table(); legend(); markSelected(false); },
    setTable(t) { state.table = t; table(); },
    setHighlight(key, compareKey) { state.highlight = key || ""; state.compareHighlight = compareKey || ""; table(); },
    setDoctor(d) { state.doctor = d; renderDoctor(ui.doctorBox, d, linkList); },
    setLegend(l) { state.legend = l; legend(); },
    setCaption(text) { ui.caption.textContent = text || ""; },
    setBusy(msg) {
      ui.busy.hidden = !msg;
      ui.busyText.textContent = msg || "";
      el.classList.toggle("fxviz-is-busy", !!msg);
    },
    setError(msg) { ui.errorBox.hidden = !msg; ui.errorBox.textContent = msg || ""; el.classList.toggle("fxviz-has-error", !!msg); },
    /** parse a drawing ahead of time (idle time), so its first showing is instant too */
    preload: loader.preload,
    get lastSearch() { return state.lastSearch; },
    get selected() { return state.selected; },
    zoom: zp,
    destroy() {
      detachWheel();
      if (zp.observer) zp.observer.disconnect();
      el.remove();
    },
  };
}

// --- the anywidget view ----------------------------------------------------------------------------
function render({ model, el }) {
  // the palette (fxviz.render.theme), scoped to the explorer: role swatches and mark colors
  const palette = document.createElement("style");
  palette.textContent = model.get("palette_css");
  el.append(palette);
  const pane = createPane(el, {
    onSelect: (id) => { model.set("selected", id); model.save_changes(); },
    onRowClick: (key) => { model.send({ event: "row", strategy: key }); },
    onSearch: (r) => { model.set("matches", r.nodes); model.set("drawn_matches", r.drawn); model.save_changes(); },
  });
  const status = () => pane.setStatus(model.get("status"), model.get("compare_status"));
  const handlers = {
    "change:nodes": () => pane.setNodes(model.get("nodes")),
    "change:status change:compare_status": status,
    "change:view": () => pane.setView(model.get("view")),
    "change:svg": () => {
      pane.setSvg(model.get("svg"), { keepZoom: model.get("keep_zoom"), key: model.get("view_key") });
      pane.setSearch(model.get("search"));
    },
    "change:search": () => pane.setSearch(model.get("search")),
    // a click already selected it here; only a selection made in Python moves the view
    "change:selected": () => { if (model.get("selected") !== pane.selected) pane.select(model.get("selected")); },
    "change:table": () => pane.setTable(model.get("table")),
    "change:highlight change:compare_highlight": () => pane.setHighlight(model.get("highlight"), model.get("compare_highlight")),
    "change:doctor": () => pane.setDoctor(model.get("doctor")),
    "change:legend": () => pane.setLegend(model.get("legend")),
    "change:caption": () => pane.setCaption(model.get("caption")),
    "change:busy": () => pane.setBusy(model.get("busy")),
    "change:error": () => pane.setError(model.get("error")),
  };
  pane.setNodes(model.get("nodes"));
  status();
  pane.setView(model.get("view"));
  pane.setLegend(model.get("legend"));
  pane.setTable(model.get("table"));
  pane.setHighlight(model.get("highlight"), model.get("compare_highlight"));
  pane.setDoctor(model.get("doctor"));
  pane.setCaption(model.get("caption"));
  pane.setError(model.get("error"));
  pane.setSvg(model.get("svg"), { keepZoom: false, key: model.get("view_key") });
  pane.setSearch(model.get("search"));
  pane.select(model.get("selected"));
  pane.setBusy(model.get("busy"));
  for (const [events, fn] of Object.entries(handlers)) model.on(events, fn);
  return () => {
    for (const [events, fn] of Object.entries(handlers)) model.off(events, fn);
    pane.destroy();
  };
}

export default { render };
