// Numerics lens (rlx_explorer/views/numerics.py): every HIR node's error against the f64/f32
// oracle on every target, its activation range and histogram, where quantization or a
// narrowing cast enters and how the error grows. This part runs after the app's parts: it
// adds the "numerics" tab to VIEWS and, where a lens was computed, the selected node's errors
// on every target to the side panel (App.details is wrapped, not edited).

function numFmt(x) {
  if (x === null || x === undefined || Number.isNaN(x)) return "–";
  if (!Number.isFinite(x)) return "inf";
  if (x === 0) return "0";
  const a = Math.abs(x);
  return a >= 1e-3 && a < 1e4 ? x.toPrecision(3) : x.toExponential(2);
}

function numHistogram(st) {
  const W = 6, H = 40, n = st.hist.length, top = Math.max(1, ...st.hist);
  const svg = s("svg", { width: n * W + 2, height: H + 2, class: "rlx-num-hist" });
  st.hist.forEach((c, i) => {
    const bh = Math.round((H * c) / top);
    const r = s("rect", { x: 1 + i * W, y: 1 + H - bh, width: W - 1, height: bh, fill: "#60a5fa" });
    const lo = st.edges[0] + ((st.edges[1] - st.edges[0]) * i) / n;
    const hi = st.edges[0] + ((st.edges[1] - st.edges[0]) * (i + 1)) / n;
    r.append(s("title", { text: `[${numFmt(lo)}, ${numFmt(hi)}): ${c}` }));
    svg.append(r);
  });
  return svg;
}

function numErrorTable(nm, row) {
  const table = h("table", { class: "rlx-matrix rlx-num-errors" }, h("tr", {},
    h("th", { text: "target" }), h("th", { text: "max |err|" }), h("th", { text: "rel" }),
    h("th", { text: "rms" })));
  for (const t of nm.targets) {
    const e = row.errors[t];
    table.append(h("tr", { "data-target": t }, h("td", { text: t }),
      h("td", { text: e ? numFmt(e.max_abs) : "–" }), h("td", { text: e ? numFmt(e.rel) : "–" }),
      h("td", { text: e ? numFmt(e.rms) : "–" })));
  }
  for (const [t, why] of Object.entries(nm.unavailable)) {
    table.append(h("tr", { class: "rlx-muted", title: why }, h("td", { text: t }),
      h("td", { colspan: 3, text: "not run: " + why })));
  }
  return table;
}

function numDetail(nm, row) {
  const box = h("div", { class: "rlx-detail rlx-num-detail", "data-num-node": row.name });
  box.append(h("div", {}, h("b", { text: `%${row.name} = ${row.op}` }), ` : ${row.type}`));
  if (row.entry) box.append(h("div", { class: "rlx-bad-text", text: "precision lost here: " + row.entry }));
  if (row.note) box.append(h("div", { class: "rlx-small rlx-muted", text: row.note }));
  box.append(numErrorTable(nm, row));
  if (row.growth !== null && row.growth !== undefined) {
    box.append(h("div", { class: "rlx-small", text: `error ×${numFmt(row.growth)} against the ` +
      `largest on the way in (${numFmt(row.upstream_rel)})` }));
  }
  if (row.stats && row.stats.hist.length) {
    box.append(h("div", { class: "rlx-small", text: `oracle range [${numFmt(row.stats.min)}, ` +
      `${numFmt(row.stats.max)}]` }), numHistogram(row.stats));
  }
  if (row.quant) {
    box.append(h("div", { class: "rlx-small", text: `scale ${numFmt(row.quant.scale)}, zero point ` +
      `${row.quant.zero_point}` }));
  }
  if (row.clip) {
    box.append(h("div", { class: "rlx-small", text: `representable [${numFmt(row.clip.range[0])}, ` +
      `${numFmt(row.clip.range[1])}]: ${(100 * row.clip.clipped).toFixed(2)}% of the values clipped` }));
  }
  return box;
}

function viewNumerics(app, box) {
  const nm = app.data.numerics;
  if (!nm || !nm.present) {
    box.append(h("p", { class: "rlx-muted", text: nm && nm.reason ? "numerics lens: " + nm.reason
      : "numerics lens not computed: explore(fn, *args, numerics=True) (optionally reference=the " +
        "float graph of a quantized one)" }));
    return;
  }
  box.append(h("div", {}, h("b", { text: `oracle ${nm.oracle}` }), ` beside ${nm.targets.join(", ")}` +
    ` · precision enters at ${nm.entries.length} node(s) · outputs: ` +
    nm.outputs.map((o) => `%${o.name} rel ${numFmt(o.worst_rel)}`).join(", ")));
  const detail = h("div", { class: "rlx-celldetail" },
    h("p", { class: "rlx-muted", text: "click a row: its error on every target" }));
  const table = h("table", { class: "rlx-matrix rlx-num-table" }, h("tr", {},
    h("th", { text: "node" }), h("th", { text: "op" }), h("th", { text: "worst rel" }),
    h("th", { text: "growth" }), h("th", { text: "" })));
  const logMin = -9;
  for (const row of nm.nodes) {
    if (row.op === "constant") continue;
    const w = row.worst_rel > 0 ? Math.max(0, Math.log10(row.worst_rel) - logMin) : 0;
    const tr = h("tr", { class: "rlx-link" + (row.entry ? " rlx-num-entry" : ""),
      "data-node": row.id || undefined, "data-num": row.name,
      onclick: () => {
        clear(detail).append(numDetail(nm, row));
        if (row.id) app.selectById("hir", row.id);
      } },
    h("td", { text: "%" + row.name }), h("td", { text: row.op + (row.entry ? " ◆" : "") }),
    h("td", {}, h("div", { class: "rlx-hbar", style: `width:${Math.round(12 * w)}px`,
      title: numFmt(row.worst_rel) }), numFmt(row.worst_rel)),
    h("td", { text: row.growth === null || row.growth === undefined ? "" : "×" + numFmt(row.growth) }),
    h("td", { class: "rlx-small rlx-muted", text: row.note }));
    table.append(tr);
  }
  box.append(h("div", { class: "rlx-split" }, h("div", { class: "rlx-scroll" }, table), detail));
}

VIEWS.numerics = ["numerics", viewNumerics];

// the side panel: a selected node's errors on every target (any view's click)
const numBaseDetails = App.prototype.details;
App.prototype.details = function (label) {
  numBaseDetails.call(this, label);
  const nm = this.data.numerics;
  if (!nm || !nm.present) return;
  const rows = new Map(nm.nodes.map((r) => [r.name, r]));
  for (const o of this.origins.slice(0, 4)) {
    const row = rows.get(o);
    if (row) this.side.append(numDetail(nm, row));
  }
};
