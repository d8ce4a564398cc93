// fxviz HTML report: the controls around the explorer pane.  Appended to explorer.js inside one
// module script element, so createPane is in scope.  All data comes from the inert JSON script
// element #fxviz-data: one graph's payloads, or (a report of a logged run) a list of graphs, each
// with its rank and compile id and its own payloads, chosen with a rank and a graph selector.

let reportGeneration = 0;

function startReport(data) {
  const generation = ++reportGeneration;
  const root = document.getElementById("fxviz-root");
  const nav = document.getElementById("fxviz-controls");
  root.replaceChildren();
  nav.replaceChildren();
  const summaryEl = document.querySelector(".fxviz-summary");
  if (summaryEl && data.summary) summaryEl.textContent = data.summary;
  let index = data.index || [];
  const VIEW_LABELS = { joint: "joint", forward: "forward", backward: "backward", compare: "compare" };
  const state = {
    view: data.initial ? data.initial.view : "joint",
    strategy: data.initial ? data.initial.strategy : (data.strategies[0] || {}).key,
    compare: data.initial ? data.initial.compare : null,
  };

  const el = (tag, attrs = {}, text = null) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== null) e.textContent = text;
    return e;
  };

  // --- controls ----------------------------------------------------------------------------------
  const viewButtons = el("span", { class: "fxviz-viewbuttons", role: "group", "aria-label": "view" });
  for (const v of data.views) {
    const b = el("button", { type: "button", "data-view": v, "aria-pressed": "false" }, VIEW_LABELS[v] || v);
    b.addEventListener("click", () => { state.view = v; update(); });
    viewButtons.append(b);
  }
  const strategySel = el("select", { id: "fxviz-strategy", "aria-label": "strategy" });
  for (const s of data.strategies) {
    const o = el("option", { value: s.key }, s.label + (s.error ? " (failed)" : ""));
    if (s.error) o.disabled = true;
    strategySel.append(o);
  }
  strategySel.addEventListener("change", () => { state.strategy = strategySel.value; update(); });
  const compareSel = el("select", { id: "fxviz-compare", "aria-label": "compare with" });
  compareSel.addEventListener("change", () => { state.compare = compareSel.value; update(); });
  const compareLabel = el("label", {}, "compare with ");
  compareLabel.append(compareSel);
  const search = el("input", { type: "search", id: "fxviz-search", placeholder: "search name, op, module",
                               "aria-label": "search nodes" });
  search.addEventListener("input", () => pane.setSearch(search.value));
  search.addEventListener("keydown", (e) => { if (e.key === "Escape") { search.value = ""; pane.setSearch(""); } });
  const strategyLabel = el("label", {}, "strategy ");
  strategyLabel.append(strategySel);
  const viewLabel = el("label", {}, "view ");
  viewLabel.append(viewButtons);
  const searchLabel = el("label", {}, "search ");
  searchLabel.append(search);
  nav.append(viewLabel, strategyLabel, compareLabel, searchLabel);
  nav.hidden = false;

  // --- graph pieces (graph breaks): each piece swaps in its own payloads; -1 is the overview ------
  const pieces = data.pieces || [];
  const own = {};
  for (const k of ["summary", "index", "svgs", "captions", "errors", "status", "nodes", "table", "initial"]) own[k] = data[k];
  state.piece = 0;
  const pieceSel = el("select", { id: "fxviz-piece", "aria-label": "graph piece" });
  if (pieces.length > 1) {
    if (data.overview) pieceSel.append(el("option", { value: "-1" }, `whole model (${pieces.length} graphs)`));
    for (const p of pieces) {
      const runs = p.runs > 1 ? `, ran ${p.runs}\u00d7` : "";
      const text = `${p.label}: ${p.nodes} nodes, ${p.has_backward ? "saves " + p.saved : "no backward graph"}${runs}` + (p.reason ? ` \u2014 after: ${p.reason}` : "");
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
      const summary = document.querySelector(".fxviz-summary");
      if (summary) summary.textContent = data.summary;
      update();
    });
    const pieceLabel = el("label", {}, "graph ");
    pieceLabel.append(pieceSel);
    nav.prepend(pieceLabel);
  }

  // --- the pane ----------------------------------------------------------------------------------
  const fallback = document.getElementById("fxviz-fallback");
  if (fallback) fallback.remove();
  const pane = createPane(root, {
    onRowClick: (key) => {
      const s = data.strategies.find((x) => x.key === key);
      if (s && !s.error) { state.strategy = key; update(); }
    },
  });
  pane.setNodes(data.nodes);
  pane.setLegend(data.legend);
  pane.setTable(data.table);
  pane.setDoctor(data.doctor);

  let lastKind = null;
  function update() {
    if (state.piece < 0) {  // the whole-model overview: one drawing, no strategy or view
      pane.setError("");
      pane.setSvg(data.overview.svg, { key: "overview" });
      pane.setCaption(data.overview.caption || "");
      lastKind = "overview";
      return;
    }
    if (state.view === "compare") {
      let partners = data.pairs.filter((p) => p[0] === state.strategy).map((p) => p[1]);
      if (!partners.length && data.pairs.length) {
        state.strategy = data.pairs[0][0];
        partners = data.pairs.filter((p) => p[0] === state.strategy).map((p) => p[1]);
      }
      if (!partners.includes(state.compare)) state.compare = partners[0] || null;
      compareSel.replaceChildren(...partners.map((k) => {
        const s = data.strategies.find((x) => x.key === k);
        return el("option", { value: k }, s ? s.label : k);
      }));
      compareSel.value = state.compare || "";
    }
    compareLabel.hidden = state.view !== "compare";
    strategySel.value = state.strategy;
    for (const b of viewButtons.children) b.setAttribute("aria-pressed", String(b.dataset.view === state.view));

    const entry = index.find((e) => e.view === state.view && e.strategy === state.strategy &&
      (state.view !== "compare" || e.compare === state.compare));
    const key = entry ? entry.key : null;
    const kind = state.view;
    pane.setView(state.view);
    pane.setStatus(data.status[state.strategy], state.view === "compare" ? data.status[state.compare] : null);
    pane.setHighlight(state.strategy, state.view === "compare" ? state.compare : "");
    if (key && data.svgs[key]) {
      pane.setError("");
      pane.setSvg(data.svgs[key], { keepZoom: lastKind === kind, key });
      pane.setCaption(data.captions[key] || "");
    } else {
      pane.setSvg("", { key: key || "" });
      pane.setCaption("");
      pane.setError((key && data.errors[key]) || "this view is not in the report");
    }
    lastKind = kind;
    pane.setSearch(search.value);
  }
  update();

  // parse the other drawings while the reader looks at the first one
  const pending = Object.values(data.svgs);
  const idle = window.requestIdleCallback || ((fn) => setTimeout(() => fn({ timeRemaining: () => 8 }), 50));
  const preload = (deadline) => {
    if (generation !== reportGeneration) return;  // another graph was chosen meanwhile
    while (pending.length && deadline.timeRemaining() > 4) pane.preload(pending.shift());
    if (pending.length) idle(preload);
  };
  idle(preload);
}

(function startRun() {
  const all = JSON.parse(document.getElementById("fxviz-data").textContent);
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
})();
