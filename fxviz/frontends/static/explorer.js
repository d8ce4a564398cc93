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
// (side sections); createPane only wires them and keeps the pane's state; showView shows one view
// payload (fxviz.payloads.ViewPayload: the same dict in the widget and the report); render is the
// widget.  What fxviz's drawings are made of (the SVG allowlist, the recomputed suffix) comes with
// the data (configure), never copied here.
// It stays one file: anywidget loads it from a blob (no relative imports) and the report inlines
// it before report.js, which calls createPane.

// What fxviz's drawings are made of, sent with the data (fxviz.payloads.page_constants) rather than
// copied here: graphviz's SVG elements the page keeps (none until told: nothing is trusted by
// default), the suffix of a recomputed op's backward copy, what a missing value reads as.
const PAGE = { svgElements: new Set(), recomputedSuffix: null, missing: "\u2014", readablePx: 10.5 };

/** Take the page constants (the widget's `constants` trait, the report's `data.constants`). */
function configure(c) {
  if (!c) return;
  PAGE.svgElements = new Set((c.svg_elements || []).map((e) => e.toLowerCase()));
  PAGE.recomputedSuffix = c.recomputed_suffix || null;
  if (c.missing) PAGE.missing = c.missing;
  if (c.readable_px) PAGE.readablePx = c.readable_px;
}
const isRecomputed = (id) => !!PAGE.recomputedSuffix && id.endsWith(PAGE.recomputedSuffix);
const recomputedId = (name) => name + (PAGE.recomputedSuffix || "");
/** A value for the page: null (NaN, infinity or missing in the data) reads as the missing sign. */
const shown = (v) => (v === null || v === undefined ? PAGE.missing : String(v));

/** Remove every element and attribute graphviz does not produce for fxviz drawings. */
function sanitize(root) {
  const walker = [root];
  while (walker.length) {
    const el = walker.pop();
    for (const child of Array.from(el.children)) {
      if (!PAGE.svgElements.has(child.localName.toLowerCase())) {
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
  if (!PAGE.svgElements.has("svg")) return null;
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

  /** The opening window, never a corner: the whole drawing when its labels stay readable there
   *  (>= FIT_SLACK of `this.readable` screen px per SVG unit, set from the drawing's label font
   *  sizes; a big model's drawing is collapsed at the level that fits a page's pane so, see
   *  fxviz.render.graph.limits.PAGE_PANE), else that scale centered on `this.focus()` (compare
   *  differences, search hits, the doctor's nodes), else the drawing's whole width when that is
   *  readable (a tall graph: its title, legend and first ops across both sides), else the readable
   *  scale on the middle of its top.  Never magnified beyond 4/3. */
  initial() {
    const r = this.viewport.getBoundingClientRect();
    if (!r.width || !r.height) return this.fit(false);
    const fitScale = Math.min(r.width / this.base.w, r.height / this.base.h);
    const readable = this.readable || 1;
    if (fitScale >= readable * FIT_SLACK) return this.oneToOne(Math.min(fitScale, 96 / 72));
    const focus = this.focus ? this.focus() : null;
    const widthScale = r.width / this.base.w;
    if (!focus && widthScale >= readable) return widthScale <= 96 / 72 ? this.fitWidth(false) : this.oneToOne(96 / 72);
    this.oneToOne(readable);
    if (focus) this.centerOn(focus);
  }

  /** center the window on box `b` (SVG units); a box taller than the window shows its top */
  centerOn(b) {
    const cy = b.h > this.vb.h ? b.y + this.vb.h / 2 - 10 : b.y + b.h / 2;
    this.vb = { ...this.vb, x: b.x + b.w / 2 - this.vb.w / 2, y: cy - this.vb.h / 2 };
    this.clamp();
    this.apply();
  }

  /** the box of element `el` in the drawing's (viewBox) coordinates */
  boxOf(el) {
    const ctm = this.svg && this.svg.getScreenCTM();
    if (!ctm || !el.getBoundingClientRect) return null;
    const r = el.getBoundingClientRect();
    if (!r.width && !r.height) return null;
    const inv = ctm.inverse();
    const a = new DOMPoint(r.left, r.top).matrixTransform(inv);
    const b = new DOMPoint(r.right, r.bottom).matrixTransform(inv);
    return { x: Math.min(a.x, b.x), y: Math.min(a.y, b.y), w: Math.abs(b.x - a.x), h: Math.abs(b.y - a.y) };
  }

  /** the box around elements `els` (drawing coordinates), or null */
  boxAround(els) {
    let out = null;
    for (const el of els) {
      const b = this.boxOf(el);
      if (!b) continue;
      if (!out) { out = { ...b }; continue; }
      const x2 = Math.max(out.x + out.w, b.x + b.w);
      const y2 = Math.max(out.y + out.h, b.y + b.h);
      out.x = Math.min(out.x, b.x); out.y = Math.min(out.y, b.y); out.w = x2 - out.x; out.h = y2 - out.y;
    }
    return out;
  }

  /** `px` screen pixels per SVG unit, anchored at the top center */
  oneToOne(px) {
    const r = this.viewport.getBoundingClientRect();
    const w = r.width / px;
    const hh = r.height / px;
    this.vb = { x: this.base.x + (this.base.w - w) / 2, y: this.base.y, w, h: hh };
    this.clamp();
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

  /** bring an element into view (centered), zooming in to the readable scale when it is smaller */
  reveal(el) {
    if (!this.vb || !el) return;
    const box = this.boxOf(el);
    if (!box) return;
    this.touched = true;
    const r = this.viewport.getBoundingClientRect();
    const scale = r.width ? r.width / this.vb.w : 1;
    const want = this.readable || 1;
    if (scale < want * 0.98 && r.width) {
      const k = scale / want;
      this.vb = { ...this.vb, w: this.vb.w * k, h: this.vb.h * k };
    }
    this.vb = { ...this.vb, x: box.x + box.w / 2 - this.vb.w / 2, y: box.y + box.h / 2 - this.vb.h / 2 };
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
  const search = h("input", { type: "search", class: "fxviz-search", placeholder: "search (Enter: next)",
                              "aria-label": "search nodes (Enter: next hit, Shift+Enter: previous)" });
  const prev = button("fxviz-search-prev", "previous hit (Shift+Enter)", "\u2191");
  const next = button("fxviz-search-next", "next hit (Enter)", "\u2193");
  const diffOnly = h("button", { type: "button", class: "fxviz-diff-toggle", "aria-pressed": "false", hidden: true,
                                 title: "show only the nodes the two strategies treat differently, with their neighbors",
                                 text: "differences only" });
  const panel = h("button", { type: "button", class: "fxviz-panel-toggle", "aria-pressed": "true",
                              title: "show or hide the side panel (details, memory, doctor, legend)", text: "panel" });
  const status = h("div", { class: "fxviz-statusline", "aria-live": "polite" });
  const caption = h("div", { class: "fxviz-caption" });
  const hint = h("span", { class: "fxviz-hint",
                           text: "ctrl/\u2318 + scroll or pinch: zoom \u00b7 drag: pan \u00b7 click: details" });
  const toolbar = h("div", { class: "fxviz-toolbar" }, Object.values(buttons),
    h("span", { class: "fxviz-searchbox" }, search, prev, next), diffOnly, panel, hint, status);
  const banner = h("div", { class: "fxviz-banner", hidden: true });
  // the boxes opened (notebook only): one chip each with a close button, and "collapse all"
  const opened = h("div", { class: "fxviz-opened", hidden: true });
  const viewport = h("div", { class: "fxviz-viewport", tabindex: "0", role: "application",
                              "aria-label": "graph: ctrl or cmd + scroll (or pinch, or + and -) to zoom, drag to pan, "
                                            + "click a node for details" });
  const busyText = h("span", { class: "fxviz-busy-text" });
  const busy = h("div", { class: "fxviz-busy", hidden: true }, h("span", { class: "fxviz-spinner" }), busyText);
  const errorBox = h("div", { class: "fxviz-error", hidden: true });
  const stage = h("div", { class: "fxviz-stage" }, viewport, busy);
  const graph = h("div", { class: "fxviz-graph" }, toolbar, banner, opened, errorBox, stage, caption);

  const details = h("div", { class: "fxviz-details-body" }, h("p", { class: "fxviz-muted", text: "Click a node in the graph." }));
  const diffBox = h("div", { class: "fxviz-diff-body" });
  const tableBox = h("div", { class: "fxviz-table-body" }, h("p", { class: "fxviz-muted", text: "computing\u2026" }));
  const doctorBox = h("div", { class: "fxviz-doctor-body" }, h("p", { class: "fxviz-muted", text: "\u2014" }));
  const savedBox = h("div", { class: "fxviz-saved-body" }, h("p", { class: "fxviz-muted", text: "\u2014" }));
  const legendBox = h("div", { class: "fxviz-legend-body" });
  const section = (cls, title, body) => h("section", { class: `fxviz-section ${cls}` }, h("h4", { text: title }), body);
  const sections = {
    details: section("fxviz-details", "Details", details),
    diff: section("fxviz-differences", "Differences", diffBox),
    memory: section("fxviz-memory", "Memory", tableBox),
    saved: section("fxviz-saved", "Saved tensors", savedBox),
    doctor: section("fxviz-doctor", "Doctor", doctorBox),
    legend: section("fxviz-legend", "Legend", legendBox),
  };
  sections.diff.hidden = true;
  const side = h("div", { class: "fxviz-side" }, Object.values(sections));
  // data-lm-suppress-shortcuts: JupyterLab / Notebook 7 run no shortcut for keys typed in here
  const el = h("div", { class: "fxviz-explorer", "data-lm-suppress-shortcuts": "true" }, h("div", { class: "fxviz-main" }, graph, side));
  root.append(el);
  return { el, status, caption, hint, viewport, stage, busy, busyText, errorBox, banner, opened, details, diffBox, tableBox, doctorBox, savedBox,
           legendBox, buttons, search, prev, next, diffOnly, panel, side, sections };
}

/** Keys typed in the pane stay in the pane: a notebook's command-mode shortcuts ("a", "b", "m",
 *  "d d") must not act on the notebook while the graph or its search box has focus.  JupyterLab 4
 *  reads keys as they bubble up to the document (stopped here, at the pane); Notebook 7 reads them
 *  on the way down (capture), before the pane sees them, but skips an event whose default is
 *  prevented: keys aimed at the graph are marked so from the window, first of all listeners (the
 *  pane's own handlers still run).  Tab stays free, and so do the search box, buttons and links,
 *  which the notebooks' shortcuts ignore (they are not command-mode targets).  Returns a detach. */
function swallowKeys(el, viewport) {
  const stop = (e) => e.stopPropagation();
  const types = ["keydown", "keypress", "keyup"];
  for (const type of types) el.addEventListener(type, stop);
  const mark = (e) => { if (e.key !== "Tab" && viewport.contains(e.target)) e.preventDefault(); };
  for (const type of types) window.addEventListener(type, mark, true);
  return () => { for (const type of types) window.removeEventListener(type, mark, true); };
}

/** Side by side when the pane is wide, the side panel below the graph when it is narrow (a
 *  1024 px screen): the graph keeps the full width and the table its columns. */
function bindWidth(el) {
  if (typeof ResizeObserver === "undefined") return null;
  const obs = new ResizeObserver(() => {
    const w = el.getBoundingClientRect().width;
    if (w) el.classList.toggle("fxviz-narrow", w < NARROW_PX);
  });
  obs.observe(el);
  return obs;
}
const NARROW_PX = 1180;

// --- zoom and pan: buttons, wheel, keys, drag ------------------------------------------------------
const ZOOM_STEP = 1.4;
const FIT_SLACK = 0.8;  // the whole drawing opens fitted while its labels are at least this share of readable
const PAN_STEP = 60;  // screen pixels per arrow key

/** The zoom buttons, the wheel and the keyboard drive `zp`; returns a function that detaches the wheel. */
function bindZoomControls({ viewport, buttons, hint }, zp) {
  buttons.zoomIn.addEventListener("click", () => zp.zoom(ZOOM_STEP));
  buttons.zoomOut.addEventListener("click", () => zp.zoom(1 / ZOOM_STEP));
  buttons.zoomFit.addEventListener("click", () => zp.fit(true));
  buttons.zoomWidth.addEventListener("click", () => zp.fitWidth(true));
  // the wheel alone scrolls the page (a notebook scrolls past a ~1000 px graph to its panels); with
  // ctrl or cmd held, or a trackpad's pinch (which the browser sends as a ctrl wheel), it zooms
  let flash = 0;
  const onWheel = (e) => {
    if (!zp.vb) return;
    if (!e.ctrlKey && !e.metaKey) {
      hint.classList.add("fxviz-hint-flash");  // says how to zoom, then fades
      clearTimeout(flash);
      flash = setTimeout(() => hint.classList.remove("fxviz-hint-flash"), 1200);
      return;
    }
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
  const labels = new Map();  // unit id -> the text printed on it (searchable)
  const sizes = [];
  for (const g of svg.querySelectorAll("g.node")) {
    const title = g.querySelector(":scope > title");
    if (title) units.set(title.textContent, g);
    const texts = [...g.querySelectorAll("text")];
    if (title) labels.set(title.textContent, texts.map((t) => t.textContent).join(" ").toLowerCase());
    for (const t of texts) sizes.push(parseFloat(t.getAttribute("font-size")) || 14);
    // the node's outline (two for a double border): every shape before its first text
    for (const shape of g.querySelectorAll("path, polygon, ellipse, text")) {
      if (shape.localName === "text") break;
      shape.classList.add("fxviz-outline");
    }
  }
  sizes.sort((a, b) => a - b);
  const median = sizes.length ? sizes[Math.floor(sizes.length / 2)] : 10;
  // screen px per SVG unit at which the median label is readable (fxviz.render.graph.limits.READABLE_PX)
  return { svg, units, labels, readable: PAGE.readablePx / median };
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

/** Shows one drawing (or none) in the viewport, handed to `zp`: `show(text, keepZoom)` returns the
 *  parsed drawing ({svg, units, labels, readable}), or null; `preload(text)` parses ahead of time. */
function createViewLoader(viewport, zp) {
  const drawing = createDrawingCache();
  return {
    preload(text) { if (text) drawing(text); },
    show(text) {
      const entry = text ? drawing(text) : null;
      viewport.replaceChildren();
      if (!entry) { zp.svg = null; return null; }
      if (entry.svg.dataset.baseViewBox) entry.svg.setAttribute("viewBox", entry.svg.dataset.baseViewBox);
      viewport.append(entry.svg);
      zp.readable = entry.readable;
      return entry;  // the caller marks it, then hands it to zp.attach (the marks decide the focus)
    },
  };
}

// --- selection: the drawn unit of a node, and its marks ----------------------------------------------
/** the drawn unit (node or box) that shows joint node `id` in this view: itself, else the box
 *  whose members (the view payload's `boxes` records) hold it */
function unitFor(units, id, boxOf) {
  if (units.has(id)) return units.get(id);
  const name = baseName(id);
  if (units.has(name)) return units.get(name);
  if (units.has(recomputedId(name))) return units.get(recomputedId(name));
  return (boxOf && units.get(boxOf.get(name))) || null;
}

/** Mark `state.selected`'s unit and the units of its producers and users (clearing old marks);
 *  bring it into view when `reveal`.  Returns the unit, or null when it is not drawn. */
function markSelection(viewport, state, zp, reveal) {
  for (const g of viewport.querySelectorAll(".fxviz-selected")) g.classList.remove("fxviz-selected");
  for (const g of viewport.querySelectorAll(".fxviz-neighbor")) g.classList.remove("fxviz-neighbor");
  if (!state.selected) return null;
  const unit = unitFor(state.units, state.selected, state.boxOf);
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

/** The box `gid` (`side/quoted name`): its side, label, kind ("module", "function",
 *  "bookkeeping"), the name that opens it (`key`), its pattern and its member nodes, as the view's
 *  payload lists them (`state.boxes`, the scene's own members: ops of a function, backward ops
 *  placed by the forward op they differentiate).  A drawing without records (an older report)
 *  falls back to the module path. */
function groupMembers(state, gid) {
  const box = state.boxes.get(gid) || state.seenBoxes.get(gid);
  if (box) {
    const members = box.members.map((n) => state.nodes[n]).filter(Boolean);
    return { side: box.side, path: box.label, kind: box.kind, key: box.key, pattern: box.pattern,
             repeats: box.repeats, members };
  }
  const slash = gid.indexOf("/");
  const side = gid.slice(0, slash);
  const path = decodeURIComponent(gid.slice(slash + 1));
  const members = Object.values(state.nodes).filter((n) => n.phase === side && n.module &&
    (n.module === path || n.module.startsWith(path + ".")));
  return { side, path, kind: "module", key: null, pattern: null, repeats: 1, members };
}

const BOX_KINDS = { module: "module box", function: "function box", bookkeeping: "bookkeeping box" };

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
  if (node.bytes !== null && node.bytes !== undefined) row("bytes", `${shown(node.bytes_text)} (${node.bytes.toLocaleString("en-US")} B)`);
  if (node.qualname) row("real name", h("code", { text: node.qualname }));
  if (node.checkpoint_policy || node.checkpoint_region !== null && node.checkpoint_region !== undefined)
    row("checkpoint", h("code", { text: node.checkpoint_policy || "no policy" }), muted(`  region ${node.checkpoint_region ?? "?"}`));
  row("module", node.module ? h("code", { text: node.module }) : muted("none recorded"));
  if (node.source) row("source", h("code", { text: node.source }), node.code ? h("div", { class: "fxviz-code", text: node.code }) : null);
  const g = node.gradient;
  if (g && node.role === "gradient") {
    row("gradient", "the gradient of ", h("code", { text: g.parameter }));
  } else if (g && g.gets) {
    row("gradient", h("span", { class: "fxviz-yes", text: "yes" }), " ", g.node ? linkList([g.node]) : shown(g.node), muted(` (${shown(g.parameter)})`));
  } else if (g) {
    row("gradient", h("span", { class: "fxviz-no", text: g.requires_grad ? "none" : "none (frozen)" }), muted(` \u2014 ${g.reason}`));
  }
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
function drawnWhere(unit, state) {
  if (!unit) return h("p", { class: "fxviz-note", text: "not drawn in this view" });
  if (!unit.classList.contains("fx-group")) return null;
  const t = unit.querySelector(":scope > title");
  const box = t ? groupMembers(state, t.textContent) : null;
  return h("p", { class: "fxviz-note",
                  text: box ? `drawn inside the ${BOX_KINDS[box.kind] || "box"} \u201c${box.path}\u201d (${box.side})`
                    : "drawn inside a box" });
}

/** The details section: `render(unit)` shows `state.selected` (a node or a box).  `actions`
 *  (the notebook only): `expand(key, members)` opens a box, `collapse(key)` closes it again. */
function createDetailsPanel(box, state, linkList, actions) {
  const button = (cls, text, title, onclick) => h("button", { type: "button", class: `fxviz-box-action ${cls}`, title, text, onclick });
  function renderGroup(gid, open) {
    const g = groupMembers(state, gid);
    const kind = BOX_KINDS[g.kind] || "box";
    box.append(h("div", { class: "fxviz-details-head" }, h("code", { class: "fxviz-node-name", text: g.path }),
      h("span", { class: "fxviz-badge", text: `${open ? "opened " : ""}${kind}, ${g.side}` })));
    if (g.pattern && !open) box.append(h("p", { class: "fxviz-note", text: `pattern ${g.pattern} \u00d7${g.repeats}: modules with the same ops and shapes` }));
    if (open) {
      const both = g.kind === "module" ? " (a module opens in the forward and the backward alike)" : "";
      // where its members went: drawn as themselves, or into the boxes of modules inside it (or, for
      // the bookkeeping box, of the modules that own the buffers)
      const inner = new Map();
      for (const m of g.members) {
        const b = state.boxOf.get(m.name);
        if (b) inner.set(b, (state.boxes.get(b) || { label: b }).label);
      }
      const loose = g.members.filter((m) => !state.boxOf.get(m.name)).length;
      const where = inner.size
        ? `${loose} of its ${g.members.length} nodes are drawn as themselves, the others inside ${inner.size} box${inner.size === 1 ? "" : "es"}: ${[...inner.values()].slice(0, 6).join(", ")}${inner.size > 6 ? ", …" : ""}`
        : `its ${g.members.length} nodes are drawn as themselves`;
      box.append(h("p", { text: `open: ${where}${both}.` }));
      if (actions && g.key) box.append(h("p", {}, button("fxviz-collapse-box", "collapse this box", `draw ${g.path} as one box again`,
        () => actions.collapse(g.key))));
    } else {
      if (actions && g.key) {
        box.append(h("p", {}, button("fxviz-expand-box", "expand this box", `draw what is inside ${g.path} (or double-click the box)`,
          () => actions.expand(g.key, g.members.map((m) => m.name))), h("span", { class: "fxviz-muted", text: " or double-click it" })));
      } else if (g.key) {
        box.append(h("p", { class: "fxviz-muted" }, "to open it: ", h("code", { text: `tr.draw(expand=[${JSON.stringify(g.key)}])` })));
      }
      box.append(h("p", { text: `${g.members.length} node${g.members.length === 1 ? "" : "s"} collapsed into this box:` }));
    }
    box.append(h("p", {}, linkList(g.members.map((m) => m.name))));
    // what it saves for the backward, under the strategy shown (its rows in the saved-tensor panel)
    const t = savedTable(state);
    const inBox = new Set(g.members.map((m) => m.name));
    if (t && t.rows) {
      const rows = t.rows.filter((r) => inBox.has(r.name));
      box.append(h("p", { class: "fxviz-box-saved" }, h("b", { text: "saves: " }),
        rows.length ? [savedKinds(rows), " \u2014 ", linkList(rows.map((r) => r.name))] : h("span", { class: "fxviz-muted", text: "nothing" })));
    } else if (state.status && state.status.saved) {
      const names = state.status.saved.filter((n) => inBox.has(n));
      box.append(h("p", { class: "fxviz-box-saved" }, h("b", { text: "saves: " }), linkList(names)));
    }
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
      if (unit && unit.classList.contains("fx-group")) return renderGroup(id, false);
      // a box just opened: its record is remembered, the box itself is no longer drawn
      const seen = state.seenBoxes.get(id);
      if (!unit && seen && state.expanded.includes(seen.key)) return renderGroup(id, true);
      box.append(h("p", { text: seen ? `the ${BOX_KINDS[seen.kind] || "box"} “${seen.label}” (${seen.side}) is not drawn in this view`
                                     : `${id}: not a node of this graph` }));
      return;
    }
    const facts = nodeFacts(node, name, state, linkList);
    const head = h("div", { class: "fxviz-details-head" }, h("code", { class: "fxviz-node-name", text: name }));
    if (isRecomputed(id)) head.append(h("span", { class: "fxviz-badge", text: "the backward's recomputed copy" }));
    box.append(head);
    const where = drawnWhere(unit, state);
    if (where) box.append(where);
    box.append(facts);
  }

  return { render };
}

// --- search ------------------------------------------------------------------------------------------
/** How well node `node` matches query `q` (lower case): 0 its name or real name exactly, 1 a name
 *  starting with `q`, 2 `q` inside a name, op, module, tensor or the node's printed label; -1 no match. */
function matchRank(node, q, label) {
  const names = [node.name, node.qualname].filter(Boolean).map((f) => f.toLowerCase());
  if (names.includes(q)) return 0;
  if (names.some((f) => f.startsWith(q))) return 1;
  const grad = node.gradient && node.role === "gradient" ? `grad ${node.gradient.parameter}` : null;
  const fields = [node.op, node.target, node.module, node.tensor, grad, label];
  return names.some((f) => f.includes(q)) || fields.some((f) => f && f.toLowerCase().includes(q)) ? 2 : -1;
}

/** The drawn units matching `q`, best first (exact names, then prefixes, then the rest in graph
 *  order), and how many nodes match.  A module box matches by its path or by a member. */
function searchHits(state, q) {
  const ranked = [];
  for (const node of Object.values(state.nodes)) {
    const label = state.labels.get(node.name) || state.labels.get(recomputedId(node.name)) || "";
    const r = matchRank(node, q, label);
    if (r >= 0) ranked.push([r, ranked.length, node.name]);
  }
  ranked.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
  const units = [];
  const seen = new Set();
  const add = (g) => { if (g && !seen.has(g)) { seen.add(g); units.push(g); } };
  for (const [, , name] of ranked) {
    add(unitFor(state.units, name, state.boxOf));
    add(state.units.get(recomputedId(name)));
  }
  // a box matches by its name (its members count as matching nodes: a function box's ops carry
  // no module that names it) or by the text printed on it
  const names = new Set(ranked.map((r) => r[2]));
  for (const [id, g] of state.units) {
    if (!g.classList.contains("fx-group")) continue;
    const box = groupMembers(state, id);
    if (box.path.toLowerCase().includes(q) || (box.key || "").toLowerCase().includes(q)) {
      add(g);
      for (const m of box.members) names.add(m.name);
    } else if ((state.labels.get(id) || "").includes(q)) add(g);
  }
  return { units, nodes: names.size };
}

/** Highlight the units matching `state.query` (names, ops, modules, shapes, the printed labels),
 *  fade the rest, and bring the current hit into view; the status line says "hit k of N".
 *  `move`: 0 a new query (first hit), +1 / -1 the next / previous hit.  Sets `state.lastSearch`. */
function applySearch(viewport, statusLine, state, zp, move = 0) {
  const q = state.query.trim().toLowerCase();
  for (const g of viewport.querySelectorAll(".fxviz-match, .fxviz-current")) g.classList.remove("fxviz-match", "fxviz-current");
  const svg = viewport.querySelector("svg");
  statusLine.classList.remove("fxviz-nomatch");
  if (!q) {
    if (svg) svg.classList.remove("fxviz-searching");
    state.lastSearch = { query: "", nodes: 0, drawn: 0, current: 0 };
    state.hits = [];
    statusLine.textContent = "";
    return state.lastSearch;
  }
  if (move === 0 || !state.hits) state.hits = searchHits(state, q).units;
  const nodes = move === 0 ? searchHits(state, q).nodes : state.lastSearch.nodes;
  const hits = state.hits;
  for (const g of hits) g.classList.add("fxviz-match");
  if (svg) svg.classList.toggle("fxviz-searching", hits.length > 0);
  let current = move === 0 ? 0 : ((state.lastSearch.current || 1) - 1 + move + hits.length) % Math.max(hits.length, 1);
  if (!hits.length) current = -1;
  if (current >= 0) {
    hits[current].classList.add("fxviz-current");
    if (zp.svg) zp.reveal(hits[current]);
  }
  state.lastSearch = { query: state.query, nodes, drawn: hits.length, current: current + 1 };
  if (!nodes) {
    statusLine.textContent = `no node matches \u201c${state.query}\u201d (names, ops, modules, shapes, labels)`;
    statusLine.classList.add("fxviz-nomatch");
  } else if (!hits.length) {
    statusLine.textContent = `${nodes} matching node${nodes === 1 ? "" : "s"}, none drawn in this view`;
  } else {
    statusLine.textContent = `${current + 1} of ${hits.length} \u00b7 ${nodes} node${nodes === 1 ? "" : "s"} match` +
      " \u00b7 Enter: next, Shift+Enter: previous";
  }
  return state.lastSearch;
}

// --- memory table ------------------------------------------------------------------------------------
const TABLE_HINT = "click a row to switch to that strategy";

/** One strategy's row: selected (`state.highlight`; in the compare view A), compared with (B),
 *  failed; a click calls `onRowClick(key)`.  A and B carry the graph's A-only / B-only colors. */
function tableRow(r, state, onRowClick) {
  const tr = h("tr", { "data-strategy": r.key, class: "fxviz-row", title: r.error ? r.error : TABLE_HINT });
  const compare = state.view === "compare";
  let tag = null;
  if (r.key === state.highlight) {
    tr.classList.add(compare ? "fxviz-row-A" : "fxviz-row-selected");
    if (compare) tr.classList.add("fxviz-row-selected");
    tr.setAttribute("aria-selected", "true");
    if (compare) tag = h("span", { class: "fxviz-ab fxviz-ab-A", text: "A" });
  } else if (compare && r.key === state.compareHighlight) {
    tr.classList.add("fxviz-row-compare", "fxviz-row-B");
    tag = h("span", { class: "fxviz-ab fxviz-ab-B", text: "B" });
  }
  if (r.error) tr.classList.add("fxviz-row-error");
  r.cells.forEach((c, i) => {
    const cell = h(i === 0 ? "th" : "td", { class: r.best && r.best[i] ? "fxviz-best" : null }, i === 0 && tag ? [tag, " "] : null, c);
    tr.append(cell);
  });
  tr.addEventListener("click", () => onRowClick(r.key));
  return tr;
}

/** The memory section: `state.table` (columns, rows, caption), or its message while there is none. */
function renderTable(box, state, onRowClick) {
  box.replaceChildren();
  const t = state.table;
  // rows still being computed (the notebook fills the table in after the first picture): a
  // spinner and which strategy is on its way, above the rows done so far
  if (t && t.progress) {
    box.append(h("p", { class: "fxviz-table-progress", role: "status" }, h("span", { class: "fxviz-spinner" }), t.message));
  }
  if (!t || !t.rows) {
    if (!(t && t.progress)) box.append(h("p", { class: "fxviz-muted", text: t && t.message ? t.message : "computing\u2026" }));
    return;
  }
  const head = h("tr", {}, t.columns.map((c, i) => h("th", { text: c, title: (t.tips || [])[i] || null })));
  const body = t.rows.map((r) => tableRow(r, state, onRowClick));
  box.append(h("table", { class: "fxviz-table" }, h("thead", {}, head), h("tbody", {}, body)));
  if (t.best_note) box.append(h("p", { class: "fxviz-table-note", text: `${t.best_note}; hover a header for what it counts` }));
  if (t.notes && t.notes.length) box.append(h("ul", { class: "fxviz-table-notes" }, t.notes.map((n) => h("li", { text: n }))));
  if (t.caption) box.append(h("details", { class: "fxviz-table-caption" }, h("summary", { text: "how these are counted" }), h("p", { text: t.caption })));
  if (t.measured) box.append(renderMeasured(t.measured));
}

/** The measured step under the memory table (fxviz.render.text.measured_view.measured_data): what the
 *  real compiled step kept for its backward beside the estimate, the difference in words, and each
 *  storage it held, copies of parameters and inputs marked. */
function renderMeasured(m) {
  const row = (r) => h("tr", { class: r.kind.endsWith("copy") ? "fxviz-measured-copy" : null },
    h("td", { class: "fxviz-measured-bytes", text: r.bytes_text }), h("td", { text: r.kind }),
    h("td", {}, h("code", { text: r.tensor })), h("td", { text: r.layout }), h("td", { text: r.what }));
  const head = h("tr", {}, ["bytes", "kind", "tensor", "layout", "what it holds"].map((c) => h("th", { text: c })));
  return h("section", { class: "fxviz-measured", "aria-label": "measured step" },
    h("h4", { text: "Measured: the real compiled step" }),
    h("p", { class: "fxviz-measured-headline", text: m.headline }),
    m.reason ? h("p", { class: "fxviz-measured-reason" }, h("b", { text: "The difference: " }), m.reason) : null,
    h("details", { class: "fxviz-measured-storages" }, h("summary", { text: `the ${m.rows.length} storages it saved` }),
      h("table", { class: "fxviz-measured-table" }, h("thead", {}, head), h("tbody", {}, m.rows.map(row)))),
    m.notes.length ? h("ul", { class: "fxviz-table-notes" }, m.notes.map((n) => h("li", { text: n }))) : null);
}

// --- saved tensors -----------------------------------------------------------------------------------
// What the backward reads from the forward under the strategy shown (`state.highlight`; in the
// compare view A), one row per value (fxviz.payloads.saved_data: Trace.saved as records), sortable by
// a header click; a row click selects its node, a node (or box) selected in the graph marks its rows.
// What each other strategy the page holds a status of does with a value is read off that status
// (the Partition's saved and recomputed sets), as fxviz.analysis.memory.saved.fate reads it.
const FATE_LETTERS = { saved: "S", offloaded: "O", recomputed: "R", "not needed": "\u2013", failed: "!" };
const KIND_SHORT = { activation: "act", parameter: "param", input: "input", offloaded: "off", symint: "size" };
const SAVED_SORTS = {
  name: (a, b) => a.name.localeCompare(b.name, "en", { numeric: true }),
  module: (a, b) => (a.module || "~").localeCompare(b.module || "~", "en", { numeric: true }),
  kind: (a, b) => a.kind.localeCompare(b.kind),
};

/** The saved table of the strategy shown, or null. */
function savedTable(state) {
  const all = state.savedPanel.tables || {};
  return all[state.highlight] || (state.status ? all[state.status.key] : null) || null;
}

/** The joint names `state.selected` stands for: the node, or a box's members. */
function selectedNames(state) {
  const id = state.selected;
  if (!id) return new Set();
  const name = baseName(id);
  if (state.nodes[name]) return new Set([name]);
  const box = state.boxes.get(id) || state.seenBoxes.get(id);
  return new Set(box ? box.members : []);
}

/** "3 activations (12 KiB), 1 parameter": what rows `rows` are, by kind (bytes: activations). */
function savedKinds(rows) {
  const count = {};
  let bytes = 0;
  for (const r of rows) { count[r.kind] = (count[r.kind] || 0) + 1; if (r.kind === "activation") bytes += r.bytes; }
  const word = (k, n) => `${n} ${k === "symint" ? "size" : k}${n === 1 ? "" : "s"}`;
  const parts = [];
  for (const k of ["activation", "parameter", "input", "offloaded", "symint"]) {
    if (count[k]) parts.push(word(k, count[k]) + (k === "activation" ? ` (${formatBytes(bytes)})` : ""));
  }
  return parts.join(", ");
}

function formatBytes(n) {
  const units = [["GiB", 1 << 30], ["MiB", 1 << 20], ["KiB", 1 << 10]];
  for (const [u, size] of units) if (Math.abs(n) >= size) { const v = n / size; return `${v < 1000 ? +v.toPrecision(3) : Math.round(v)} ${u}`; }
  return `${n} B`;
}

function renderSaved(box, state, onPick) {
  box.replaceChildren();
  const t = savedTable(state);
  if (!t) { box.append(h("p", { class: "fxviz-muted", text: state.status ? "\u2014" : "pick a strategy to list what it saves" })); return; }
  if (!t.rows) { box.append(h("p", { class: "fxviz-muted", text: t.message || "\u2014" })); return; }
  const sort = state.savedSort;
  const rows = t.rows.slice();  // the payload's order: biggest storage first
  if (sort.key !== "bytes") rows.sort(SAVED_SORTS[sort.key]);
  if (sort.desc !== (sort.key === "bytes")) rows.reverse();
  const tot = t.totals_text || {};
  box.append(h("p", { class: "fxviz-saved-total" }, h("b", { text: `${t.rows.length} values` }),
    ` saved by ${t.strategy}: activations ${tot.activation || "0 B"}`,
    tot.parameter && tot.parameter !== "0 B" ? `, parameters ${tot.parameter}` : "",
    tot.input && tot.input !== "0 B" ? `, inputs ${tot.input}` : "",
    tot.offloaded ? `, offloaded ${tot.offloaded} (copies on another device)` : ""));
  // one fate column per strategy: the one listed first (what it does with each value), then the others
  const all = Object.values(state.savedPanel.statuses || {}).filter((s) => s && s.key);
  const statuses = [...all.filter((s) => s.key === t.strategy), ...all.filter((s) => s.key !== t.strategy)];
  const others = statuses.map((s) => s.key);
  const sets = statuses.map((s) => [s.error, new Set(s.saved), new Set(s.recomputed), new Set(s.offloaded || [])]);
  const fate = (i, n) => (sets[i][0] ? "failed" : sets[i][1].has(n) ? "saved" : sets[i][3].has(n) ? "offloaded"
    : sets[i][2].has(n) ? "recomputed" : "not needed");
  const head = (key, text, tip) => {
    const arrow = sort.key === key ? (sort.desc ? " \u25be" : " \u25b4") : "";
    return h("th", { "data-sort": key, class: "fxviz-sortable", title: `${tip} (click to sort)`, "aria-sort": sort.key === key ? (sort.desc ? "descending" : "ascending") : "none",
                     onclick: () => { state.savedSort = { key, desc: sort.key === key ? !sort.desc : key === "bytes" }; renderSaved(box, state, onPick); } }, text + arrow);
  };
  const offloads = rows.some((r) => r.kind === "offloaded") || sets.some((x) => x[3].size);
  const fateTip = others.map((o, i) => `${"ABCDEFGH"[i]} = ${o}${o === t.strategy ? " (listed)" : ""}`).join(", ") +
    ": S saved, R recomputed, \u2013 not needed, ! fails" +
    (offloads ? ", O offloaded" : "");
  const headRow = h("tr", {}, head("name", "value", "the joint-graph node"), head("module", "what \u00b7 module", "the value in plain words, and the module that made it"),
    head("bytes", "bytes", "the storage's bytes, counted once: a value sharing a storage adds 0"),
    others.length ? h("th", { title: fateTip, text: others.map((_, i) => "ABCDEFGH"[i]).join(" ") }) : null);
  const chosen = selectedNames(state);
  const payloadOrder = sort.key === "bytes" && sort.desc;  // activations first, what is held anyway after
  const body = [];
  rows.forEach((r) => {
    if (payloadOrder && r.held && !body.some((b) => b.classList.contains("fxviz-saved-held"))) {
      body.push(h("tr", { class: "fxviz-saved-held" }, h("td", { colspan: String(others.length ? 4 : 3),
        text: "held anyway: inputs and parameters the step holds whatever the partition saves" })));
    }
    const value = r.holds || r.name;  // an offloaded copy: what the others do with the value it holds
    const fates = others.map((o, i) => FATE_LETTERS[fate(i, value)]).join(" ");
    const tip = `${r.name}: ${r.what}${r.tensor ? ` ${r.tensor}` : ""}${r.source ? `, ${r.source}` : ""}\n` +
      others.map((o, i) => `${o}: ${fate(i, value)}`).join("\n");
    const row = h("tr", { class: "fxviz-saved-row", "data-node": r.name, title: tip,
                          onclick: () => onPick(r.name) },
      h("th", {}, h("code", { text: r.name }), " ", h("span", { class: `fxviz-saved-kind fxviz-kind-${r.kind}`, text: KIND_SHORT[r.kind] || r.kind })),
      h("td", { class: "fxviz-saved-what" }, r.what, h("div", { class: "fxviz-muted", text: r.module || "(no module)" })),
      h("td", {}, r.shares ? h("span", { class: "fxviz-muted", title: `shares storage with ${r.shares}`, text: `= ${r.shares}` }) : formatBytes(r.bytes)),
      others.length ? h("td", { class: "fxviz-saved-fates", text: fates }) : null);
    if (chosen.has(r.name)) { row.classList.add("fxviz-saved-selected"); row.setAttribute("aria-selected", "true"); }
    body.push(row);
  });
  if (others.length) box.append(h("p", { class: "fxviz-saved-legend", text: fateTip }));
  // the rows scroll in their own list; the caption and the timeline stay below it, in view
  box.append(h("div", { class: "fxviz-saved-list" }, h("table", { class: "fxviz-saved-table" }, h("thead", {}, headRow), h("tbody", {}, body))));
  if (t.caption) box.append(h("details", { class: "fxviz-saved-caption" }, h("summary", { text: "how these are counted" }), h("p", { text: t.caption })));
  // the memory timeline (an element given as `pane.setSaved({ timeline })`; the report: data.timeline)
  if (state.savedPanel.timeline) box.append(h("div", { class: "fxviz-timeline" }, state.savedPanel.timeline));
}

/** The overlay's saved badge of unit `g`: a box counts its saved activations (and their bytes)
 *  apart from the parameters and inputs it saves, which are resident anyway. */
function savedBadge(state, id, g) {
  const t = savedTable(state);
  if (!g.classList.contains("fx-group") || !t || !t.rows) return "saved";
  const inUnit = new Set(unitMembers(state, id, g));
  const rows = t.rows.filter((r) => inUnit.has(r.name));
  const acts = rows.filter((r) => r.kind === "activation");
  const held = rows.length - acts.length;
  const parts = [];
  if (acts.length) parts.push(`saved ${acts.length} activation${acts.length === 1 ? "" : "s"} ${formatBytes(acts.reduce((n, r) => n + r.bytes, 0))}`);
  if (held) parts.push(`${acts.length ? "+" : "saved"} ${held} resident`);
  return parts.join(" ") || "saved";
}

/** The saved-tensor panel in `box`: `render()` the table of the strategy shown, `mark()` the rows
 *  of the selection; a row click calls `pick(name)`. */
function bindSaved(box, state, pick) {
  return { render: () => renderSaved(box, state, pick), mark: () => markSavedRows(box, state) };
}

/** Mark the saved rows of the selection and scroll the panel's own list to the first (never the
 *  page or the notebook around it: a click on the graph must not move what is under the mouse). */
function markSavedRows(box, state) {
  const chosen = selectedNames(state);
  let first = null;
  for (const row of box.querySelectorAll("tr.fxviz-saved-row")) {
    const on = chosen.has(row.dataset.node);
    row.classList.toggle("fxviz-saved-selected", on);
    if (on) { row.setAttribute("aria-selected", "true"); first = first || row; } else row.removeAttribute("aria-selected");
  }
  const list = box.querySelector(".fxviz-saved-list");
  if (!first || !list || box.closest("[hidden]")) return;
  const r = first.getBoundingClientRect();
  const c = list.getBoundingClientRect();
  if (r.top < c.top || r.bottom > c.bottom) list.scrollTop += r.top - c.top - c.height / 3;
}

// --- doctor ------------------------------------------------------------------------------------------
/** A finding's text with the nodes it names (`{node}` segments) as links. */
function segmentsText(item, linkList) {
  if (typeof item === "string") return [item];
  return item.map((seg) => (seg.node ? linkList([seg.node]) : seg.text));
}

/** One group of findings (one reason): its title and fix first, the findings folded below. */
function doctorFinding(f, linkList) {
  const n = f.count || (f.items || []).length;
  const item = h("div", { class: `fxviz-finding fxviz-severity-${f.severity || "info"}`, "data-kind": f.kind || "" },
    h("div", { class: "fxviz-finding-title" }, h("span", { class: "fxviz-severity", text: f.severity || "info" }), " ",
      f.title || "", n > 1 ? ` (${n})` : ""));
  if (f.hint) item.append(h("p", { class: "fxviz-fix" }, h("b", { text: "fix: " }), f.hint));
  const fold = h("details", { class: "fxviz-finding-items" },
    h("summary", { text: n > 1 ? `the ${n} findings and their nodes` : "the finding and its nodes" }));
  if (f.items && f.items.length) fold.append(h("ul", {}, f.items.map((t) => h("li", {}, segmentsText(t, linkList)))));
  if (f.nodes && f.nodes.length) fold.append(h("p", {}, "nodes: ", linkList(f.nodes)));
  item.append(fold);
  return item;
}

/** The doctor section: the headline (healthy or not), then each reason with its fix. */
function renderDoctor(box, d, linkList) {
  box.replaceChildren();
  if (!d) { box.append(h("p", { class: "fxviz-muted", text: "\u2014" })); return; }
  if (d.message) {
    const cls = d.healthy === true ? "fxviz-doctor-ok" : d.healthy === false ? "fxviz-doctor-bad" : "fxviz-muted";
    box.append(h("p", { class: `fxviz-doctor-headline ${cls}`, text: d.message }));
  }
  for (const f of d.findings || []) box.append(doctorFinding(f, linkList));
}

/** Above the graph when the doctor finds parameters without gradient: the headline, the first fix,
 *  a link to the card.  Hidden when healthy. */
function renderBanner(banner, d, onOpen) {
  banner.replaceChildren();
  const bad = d && d.healthy === false;
  banner.hidden = !bad;
  if (!bad) return;
  const first = (d.findings || []).find((f) => f.hint);
  banner.append(h("b", { text: d.message.replace(/^fxviz doctor: /, "doctor: ") }));
  if (first) banner.append(h("span", { text: ` \u2014 fix: ${first.hint}` }));
  banner.append(" ", h("a", { href: "#", class: "fxviz-link", onclick: (e) => { e.preventDefault(); onOpen(); } }, "doctor card"));
}

// --- legend ------------------------------------------------------------------------------------------
/** The legend section: role swatches and status marks; in the compare view the compare marks,
 *  naming A and B by their strategies and saying what "only" means (saved or recomputed). */
function renderLegend(box, l, state) {
  box.replaceChildren();
  if (!l) return;
  const list = () => h("ul", { class: "fxviz-legend-list" });
  const mark = (k, text, title) => h("li", { title },
    h("span", { class: `fxviz-mark fxviz-mark-${k}` }), h("b", { text: k.replace("-", " ") }), h("span", { class: "fxviz-muted", text: ` \u2014 ${text}` }));
  const roles = list();
  for (const [role, r] of Object.entries(l.roles)) {
    roles.append(h("li", { title: r.description }, h("span", { class: `fxviz-swatch fxviz-role-${role}` }), r.label));
  }
  box.append(roles);
  const marks = list();
  if (state.view === "compare" && state.compare) {
    const a = state.status ? state.status.label : "A";
    const b = state.compare.label;
    marks.append(mark("A-only", `A = ${a} saves (or recomputes) it, B does not`, l.compare["A-only"].description));
    marks.append(mark("B-only", `B = ${b} saves (or recomputes) it, A does not`, l.compare["B-only"].description));
    marks.append(mark("both", "both save (or both recompute) it; a badge says which", l.compare.both.description));
  } else {
    for (const [k, m] of Object.entries(l.status)) marks.append(mark(k, m.cue, m.description));
  }
  marks.append(h("li", {}, h("span", { class: "fxviz-mark fxviz-mark-nograd" }), h("b", { text: "no gradient" }),
    h("span", { class: "fxviz-muted", text: " \u2014 a parameter that requires grad and gets none" })));
  marks.append(h("li", {}, h("span", { class: "fxviz-mark fxviz-mark-random" }), h("b", { text: "random" }),
    h("span", { class: "fxviz-muted", text: " \u2014 a recomputed random op: the backward redraws it" })));
  box.append(marks);
}

// --- marks drawn by the page: strategies as overlays, no-gradient and random badges -----------------
const OVERLAY_CLASSES = ["fx-saved", "fx-recomputed", "fx-removed", "fx-saved-A-only", "fx-saved-B-only", "fx-saved-both",
  "fx-recomputed-A-only", "fx-recomputed-B-only", "fx-recomputed-both", "fxviz-nograd", "fxviz-random", "fxviz-diff", "fxviz-diff-near"];

/** The joint nodes a drawn unit shows: itself, or a module box's members. */
function unitMembers(state, id, g) {
  if (g.classList.contains("fx-group")) return groupMembers(state, id).members.map((m) => m.name);
  return [baseName(id)];
}

function unitSide(state, id, g) {
  if (g.classList.contains("fx-group")) return id.slice(0, id.indexOf("/"));
  if (isRecomputed(id)) return "backward";
  const n = state.nodes[baseName(id)];
  return n ? n.phase : "";
}

/** One badge line on unit `g`'s top border, right-aligned: `parts` are [text, class] pairs, shown
 *  as colored runs ("A saves · B recomputes"); removed by the next `clearMarks`. */
function addBadges(g, parts) {
  if (!parts.length) return;
  const outline = g.querySelector(".fxviz-outline");
  let box;
  try { box = (outline || g).getBBox(); } catch (e) { return; }
  if (!box || (!box.width && !box.height)) return;
  const t = document.createElementNS(g.namespaceURI, "text");  // the SVG namespace, without writing its URL
  t.setAttribute("x", String(box.x + box.width - 2));
  t.setAttribute("y", String(box.y - 1.5));  // just above the node: the rank gap holds one 9 pt line
  t.setAttribute("text-anchor", "end");
  t.setAttribute("font-size", "9");
  t.setAttribute("font-weight", "bold");
  t.setAttribute("class", "fxviz-xmark");
  parts.forEach(([text, cls], i) => {
    const span = document.createElementNS(g.namespaceURI, "tspan");
    span.setAttribute("class", cls);
    span.textContent = (i ? " \u00b7 " : "") + text;
    t.append(span);
  });
  g.append(t);
}

function clearMarks(svg, overlay) {
  for (const t of svg.querySelectorAll(".fxviz-xmark")) t.remove();
  const drop = overlay ? OVERLAY_CLASSES : ["fxviz-nograd", "fxviz-random", "fxviz-diff", "fxviz-diff-near"];
  for (const g of svg.querySelectorAll("g.node, g.edge")) g.classList.remove(...drop);
}

/** What strategy `s` does with the units of the drawing: unit id -> {saved, recomputed, removed}
 *  (a module box: the union of its members). */
function unitStatus(state, s) {
  const out = new Map();
  if (!s || s.error) return out;
  const saved = new Set(s.saved);
  const recomputed = new Set(s.recomputed);
  const removed = new Set(s.removed);
  for (const [id, g] of state.units) {
    const m = unitMembers(state, id, g);
    out.set(id, { saved: m.some((n) => saved.has(n)), recomputed: m.some((n) => recomputed.has(n)),
                  removed: m.length > 0 && m.every((n) => removed.has(n)) });
  }
  return out;
}

const WHO = { "A-only": "A", "B-only": "B", both: "both" };
const which = (a, b) => (a && b ? "both" : a ? "A-only" : b ? "B-only" : null);

/** Mark the drawing from data: in the report (`state.overlay`) the strategy's (or the two compared
 *  strategies') saved / recomputed / removed classes and badges on one shared layout; everywhere
 *  the parameters without gradient, the recomputed random ops and the compare differences. */
function applyMarks(state, svg) {
  if (!svg) return;
  clearMarks(svg, state.overlay);
  const compare = state.view === "compare" && state.compare;
  const A = unitStatus(state, state.status);
  const B = compare ? unitStatus(state, state.compare) : new Map();
  const sides = new Map();
  for (const [id, g] of state.units) {
    sides.set(id, unitSide(state, id, g));
    const a = A.get(id) || {};
    const b = B.get(id) || {};
    const parts = [];
    const badge = (cls, text, mark) => { g.classList.add(cls); parts.push([text, `fxviz-xmark-${mark}`]); };
    if (state.overlay && compare) {
      const sv = which(a.saved, b.saved);
      const rc = which(a.recomputed, b.recomputed);
      if (sv) badge(`fx-saved-${sv}`, `${WHO[sv]} save${sv === "both" ? "" : "s"}`, sv);
      if (rc) badge(`fx-recomputed-${rc}`, `${WHO[rc]} recompute${rc === "both" ? "" : "s"}`, rc);
    } else if (state.overlay) {
      if (a.saved) badge("fx-saved", savedBadge(state, id, g), "saved");
      if (a.recomputed) badge("fx-recomputed", "recomputed", "recomputed");
      if (a.removed) badge("fx-removed", "removed", "removed");
    }
    const members = unitMembers(state, id, g);
    const noGrad = (n) => { const gr = state.nodes[n] && state.nodes[n].gradient; return gr && !gr.gets && gr.requires_grad && state.nodes[n].role !== "gradient"; };
    if (members.some(noGrad)) badge("fxviz-nograd", "no gradient", "nograd");
    for (const [s, who] of [[state.status, compare ? "A" : ""], [compare ? state.compare : null, "B"]]) {
      if (s && s.random && members.some((n) => s.random.includes(n))) badge("fxviz-random", `random, redrawn${who ? ` by ${who}` : ""}`, "random");
    }
    addBadges(g, parts);
  }
  if (state.overlay) {
    // edges that carry a saved value to the backward
    for (const e of svg.querySelectorAll("g.edge")) {
      const t = e.querySelector(":scope > title");
      if (!t) continue;
      const [src, dst] = t.textContent.split("->");
      if (!src || !dst || sides.get(dst) !== "backward" || sides.get(src) !== "forward") continue;
      const a = (A.get(src) || {}).saved;
      const b = compare ? (B.get(src) || {}).saved : false;
      if (compare) { const w = which(a, b); if (w) e.classList.add(`fx-saved-${w}`); } else if (a) e.classList.add("fx-saved");
    }
  }
}

/** Joint nodes that A and B treat differently: [{name, a, b}], `a` / `b` what each does to it
 *  ("saved", "recomputed", "removed", joined, or "").  The same test as the drawing's
 *  (fxviz.render.graph.scene.differs): saved, recomputed or removed by one of them only. */
function differences(state) {
  const a = state.status;
  const b = state.compare;
  if (!a || !b || a.error || b.error) return [];
  const sets = (s) => ({ saved: new Set(s.saved), recomputed: new Set(s.recomputed), removed: new Set(s.removed || []) });
  const A = sets(a);
  const B = sets(b);
  const what = (s, n) => ["saved", "recomputed", "removed"].filter((k) => s[k].has(n)).join(", ");
  const out = [];
  for (const n of Object.keys(state.nodes)) {
    const x = what(A, n);
    const y = what(B, n);
    if (x !== y) out.push({ name: n, a: x, b: y });
  }
  return out;
}

/** The compare view's differences: a small table (node, A, B) and the units to focus on. */
function renderDifferences(box, state, linkList) {
  box.replaceChildren();
  const diff = differences(state);
  const a = state.status ? state.status.label : "A";
  const b = state.compare ? state.compare.label : "B";
  if (!diff.length) {
    box.append(h("p", { text: `A (${a}) and B (${b}) save, recompute and remove the same nodes.` }));
    return diff;
  }
  box.append(h("p", { text: `${diff.length} node${diff.length === 1 ? "" : "s"} treated differently by A (${a}) and B (${b}):` }));
  const rows = diff.map((d) => h("tr", {}, h("td", {}, linkList([d.name])),
    h("td", { class: d.a ? "fxviz-ab-cell-A" : null, text: d.a || "\u2014" }), h("td", { class: d.b ? "fxviz-ab-cell-B" : null, text: d.b || "\u2014" })));
  box.append(h("table", { class: "fxviz-table fxviz-diff-table" },
    h("thead", {}, h("tr", {}, h("th", { text: "node" }), h("th", {}, h("span", { class: "fxviz-ab fxviz-ab-A", text: "A" })),
      h("th", {}, h("span", { class: "fxviz-ab fxviz-ab-B", text: "B" })))), h("tbody", {}, rows)));
  return diff;
}

/** Mark the units of the differences (and their neighbors) for "differences only". */
function markDifferences(state, diff) {
  const units = [];
  for (const d of diff) {
    const g = unitFor(state.units, d.name, state.boxOf);
    if (!g) continue;
    g.classList.add("fxviz-diff");
    units.push(g);
    const n = state.nodes[d.name];
    for (const m of [...n.inputs, ...n.users]) {
      const u = unitFor(state.units, m, state.boxOf);
      if (u && !u.classList.contains("fxviz-diff")) u.classList.add("fxviz-diff-near");
    }
  }
  return units;
}

/** The doctor's card, its banner over the graph; a card with something wrong comes before the table. */
function showDoctor(ui, d, linkList, togglePanel) {
  renderDoctor(ui.doctorBox, d, linkList);
  renderBanner(ui.banner, d, () => { togglePanel(true); ui.sections.doctor.scrollIntoView({ block: "start" }); });
  if (d && d.healthy === false) ui.sections.memory.before(ui.sections.doctor);
}

function showBusy(ui, msg) {
  ui.busy.hidden = !msg;
  ui.busyText.textContent = msg || "";
  ui.el.classList.toggle("fxviz-is-busy", !!msg);
}

/** a message in place of the graph (not an empty pane under it) */
function showError(ui, msg) {
  ui.errorBox.hidden = !msg;
  ui.errorBox.textContent = msg || "";
  ui.stage.hidden = !!msg;
  ui.el.classList.toggle("fxviz-has-error", !!msg);
}

/** Everything the pane shows and remembers. */
function paneState() {
  return {
    nodes: {}, status: null, compare: null, view: "joint", selected: "", query: "",
    units: new Map(), labels: new Map(), table: null,
    // the saved-tensor panel: tables by strategy, the statuses it reads fates from, the timeline hook
    savedPanel: { tables: {}, statuses: {}, timeline: null }, savedSort: { key: "bytes", desc: true },
    // the drawn boxes' records (id -> {key, label, kind, side, members}), each member's box, every
    // box record seen (details of a box just opened), the boxes opened now, the nodes to bring
    // into view once the drawing with an opened box arrives
    boxes: new Map(), boxOf: new Map(), seenBoxes: new Map(), expanded: [], reveal: null, highlight: "", compareHighlight: "", legend: null, doctor: null,
    lastSearch: { nodes: 0, drawn: 0, current: 0 }, hits: [], overlay: false, diffOnly: false, focusUnits: [],
    opening: [],  // the view payload's `opening`: the model's blocks, where a drawing too big to read whole opens
    diffDrawn: false,  // the drawing shown is the kernel's differences-only drawing
  };
}

/** where the opening zoom looks: compare differences, else search hits, else the doctor's nodes,
 *  else the model's blocks (the payload's `opening`) */
function focusUnits(state) {
  if (state.view === "compare" && state.focusUnits.length) return state.focusUnits;
  if (state.hits && state.hits.length) return [state.hits[0]];
  if (state.doctor && state.doctor.healthy === false) {
    const names = (state.doctor.findings || []).flatMap((f) => f.nodes || []);
    const found = names.map((n) => unitFor(state.units, n, state.boxOf)).filter(Boolean);
    if (found.length) return found;
  }
  return state.opening.map((id) => state.units.get(id)).filter(Boolean);
}

/** Re-apply every page-drawn mark of the shown drawing and the compare view's differences. */
function remark(ui, state, linkList) {
  const svg = ui.viewport.querySelector("svg");
  applyMarks(state, svg);
  const compare = state.view === "compare" && !!state.compare;
  ui.sections.diff.hidden = !compare;
  ui.diffOnly.hidden = !compare;
  state.focusUnits = compare ? markDifferences(state, renderDifferences(ui.diffBox, state, linkList)) : [];
  if (svg) {
    // the kernel's differences drawing holds only those nodes (its context already faded): no fade
    svg.classList.toggle("fxviz-diffonly", compare && state.diffOnly && !state.diffDrawn);
    svg.classList.toggle("fxviz-overlay", state.overlay);
  }
}

/** The side-panel and "differences only" toggles; returns `togglePanel(show)`.  Where
 *  `onDifferences(on)` is given (the notebook) the kernel draws the differences only; else (the
 *  report) the other nodes of the drawing fade. */
function bindToggles(ui, state, zp, marks, onDifferences) {
  function togglePanel(show) {
    ui.side.hidden = !show;
    ui.panel.setAttribute("aria-pressed", String(show));
    ui.el.classList.toggle("fxviz-side-hidden", !show);
  }
  ui.panel.addEventListener("click", () => togglePanel(ui.side.hidden));
  ui.diffOnly.addEventListener("click", () => {
    state.diffOnly = !state.diffOnly;
    ui.diffOnly.setAttribute("aria-pressed", String(state.diffOnly));
    // the kernel (or the report's own drawing) shows the differences; false: none drawn, fade here
    if (onDifferences && onDifferences(state.diffOnly) !== false) return;
    marks();
    const b = state.diffOnly && state.focusUnits.length ? zp.boxAround(state.focusUnits) : null;
    if (b) zp.centerOn(b);
  });
  return togglePanel;
}

/** The toggle's state (`on`), and whether the drawing shown is the differences-only drawing
 *  (`drawn`; when the toggle is on without one, the other nodes fade). */
function showDifferences(ui, state, on, drawn = on) {
  state.diffOnly = !!on;
  state.diffDrawn = !!on && !!drawn;
  ui.diffOnly.setAttribute("aria-pressed", String(state.diffOnly));
}

/** The pane's search box: typing searches, Enter / Shift+Enter (or the arrows) step through hits. */
function bindSearchBox(ui, setSearch) {
  ui.search.addEventListener("input", () => setSearch(ui.search.value));
  ui.search.addEventListener("keydown", (e) => {
    if (e.key === "Enter") { e.preventDefault(); setSearch(ui.search.value, e.shiftKey ? -1 : 1); }
    if (e.key === "Escape") setSearch("");
  });
  ui.next.addEventListener("click", () => setSearch(ui.search.value, 1));
  ui.prev.addEventListener("click", () => setSearch(ui.search.value, -1));
}

// --- opening boxes (the notebook: the kernel draws the view again with `expand`) ----------------------
/** A double click on a box opens it (`actions.expand(key, members)`); the click before it selected it. */
function bindDoubleClick(viewport, state, actions) {
  viewport.addEventListener("dblclick", (e) => {
    const unit = e.target.closest && e.target.closest("g.node.fx-group");
    if (!unit || !viewport.contains(unit)) return;
    const title = unit.querySelector(":scope > title");
    const box = title ? state.boxes.get(title.textContent) : null;
    if (!box || !box.key) return;
    e.preventDefault();
    actions.expand(box.key, box.members);
  });
}

/** The chips above the graph: one per opened box (its name and a \u00d7 that closes it), and
 *  "collapse all"; hidden when nothing is open. */
function renderOpened(bar, state, actions) {
  bar.replaceChildren();
  const list = state.expanded || [];
  bar.hidden = !list.length || !actions;
  if (bar.hidden) return;
  bar.append(h("span", { class: "fxviz-muted", text: "opened: " }));
  for (const key of list) {
    bar.append(h("span", { class: "fxviz-chip", "data-key": key }, h("code", { text: key }),
      h("button", { type: "button", class: "fxviz-chip-close", title: `collapse ${key} again`, "aria-label": `collapse ${key}`,
                    text: "\u00d7", onclick: () => actions.collapse(key) })));
  }
  if (list.length > 1) {
    bar.append(h("button", { type: "button", class: "fxviz-collapse-all", title: "draw every opened box as one box again",
                             text: "collapse all", onclick: () => actions.collapse(null) }));
  }
}

/** After a box was opened: bring the nodes it held into view (they are drawn where the box was);
 *  after one was closed (`{key}`), the box again. */
function revealOpened(state, zp) {
  const what = state.reveal;
  if (!what) return;
  state.reveal = null;
  const units = Array.isArray(what)
    ? [...new Set(what.map((n) => unitFor(state.units, n, state.boxOf)).filter(Boolean))]
    : [...state.boxes.values()].filter((b) => b.key === what.key).map((b) => state.units.get(b.id)).filter(Boolean);
  const b = units.length ? zp.boxAround(units) : null;
  if (b) zp.centerOn(b);
}

/** Opening boxes is the kernel's work (it draws the view again), so only where `opts.onExpand(key)`
 *  and `opts.onCollapse(key or null)` are given (the notebook): a double click on a box, the
 *  details' buttons, the chips.  Returns the actions, or null. */
function bindBoxActions(ui, state, opts) {
  if (!opts.onExpand) return null;
  const actions = {
    expand(key, members) { state.reveal = members || null; opts.onExpand(key); },
    collapse(key) { state.reveal = key ? { key } : null; if (opts.onCollapse) opts.onCollapse(key || null); },
  };
  bindDoubleClick(ui.viewport, state, actions);
  ui.viewport.classList.add("fxviz-boxes-open");  // the zoom-in cursor: only where a double click opens
  ui.hint.textContent += " \u00b7 double-click a box: open it";
  return actions;
}

/** Index the drawn boxes' records (the view payload's `boxes`): by id, each member's box, and
 *  every record seen (the details of a box just opened, no longer drawn). */
function indexBoxes(state, list) {
  state.boxes = new Map((list || []).map((b) => [b.id, b]));
  state.boxOf = new Map();
  for (const b of state.boxes.values()) {
    state.seenBoxes.set(b.id, b);
    for (const m of b.members) if (!state.boxOf.has(m)) state.boxOf.set(m, b.id);
  }
}

/** The pane's search box; returns `setSearch(q, move)`, which also reports to `opts.onSearch`. */
function bindSearch(ui, state, search, opts) {
  function setSearch(q, move = 0) {
    state.query = q || "";
    if (ui.search.value !== state.query) ui.search.value = state.query;
    const r = search(move);
    if (opts.onSearch) opts.onSearch(r);
    return r;
  }
  bindSearchBox(ui, setSearch);
  return setSearch;
}

// --- the pane: wiring ----------------------------------------------------------------------------------
/**
 * The explorer pane.  `opts.onSelect(id)` is called when the user selects a node,
 * `opts.onRowClick(strategyKey)` when a memory-table row is clicked, `opts.onSearch(result)`
 * after every search (`result.query` is what was typed); `opts.onExpand(key)` /
 * `opts.onCollapse(key or null)` open and close a box (the notebook: the kernel redraws the view).
 * `opts.constants`: the page constants (fxviz.payloads.page_constants).  `showView` shows one
 * view payload (fxviz.payloads.ViewPayload); the other setters are what lives beside a view.
 */
export function createPane(root, opts = {}) {
  configure(opts.constants);
  const state = paneState();
  const ui = buildLayout(root), { el } = ui;
  const freeKeys = swallowKeys(el, ui.viewport);
  const widthObserver = bindWidth(el);
  const zp = new ZoomPan(ui.viewport);
  zp.focus = () => zp.boxAround(focusUnits(state));
  const loader = createViewLoader(ui.viewport, zp);
  const showDetails = () => { if (ui.side.hidden) togglePanel(true); ui.sections.details.scrollIntoView({ block: "nearest" }); };
  const linkList = nodeLinks(state, (name) => { select(name, { reveal: true, notify: true }); showDetails(); });
  const actions = bindBoxActions(ui, state, opts);
  const details = createDetailsPanel(ui.details, state, linkList, actions);
  const detachWheel = bindZoomControls(ui, zp);
  bindDragAndClick(ui.viewport, zp, (title) => select(title, { reveal: false, notify: true }));
  const search = (move = 0) => applySearch(ui.viewport, ui.status, state, zp, move);
  const table = () => renderTable(ui.tableBox, state, (key) => { if (opts.onRowClick) opts.onRowClick(key); });
  const legend = () => renderLegend(ui.legendBox, state.legend, state);
  const saved = bindSaved(ui.savedBox, state, (name) => select(name, { reveal: true, notify: true }));
  const markSelected = (reveal) => {
    const unit = markSelection(ui.viewport, state, zp, reveal);
    if (state.selected) details.render(unit);  // a cleared selection leaves the details as they were
  };
  const marks = () => remark(ui, state, linkList);
  const togglePanel = bindToggles(ui, state, zp, marks, opts.onDifferences);
  function select(id, { reveal = true, notify = true } = {}) {
    state.selected = id || "";
    markSelected(reveal); saved.mark();
    if (notify && opts.onSelect) opts.onSelect(state.selected);
  }
  function setSvg(text, { keepZoom = false, key = "", overlay = false } = {}) {
    const t0 = performance.now();
    state.overlay = overlay;
    // marks first (they decide the focus), then the window: re-attach after marking
    const entry = loader.show(text);
    state.units = entry ? entry.units : new Map();
    state.labels = entry ? entry.labels : new Map();
    if (entry) {
      marks();
      state.hits = state.query.trim() ? searchHits(state, state.query.trim().toLowerCase()).units : [];
      zp.attach(entry.svg, keepZoom);
      revealOpened(state, zp);
      search(0);
      markSelected(false);
      el.dataset.renderMs = (performance.now() - t0).toFixed(1);
    }
    el.dataset.units = String(state.units.size);
    el.dataset.viewKey = key;
  }
  const setSearch = bindSearch(ui, state, search, opts);
  return {
    el,
    setSvg,
    showView(v, how = {}) { showView(this, v, how); },
    select: (id) => select(id, { reveal: true, notify: false }),
    setSearch,
    setNodes(nodes) { state.nodes = nodes || {}; markSelected(false); marks(); search(); },
    // an empty record (the widget's compare_status outside the compare view) is no strategy
    setStatus(s, cmp) { state.status = s && s.key ? s : null; state.compare = cmp && cmp.key ? cmp : null; marks(); legend(); markSelected(false); },
    setView(view) { state.view = view || "joint"; el.dataset.view = state.view; table(); legend(); markSelected(false); },
    setTable(t) { state.table = t; table(); },
    setHighlight(key, compareKey) { state.highlight = key || ""; state.compareHighlight = compareKey || ""; table(); saved.render(); },
    setSaved(part) { Object.assign(state.savedPanel, part); saved.render(); },  // {tables, statuses, timeline}
    setDoctor(d) { state.doctor = d; showDoctor(ui, d, linkList, togglePanel); },
    setLegend(l) { state.legend = l; legend(); },
    setBoxes(list, opening) { indexBoxes(state, list); state.opening = opening || []; markSelected(false); marks(); },  // payload's boxes, opening
    setExpanded(list) { state.expanded = list || []; renderOpened(ui.opened, state, actions); markSelected(false); },
    setCaption(text) { ui.caption.textContent = text || ""; },
    /** the kernel drew (or stopped drawing) the differences only: the toggle shows it, nothing fades */
    setDifferences(on, drawn = on) { showDifferences(ui, state, on, drawn); marks(); },
    setBusy: (msg) => showBusy(ui, msg),
    setError: (msg) => showError(ui, msg),
    /** parse a drawing ahead of time (idle time), so its first showing is instant too */
    preload: loader.preload,
    get lastSearch() { return state.lastSearch; },
    get selected() { return state.selected; },
    zoom: zp,
    destroy() { detachWheel(); freeKeys(); for (const o of [zp.observer, widthObserver]) if (o) o.disconnect(); el.remove(); },
  };
}

/**
 * Show one view payload `v` (fxviz.payloads.ViewPayload: the widget's `view_data`, one of the
 * report's `drawings`) in `pane`.  `how.statuses`: what strategies did, by name; `how.as`: the
 * view it stands for where it is a shared drawing (the report's layout under a strategy or a
 * pair: its view, strategy, compare and key), else the payload itself; `how.differences`: the
 * toggle's state (default: whether this is a differences drawing); `how.alert`: an error that is
 * no view's; `how.keepZoom`: keep the window.
 */
function showView(pane, v, how = {}) {
  const view = v || {};
  const as = how.as || view;
  const statuses = how.statuses || {};
  pane.setSaved({ tables: view.saved || {}, statuses });
  pane.setView(as.view || view.view);
  pane.setStatus(statuses[as.strategy] || null, as.compare ? statuses[as.compare] || null : null);
  pane.setHighlight(as.strategy || "", as.compare || "");
  pane.setError(how.alert || view.error || "");
  pane.setBoxes(view.boxes || [], view.opening);  // before the drawing: its boxes' members are read when shown
  pane.setExpanded(view.expanded || []);
  pane.setDifferences(how.differences === undefined ? !!view.differences : how.differences, !!view.differences);
  pane.setSvg(view.svg || "", { keepZoom: !!how.keepZoom, key: as.key || "", overlay: !!view.overlay });
  pane.setCaption(view.caption || "");
}

// --- the anywidget view ----------------------------------------------------------------------------
// The view shown is one trait, `view_data` (fxviz.payloads.ViewPayload); `keep_zoom`, `statuses`
// and `alert` arrive with it in the same message.
function render({ model, el }) {
  // the palette (fxviz.render.theme), scoped to the explorer: role swatches and mark colors
  const palette = document.createElement("style");
  palette.textContent = model.get("palette_css");
  el.append(palette);
  const pane = createPane(el, {
    constants: model.get("constants"),
    onSelect: (id) => { model.set("selected", id); model.save_changes(); },
    onRowClick: (key) => { model.send({ event: "row", strategy: key }); },
    onExpand: (key) => { model.send({ event: "expand", key }); },
    onCollapse: (key) => { model.send({ event: "collapse", key }); },
    onDifferences: (on) => { model.send({ event: "differences", on }); },
    onSearch: (r) => {
      model.set("search", r.query || "");
      model.set("matches", r.nodes);
      model.set("drawn_matches", r.drawn);
      model.save_changes();
    },
  });
  const show = (keepZoom) => {
    pane.showView(model.get("view_data"), { statuses: model.get("statuses"), alert: model.get("alert"), keepZoom });
    pane.setSearch(model.get("search"));
  };
  const handlers = {
    "change:nodes": () => pane.setNodes(model.get("nodes")),
    "change:view_data": () => show(model.get("keep_zoom")),
    "change:alert": () => pane.setError(model.get("alert") || (model.get("view_data") || {}).error || ""),
    "change:search": () => pane.setSearch(model.get("search")),
    // a click already selected it here; only a selection made in Python moves the view
    "change:selected": () => { if (model.get("selected") !== pane.selected) pane.select(model.get("selected")); },
    "change:table": () => pane.setTable(model.get("table")),
    "change:doctor": () => pane.setDoctor(model.get("doctor")),
    "change:legend": () => pane.setLegend(model.get("legend")),
    "change:busy": () => pane.setBusy(model.get("busy")),
  };
  pane.setNodes(model.get("nodes"));
  pane.setLegend(model.get("legend"));
  pane.setTable(model.get("table"));
  pane.setDoctor(model.get("doctor"));
  show(false);
  pane.select(model.get("selected"));
  pane.setBusy(model.get("busy"));
  for (const [events, fn] of Object.entries(handlers)) model.on(events, fn);
  return () => {
    for (const [events, fn] of Object.entries(handlers)) model.off(events, fn);
    pane.destroy();
  };
}

export default { render };
