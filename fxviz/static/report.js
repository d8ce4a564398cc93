// fxviz HTML report: the controls around the explorer pane.  Appended to explorer.js inside one
// module script element, so createPane is in scope.  All data comes from the inert JSON script
// element #fxviz-data: one graph's payloads, or (a report of a logged run) a list of graphs, each
// with its rank and compile id and its own payloads, chosen with a rank and a graph selector.  The
// first drawing is the markup of the script-free fallback, read once.  After graph breaks, a piece
// selector swaps in each piece's own payloads, and "whole model" shows the overview drawing.
//
// Every drawing is a view payload (fxviz.payloads.ViewPayload, the widget's `view_data` shape) in
// data.drawings, by key; data.index maps the controls' state (view, strategy, compare, differences)
// to the view's key and the drawing that shows it, both made in Python: no key is built here.
// The joint and compare views share one layout: the strategy (or the pair A, B, any two of the
// report's strategies) is an overlay the pane applies from data.  Forward and backward views are
// one drawing per strategy (their graphs differ).  A small graph's report also holds one
// differences-only drawing per ordered pair (index entries with `differences`), which the
// "differences only" toggle shows; without them the toggle fades the layout's other nodes.

/** The report's data: JSON, gzipped and base64-encoded by fxviz (render/embed.py, packed_json). */
async function loadReportData() {
  const outer = JSON.parse(document.getElementById("fxviz-data").textContent);
  if (outer.encoding !== "gzip+base64") return outer;
  const bytes = Uint8Array.from(atob(outer.payload), (c) => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return JSON.parse(await new Response(stream).text());
}

let reportGeneration = 0;

function startReport(data) {
  const generation = ++reportGeneration;
  const root = document.getElementById("fxviz-root");
  const nav = document.getElementById("fxviz-controls");
  // the first drawing is the script-free fallback's markup (inside root): read it before clearing
  const fallback = document.getElementById("fxviz-fallback");
  if (fallback && data.drawing_in_fallback) {
    const svg = fallback.querySelector("svg");
    if (svg) data.drawings[data.drawing_in_fallback].svg = svg.outerHTML;
  }
  if (fallback) fallback.remove();
  root.replaceChildren();
  nav.replaceChildren();
  const summaryEl = document.querySelector(".fxviz-summary");
  if (summaryEl && data.summary) summaryEl.textContent = data.summary;
  let index = data.index || [];
  const state = {
    view: data.initial.view,
    strategy: data.initial.strategy,
    compare: data.initial.compare || null,  // payloads.default_compare chose it
    differences: false,
  };
  // a piece's report data may hold differences drawings: the toggle shows them, else the pane
  // fades the other nodes (a graph-broken model can have both kinds of piece)
  const hasDrawings = () => index.some((e) => e.differences);
  /** the index entry of a view: what it is called (its ViewKey text) and which drawing shows it */
  const find = (view, strategy, compare, differences) => index.find((e) => e.view === view &&
    e.strategy === strategy && (e.compare || null) === (compare || null) && !!e.differences === differences);
  const usable = data.strategies.filter((s) => !s.error).map((s) => s.key);

  const el = (tag, attrs = {}, text = null) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== null) e.textContent = text;
    return e;
  };
  const label = (key) => { const s = data.strategies.find((x) => x.key === key); return s ? s.label : key; };

  // --- controls: one function per selector, so adding one is small -------------------------------
  function viewButtons() {
    const group = el("span", { class: "fxviz-viewbuttons", role: "group", "aria-label": "view" });
    for (const v of data.views) {
      const b = el("button", { type: "button", "data-view": v, "aria-pressed": "false" }, v);
      b.addEventListener("click", () => { state.view = v; update(); });
      group.append(b);
    }
    return group;
  }
  function strategySelect(id, aria, onChange) {
    const sel = el("select", { id, "aria-label": aria });
    for (const s of data.strategies) {
      const o = el("option", { value: s.key }, s.label + (s.error ? " (failed)" : ""));
      if (s.error) o.disabled = true;
      sel.append(o);
    }
    sel.addEventListener("change", () => onChange(sel.value));
    return sel;
  }
  const labelled = (text, control) => { const l = el("label", {}, text); l.append(control); return l; };

  const views = viewButtons();
  const strategySel = strategySelect("fxviz-strategy", "strategy (A in the compare view)", (v) => {
    state.strategy = v;
    update();
  });
  const compareSel = strategySelect("fxviz-compare", "compare with (B)", (v) => { state.compare = v; update(); });
  const strategyLabel = labelled("strategy ", strategySel);
  const compareLabel = labelled("vs B ", compareSel);
  nav.append(labelled("view ", views), strategyLabel, compareLabel);
  nav.hidden = false;

  // --- graph pieces (graph breaks): each piece swaps in its own payloads; -1 is the overview ------
  const pieces = data.pieces || [];
  const own = {};
  for (const k of data.piece_fields || []) own[k] = data[k];  // the fields each piece has its own of
  state.piece = 0;
  if (pieces.length > 1) {
    const pieceSel = el("select", { id: "fxviz-piece", "aria-label": "graph piece" });
    if (data.overview) pieceSel.append(el("option", { value: "-1" }, data.whole_model_option));
    for (const p of pieces) {
      const text = p.option;  // payloads.piece_option: the one spelling, shared with the widget
      pieceSel.append(el("option", { value: String(p.piece), title: text }, text.length > 90 ? text.slice(0, 88) + "\u2026" : text));
    }
    pieceSel.value = "0";
    pieceSel.addEventListener("change", () => {
      state.piece = Number(pieceSel.value);
      const entry = pieces.find((p) => p.piece === state.piece);
      Object.assign(data, state.piece > 0 && entry && entry.payload ? entry.payload : own);
      index = data.index || [];
      pane.setNodes(data.nodes);
      pane.setTable(state.piece < 0 ? data.overview.table : data.table);
      if (summaryEl) summaryEl.textContent = data.summary;
      update();
    });
    nav.prepend(labelled("graph ", pieceSel));
  }

  // --- the pane ----------------------------------------------------------------------------------
  const pane = createPane(root, {
    constants: data.constants,
    onRowClick: (key) => {
      if (!usable.includes(key)) return;
      if (state.view === "compare" && key === state.strategy) return;
      if (state.view === "compare") state.compare = key; else state.strategy = key;
      update();
    },
    onDifferences: (on) => {
      state.differences = on;
      if (!hasDrawings()) return false;
      update();
      return true;
    },
  });
  pane.setNodes(data.nodes);
  pane.setLegend(data.legend);
  pane.setTable(data.table);
  pane.setDoctor(data.doctor);
  // the memory timeline plot, where the report has one (data.timeline: {svg, caption}; the SVG is
  // parsed and sanitized like every drawing): shown in the saved-tensor panel, under its table
  if (data.timeline && data.timeline.svg) {
    const plot = parseSvg(data.timeline.svg);
    const figure = el("figure", { class: "fxviz-timeline-plot" });
    if (plot) figure.append(plot);
    if (data.timeline.caption) figure.append(el("figcaption", {}, data.timeline.caption));
    pane.setSaved({ timeline: figure });
  }

  /** B is never A: keep B if it differs, else the first other usable strategy */
  function fixCompare() {
    if (state.compare && state.compare !== state.strategy && usable.includes(state.compare)) return;
    const pref = state.strategy === "default" ? "min_cut" : "default";
    state.compare = usable.includes(pref) && pref !== state.strategy ? pref : usable.find((k) => k !== state.strategy) || null;
  }

  let lastKey = null;
  function update() {
    if (state.piece < 0) {  // the whole-model overview: one drawing, no strategy or view
      pane.showView(data.overview.view);
      lastKey = "overview";
      return;
    }
    const compare = state.view === "compare";
    if (compare) fixCompare();
    for (const o of compareSel.options) o.disabled = o.value === state.strategy || !usable.includes(o.value);
    compareLabel.hidden = !compare;
    strategySel.value = state.strategy;
    compareSel.value = state.compare || "";
    strategyLabel.firstChild.textContent = compare ? "A " : "strategy ";
    for (const b of views.children) b.setAttribute("aria-pressed", String(b.dataset.view === state.view));

    const entry = find(state.view, state.strategy, compare ? state.compare : null, false);
    const diff = compare && state.differences ? find(state.view, state.strategy, state.compare, true) : null;
    const shownEntry = diff || entry;
    const drawing = shownEntry ? data.drawings[shownEntry.drawing] : null;
    if (compare && !state.compare) {
      pane.showView({ view: "compare", error: "the compare view needs two strategies that did not fail" },
        { statuses: data.status, as: { view: "compare", strategy: state.strategy } });
    } else if (drawing) {
      pane.showView(drawing, { statuses: data.status, as: shownEntry, differences: state.differences,
                               keepZoom: lastKey === shownEntry.drawing && !diff });
    } else {
      pane.showView({ view: state.view, error: `the ${state.view} view of ${label(state.strategy)} is not in the report` },
        { statuses: data.status, as: { view: state.view, strategy: state.strategy } });
    }
    lastKey = shownEntry ? shownEntry.drawing : null;
  }
  update();

  // parse the other drawings while the reader looks at the first one
  const pending = Object.values(data.drawings).map((d) => d.svg).filter(Boolean);
  const idle = window.requestIdleCallback || ((fn) => setTimeout(() => fn({ timeRemaining: () => 8 }), 50));
  const preload = (deadline) => {
    if (generation !== reportGeneration) return;  // another graph was chosen meanwhile
    while (pending.length && deadline.timeRemaining() > 4) pane.preload(pending.shift());
    if (pending.length) idle(preload);
  };
  idle(preload);
}

loadReportData().then(function startRun(all) {
  if (!all.graphs) { startReport(all); return; }
  const graphs = all.graphs;
  const make = (tag, attrs = {}, text = null) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== null) e.textContent = text;
    return e;
  };
  const bar = make("nav", { class: "fxviz-controls fxviz-run-controls", id: "fxviz-run-controls" });
  const rankSel = make("select", { id: "fxviz-rank", "aria-label": "rank" });
  const graphSel = make("select", { id: "fxviz-graph", "aria-label": "graph (compile id)" });
  const ranks = [...new Set(graphs.map((g) => g.rank))];
  for (const r of ranks) rankSel.append(make("option", { value: String(r) }, "rank " + r));
  const rankLabel = make("label", {}, "rank ");
  rankLabel.append(rankSel);
  const graphLabel = make("label", {}, "graph ");
  graphLabel.append(graphSel);
  bar.append(rankLabel, graphLabel);
  document.getElementById("fxviz-controls").before(bar);
  let current = graphs[all.initial || 0];
  function fillGraphs() {
    graphSel.replaceChildren(...graphs.filter((g) => g.rank === current.rank).map((g) =>
      make("option", { value: g.id }, g.label)));
    graphSel.value = current.id;
    rankSel.value = String(current.rank);
  }
  function show(g) {
    current = g;
    fillGraphs();
    document.body.dataset.graph = g.id;
    startReport(g.data);
  }
  rankSel.addEventListener("change", () => {
    const rank = Number(rankSel.value);
    show(graphs.find((g) => g.rank === rank && g.compile_id === current.compile_id) ||
         graphs.find((g) => g.rank === rank));
  });
  graphSel.addEventListener("change", () => show(graphs.find((g) => g.id === graphSel.value)));
  show(current);
});
