// fxviz HTML report: the controls around the explorer pane.  Appended to explorer.js inside one
// module script element, so createPane and its DOM builder h are in scope.  All data comes from the
// inert JSON script element #fxviz-data: one graph's payloads, or (a report of a logged run) a list of
// graphs, each with its rank and compile id and its own payloads, chosen with a rank and a graph
// selector.  The first drawing is the markup of the script-free fallback, read once.  After graph
// breaks, a piece selector swaps in each piece's own payloads, and "whole model" shows the overview.
//
// Every drawing is a view payload (fxviz.payloads.ViewPayload, the widget's `view_data` shape) in
// the drawings, by key; the index maps the controls' state (view, strategy, compare, differences)
// to the view's key and the drawing that shows it, both made in Python: no key is built here.  The
// compare partner of each strategy (`compare_partners`) and the piece selector's shortened labels
// (`short`) come with the data too (fxviz.analysis.strategy.choices, fxviz.payloads.pieces): no rule of
// Python's is copied here.  The joint and compare views share one layout: the strategy (or the pair
// A, B, any two of the report's strategies) is an overlay the pane applies from data.  Forward and
// backward views are one drawing per strategy (their graphs differ).  A small graph's report also
// holds one differences-only drawing per ordered pair (index entries with `differences`), which the
// "differences only" toggle shows; without them the toggle fades the layout's other nodes.
//
// One job per function: loadReportData (the data in), takeFallbackDrawing (the first drawing),
// buildControls (the view buttons and strategy selectors), buildPieceSelect (graph pieces),
// showTimeline, pickCompare (B from the data), showState (the pane from the state), preloadDrawings
// (parse while idle), startReport (wires them for one graph), startRun (a logged run's selectors).

/** The report's data: JSON, gzipped and base64-encoded by fxviz (render/embed.py, packed_json). */
async function loadReportData() {
  const outer = JSON.parse(document.getElementById("fxviz-data").textContent);
  if (outer.encoding !== "gzip+base64") return outer;
  const bytes = Uint8Array.from(atob(outer.payload), (c) => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return JSON.parse(await new Response(stream).text());
}

let reportGeneration = 0;

/** The first drawing is the script-free fallback's markup (inside the root): read it, then clear. */
function takeFallbackDrawing(data, root) {
  const fallback = document.getElementById("fxviz-fallback");
  if (fallback && data.drawing_in_fallback) {
    const svg = fallback.querySelector("svg");
    if (svg) data.drawings[data.drawing_in_fallback].svg = svg.outerHTML;
  }
  if (fallback) fallback.remove();
  root.replaceChildren();
}

const labelled = (text, control) => h("label", {}, text, control);

/** A strategy selector: every strategy of the report, a failed one disabled. */
function strategySelect(strategies, id, aria, onChange) {
  const sel = h("select", { id, "aria-label": aria });
  for (const s of strategies) {
    const o = h("option", { value: s.key, text: s.label + (s.error ? " (failed)" : "") });
    o.disabled = !!s.error;
    sel.append(o);
  }
  sel.addEventListener("change", () => onChange(sel.value));
  return sel;
}

/** The view buttons and the strategy (A) and compare (B) selectors, in the nav; each change sets
 *  `state` and calls `update`. */
function buildControls(nav, data, state, update) {
  const views = h("span", { class: "fxviz-viewbuttons", role: "group", "aria-label": "view" },
    data.views.map((v) => h("button", { type: "button", "data-view": v, "aria-pressed": "false", text: v,
                                        onclick: () => { state.view = v; update(); } })));
  const strategySel = strategySelect(data.strategies, "fxviz-strategy", "strategy (A in the compare view)",
    (v) => { state.strategy = v; update(); });
  const compareSel = strategySelect(data.strategies, "fxviz-compare", "compare with (B)",
    (v) => { state.compare = v; update(); });
  const strategyLabel = labelled("strategy ", strategySel);
  const compareLabel = labelled("vs B ", compareSel);
  nav.append(labelled("view ", views), strategyLabel, compareLabel);
  nav.hidden = false;
  return { views, strategySel, compareSel, strategyLabel, compareLabel };
}

/** The piece selector of a graph-broken model (-1: the whole-model overview), or null for one graph.
 *  Its labels are the data's (`option` in full as the tooltip, `short` as shown). */
function buildPieceSelect(data, onPick) {
  const pieces = data.pieces || [];
  if (pieces.length < 2) return null;
  const sel = h("select", { id: "fxviz-piece", "aria-label": "graph piece" },
    data.overview ? h("option", { value: "-1", text: data.whole_model_option }) : null,
    pieces.map((p) => h("option", { value: String(p.piece), title: p.option, text: p.short })));
  sel.value = "0";
  sel.addEventListener("change", () => onPick(Number(sel.value)));
  return labelled("graph ", sel);
}

/** The memory timeline plot and the budget curve with logged runs and advice, where the report has
 *  them (each `{svg, caption}`; the SVG is parsed and sanitized like every drawing): shown in the
 *  saved-tensor panel, under its table. */
function showTimeline(pane, timeline, pareto) {
  const figures = [[timeline, "fxviz-timeline-plot"], [pareto, "fxviz-pareto-plot"]]
    .filter(([plot]) => plot && plot.svg)
    .map(([plot, cls]) => h("figure", { class: cls }, parseSvg(plot.svg),
      plot.caption ? h("figcaption", { text: plot.caption }) : null));
  if (figures.length) pane.setSaved({ timeline: figures.length === 1 ? figures[0] : h("div", {}, figures) });
}

/** B is never A: keep B if it differs and was computed, else the data's partner of A
 *  (fxviz.analysis.strategy.choices.compare_partner, per graph: `compare_partners`). */
function pickCompare(state, graph) {
  const partners = graph.compare_partners || {};
  const usable = (k) => Object.prototype.hasOwnProperty.call(partners, k);
  if (state.compare && state.compare !== state.strategy && usable(state.compare)) return;
  state.compare = partners[state.strategy] || null;
}

/** The index entry of a view: what it is called (its ViewKey text) and which drawing shows it. */
function findEntry(index, view, strategy, compare, differences) {
  return index.find((e) => e.view === view && e.strategy === strategy &&
    (e.compare || null) === (compare || null) && !!e.differences === differences);
}

/** Show in the pane what `state` names, from `graph` (the piece shown: its index, drawings and
 *  statuses); set the controls to match.  Returns the drawing key shown (null: none). */
function showState(pane, controls, data, graph, state, lastKey) {
  if (state.piece < 0) {  // the whole-model overview: one drawing, no strategy or view
    pane.showView(data.overview.view);
    return "overview";
  }
  const compare = state.view === "compare";
  if (compare) pickCompare(state, graph);
  const partners = graph.compare_partners || {};
  for (const o of controls.compareSel.options) o.disabled = o.value === state.strategy || !(o.value in partners);
  controls.compareLabel.hidden = !compare;
  controls.strategySel.value = state.strategy;
  controls.compareSel.value = state.compare || "";
  controls.strategyLabel.firstChild.textContent = compare ? "A " : "strategy ";
  for (const b of controls.views.children) b.setAttribute("aria-pressed", String(b.dataset.view === state.view));

  const index = graph.index || [];
  const entry = findEntry(index, state.view, state.strategy, compare ? state.compare : null, false);
  const diff = compare && state.differences ? findEntry(index, state.view, state.strategy, state.compare, true) : null;
  const shownEntry = diff || entry;
  const drawing = shownEntry ? graph.drawings[shownEntry.drawing] : null;
  const label = (data.strategies.find((x) => x.key === state.strategy) || { label: state.strategy }).label;
  if (compare && !state.compare) {
    pane.showView({ view: "compare", error: "the compare view needs two strategies that did not fail" },
      { statuses: graph.status, as: { view: "compare", strategy: state.strategy } });
  } else if (drawing) {
    pane.showView(drawing, { statuses: graph.status, as: shownEntry, differences: state.differences,
                             keepZoom: lastKey === shownEntry.drawing && !diff });
  } else {
    pane.showView({ view: state.view, error: `the ${state.view} view of ${label} is not in the report` },
      { statuses: graph.status, as: { view: state.view, strategy: state.strategy } });
  }
  return shownEntry ? shownEntry.drawing : null;
}

/** Parse the other drawings while the reader looks at the first one (stops when another graph is shown). */
function preloadDrawings(pane, drawings, generation) {
  const pending = Object.values(drawings).map((d) => d.svg).filter(Boolean);
  const idle = window.requestIdleCallback || ((fn) => setTimeout(() => fn({ timeRemaining: () => 8 }), 50));
  const preload = (deadline) => {
    if (generation !== reportGeneration) return;  // another graph was chosen meanwhile
    while (pending.length && deadline.timeRemaining() > 4) pane.preload(pending.shift());
    if (pending.length) idle(preload);
  };
  idle(preload);
}

/** One graph's report: the controls, the pane, and (after graph breaks) the piece selector.  The
 *  graph shown is the report's own payloads or a piece's (`graph`); `data` itself is never changed. */
function startReport(data) {
  const generation = ++reportGeneration;
  const root = document.getElementById("fxviz-root");
  const nav = document.getElementById("fxviz-controls");
  takeFallbackDrawing(data, root);
  nav.replaceChildren();
  const summaryEl = document.querySelector(".fxviz-summary");
  let graph = data;  // the piece shown: the report's own fields, or a piece's payload over them
  const setSummary = () => { if (summaryEl && graph.summary) summaryEl.textContent = graph.summary; };
  setSummary();
  const state = { view: data.initial.view, strategy: data.initial.strategy,
                  compare: data.initial.compare || null, differences: false, piece: 0 };
  let lastKey = null;
  const update = () => { lastKey = showState(pane, controls, data, graph, state, lastKey); };
  const controls = buildControls(nav, data, state, update);
  const pieces = buildPieceSelect(data, (piece) => {
    state.piece = piece;
    const entry = (data.pieces || []).find((p) => p.piece === piece);
    graph = piece > 0 && entry && entry.payload ? { ...data, ...entry.payload } : data;
    pane.setNodes(graph.nodes);
    pane.setTable(piece < 0 ? data.overview.table : graph.table);
    setSummary();
    update();
  });
  if (pieces) nav.prepend(pieces);

  const pane = createPane(root, {
    constants: data.constants,
    onRowClick: (key) => {
      if (!(key in (graph.compare_partners || {}))) return;  // failed or left out
      if (state.view === "compare" && key === state.strategy) return;
      if (state.view === "compare") state.compare = key; else state.strategy = key;
      update();
    },
    onDifferences: (on) => {  // a piece may hold differences drawings: shown, else the pane fades the rest
      state.differences = on;
      // this pair's differences drawing, when the page holds it (a big graph's, or a pair over the page's
      // budget, has none: the pane fades the shared layout's other nodes instead)
      if (!findEntry(graph.index || [], "compare", state.strategy, state.compare, true)) return false;
      update();
      return true;
    },
  });
  pane.setNodes(data.nodes);
  pane.setLegend(data.legend);
  pane.setTable(data.table);
  pane.setDoctor(data.doctor);
  showTimeline(pane, data.timeline, data.pareto);
  update();
  preloadDrawings(pane, data.drawings, generation);
}

/** A logged run's report: a rank and a graph selector above the report of the graph chosen. */
function startRun(all) {
  if (!all.graphs) { startReport(all); return; }
  const graphs = all.graphs;
  const rankSel = h("select", { id: "fxviz-rank", "aria-label": "rank" },
    [...new Set(graphs.map((g) => g.rank))].map((r) => h("option", { value: String(r), text: "rank " + r })));
  const graphSel = h("select", { id: "fxviz-graph", "aria-label": "graph (compile id)" });
  const bar = h("nav", { class: "fxviz-controls fxviz-run-controls", id: "fxviz-run-controls" },
    labelled("rank ", rankSel), labelled("graph ", graphSel));
  document.getElementById("fxviz-controls").before(bar);
  let current = graphs[all.initial || 0];
  function show(g) {
    current = g;
    graphSel.replaceChildren(...graphs.filter((x) => x.rank === current.rank).map((x) =>
      h("option", { value: x.id, text: x.label })));
    graphSel.value = current.id;
    rankSel.value = String(current.rank);
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
}

loadReportData().then(startRun);
