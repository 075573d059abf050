// Part 5: the app — tabs, the selection that links every level, and the anywidget-style
// entry point render({model, el}) shared by the widget, the Panel component and the HTML export.

class App {
  constructor(model, root) {
    this.model = model;
    this.root = root;
    this.data = JSON.parse(model.get("data") || "{}");
    this.policy = this.data.dispatch ? this.data.dispatch.current : "";
    this.graphs = {};
    this.extraGraphs = [];
    this.origins = [];
    this.rendered = {};
  }

  mount() {
    clear(this.root);
    this.root.className = "rlx-root";
    const d = this.data;
    const chips = d.targets.map((t) => h("span", {
      class: "rlx-chip " + (t.compiled ? "rlx-ok" : "rlx-bad-text"), title: t.note,
      text: t.name + (t.compiled ? "" : " ✗") }));
    this.tabs = h("div", { class: "rlx-tabs" });
    this.main = h("div", { class: "rlx-main" });
    this.side = h("div", { class: "rlx-side" }, h("p", { class: "rlx-muted",
      text: "click a node anywhere: its HIR origin, MIR/LIR counterparts, source line and kernel " +
        "lines light up" }));
    this.root.append(h("div", { class: "rlx-header" }, h("b", { text: "RLX Explorer · " + d.title }),
      " ", chips), this.tabs, h("div", { class: "rlx-body" }, this.main, this.side));
    this.panes = {};
    for (const [key, [label]] of Object.entries(VIEWS)) {
      const count = key === "failures" && d.failures.length
        ? ` (${d.failures.reduce((a, f) => a + f.count, 0)})` : "";
      const btn = h("button", { class: "rlx-tab" + (key === "failures" && d.failures.length
        ? " rlx-bad-text" : ""), "data-view": key, text: label + count, onclick: () => this.show(key) });
      this.tabs.append(btn);
      this.panes[key] = h("div", { class: "rlx-pane", "data-pane": key });
      this.main.append(this.panes[key]);
    }
    const first = d.failures.length && !d.primary && d.view === "graph" ? "failures" : d.view;
    return this.show(first);
  }

  show(key) {
    this.current = key;
    for (const b of this.tabs.children) b.classList.toggle("rlx-active", b.dataset.view === key);
    for (const [k, pane] of Object.entries(this.panes)) pane.hidden = k !== key;
    let done = Promise.resolve();
    if (!this.rendered[key]) {
      this.rendered[key] = true;
      done = Promise.resolve(VIEWS[key][1](this, this.panes[key])).then(() => this.refresh());
    }
    this.refresh();
    return done;
  }

  rerender(key) {
    this.rendered[key] = false;
    clear(this.panes[key]);
    if (this.current === key) this.show(key);
  }

  setPolicy(p) {
    if (this.model.get("live")) {
      this.model.set("policy", p);
      this.model.save_changes();
      this.side.prepend(h("div", { class: "rlx-small rlx-muted", text: `recompiling under ${p}…` }));
    } else {
      this.policy = p;
      this.rerender("dispatch");
    }
  }

  selectById(level, id) {
    const o = this.data.links.node_origin[id];
    if (o) this.select(o);
  }

  selectKernel(kid) {
    this.selectMany(this.data.links.kernel_origins[kid] || [], `kernel ${kid}`);
  }

  select(origin) {
    this.selectMany([origin], "");
  }

  selectMany(origins, label) {
    this.origins = origins;
    this.refresh();
    this.details(label);
  }

  ids(level) {
    const out = [];
    for (const o of this.origins) {
      const e = this.data.links.origins[o];
      if (e) out.push(...e[level]);
    }
    return out;
  }

  refresh() {
    const all = new Set([...this.ids("hir"), ...this.ids("mir"), ...this.ids("lir")]);
    for (const [level, panel] of Object.entries(this.graphs)) panel.mark("rlx-hl", this.ids(level));
    for (const panel of this.extraGraphs) panel.mark("rlx-hl", this.ids(panel.view.level));
    for (const node of this.root.querySelectorAll("[data-node]")) {
      node.classList.toggle("rlx-hl", all.has(node.dataset.node));
    }
    for (const node of this.root.querySelectorAll("[data-nodes]")) {
      node.classList.toggle("rlx-hl", node.dataset.nodes.split(" ").some((x) => all.has(x)));
    }
    for (const node of this.root.querySelectorAll("tr[data-origin]")) {
      node.classList.toggle("rlx-hl", this.origins.includes(node.dataset.origin));
    }
  }

  details(label) {
    clear(this.side);
    const links = this.data.links.origins;
    if (label) this.side.append(h("b", { text: label }));
    for (const o of this.origins.slice(0, 12)) {
      const e = links[o];
      if (!e) continue;
      const hirNode = (this.data.levels.hir.nodes.find((n) => n.id === e.hir[0]));
      this.side.append(h("div", { class: "rlx-detail" },
        h("div", {}, h("b", { text: "origin %" + o }), hirNode ? ` = ${hirNode.op} : ${hirNode.type}` : ""),
        h("div", { class: "rlx-small", text: `HIR ${e.hir.length} · MIR ${e.mir.length} · ` +
          `LIR ${e.lir.length} node(s)` }),
        e.kernels.length ? h("div", { class: "rlx-small", text: "kernels: " +
          e.kernels.map((k) => `${k.target}:@${k.kernel}`).join(", ") }) : "",
        this.sourceSnippet(e.file, e.line)));
    }
  }

  sourceSnippet(file, line) {
    if (!file) return h("div", { class: "rlx-small rlx-muted", text: "no source location" });
    const f = this.data.source.files.find((x) => x.file === file);
    const box = h("pre", { class: "rlx-code rlx-source", "data-file": file });
    if (!f || !f.found) {
      box.append(`${file}:${line} (file not readable here)`);
      return box;
    }
    for (let i = Math.max(1, line - 3); i <= Math.min(f.lines.length, line + 3); i++) {
      box.append(h("span", { class: i === line ? "rlx-srcsel" : "", "data-line": i,
        text: `${String(i).padStart(4)}  ${f.lines[i - 1]}` }), "\n");
    }
    return h("div", {}, h("div", { class: "rlx-small", text: `${(f && f.label) || file}:${line}` }), box);
  }
}

const CSS_TEXT = `
.rlx-root{font:13px/1.4 system-ui,sans-serif;color:#0f172a;border:1px solid #cbd5e1;border-radius:6px;padding:6px;background:#fff}
.rlx-header{margin-bottom:4px}.rlx-chip{border:1px solid #cbd5e1;border-radius:9px;padding:0 6px;margin-left:4px;font-size:11px}
.rlx-tabs{display:flex;flex-wrap:wrap;gap:2px;border-bottom:1px solid #cbd5e1}
.rlx-tab,.rlx-btn,.rlx-step{border:1px solid #cbd5e1;background:#f8fafc;border-radius:4px;padding:2px 8px;cursor:pointer;font-size:12px}
.rlx-active{background:#e0e7ff!important;border-color:#6366f1!important}
.rlx-body{display:flex;gap:8px}.rlx-main{flex:1;min-width:0;overflow:auto;max-height:max(720px,calc(100vh - 60px));padding-top:6px}
.rlx-side{width:300px;flex:none;font-size:12px;overflow:auto;max-height:max(720px,calc(100vh - 60px));border-left:1px solid #e2e8f0;padding-left:6px}
.rlx-levels{display:flex;gap:6px;align-items:flex-start}.rlx-graph,.rlx-col{flex:1;min-width:0}
.rlx-graph-canvas{overflow:auto;max-height:max(640px,calc(100vh - 140px));border:1px solid #e2e8f0;border-radius:4px}
.rlx-graph-canvas svg{max-width:none;height:auto}.rlx-graph-canvas g.node,.rlx-graph-canvas g.cluster{cursor:pointer}
.rlx-graph-canvas g.rlx-hl>path,.rlx-graph-canvas g.rlx-hl>polygon{stroke:#dc2626;stroke-width:3px;fill:#fecaca}
.rlx-graph-canvas g.rlx-bad>path,.rlx-graph-canvas g.rlx-bad>polygon{stroke:#b91c1c;stroke-width:3px;fill:#fca5a5;stroke-dasharray:4 2}
.rlx-code{font:11px/1.35 ui-monospace,monospace;background:#f8fafc;padding:4px;overflow:auto;max-height:560px;margin:2px 0}
.rlx-code .rlx-hl,.rlx-hl>td{background:#fecaca}.rlx-link{cursor:pointer}
.tok-val{color:#1d4ed8}.tok-sym{color:#7c3aed}.tok-type{color:#047857}.tok-kw{color:#9333ea;font-weight:600}
.tok-num{color:#b45309}.tok-str{color:#be123c}.tok-op{color:#0f766e;font-weight:600}.tok-com{color:#64748b;font-style:italic}
.rlx-split{display:flex;gap:8px}.rlx-wrap{flex-wrap:wrap}.rlx-graph-canvas{cursor:grab}.rlx-zoom{min-width:22px}.rlx-steplist{display:flex;flex-direction:column;gap:2px;width:190px;flex:none}
.rlx-stepbody{flex:1;min-width:0}.rlx-muted{color:#64748b}.rlx-small{font-size:11px}
.st-added{color:#15803d}.st-changed{color:#a16207}.st-removed{color:#b91c1c}
.rlx-matrix{border-collapse:collapse;font-size:10px}.rlx-matrix th{max-width:56px;white-space:normal;vertical-align:top;overflow-wrap:anywhere}.rlx-matrix td,.rlx-matrix th{border:1px solid #e2e8f0;padding:1px 3px}
.rlx-cell{cursor:pointer}.r-native{background:#bbf7d0}.r-common{background:#bfdbfe}.r-rewritten{background:#fde68a}.r-unsupported{background:#fca5a5}
.rlx-route{padding:0 5px;border-radius:3px;margin-right:3px}.rlx-celldetail{width:340px;flex:none;font-size:12px}
.rlx-ok{color:#15803d}.rlx-bad-text{color:#b91c1c}.rlx-card{border:1px solid #fca5a5;border-radius:5px;padding:6px;margin:4px 0;background:#fff7f7;cursor:pointer}
.rlx-code-badge{background:#b91c1c;color:#fff;border-radius:3px;padding:0 4px;text-decoration:none}.rlx-cause{border:2px solid #b91c1c;border-radius:6px;padding:8px;margin:8px 0;background:#fff;cursor:pointer}.rlx-poisoned{margin-left:16px}.rlx-loc{color:#94a3b8}.rlx-hide-locs .rlx-loc{display:none}.rlx-hint{color:#1d4ed8;font-weight:600}
.rlx-srcline code{background:#fef9c3}.rlx-srcsel{background:#fef08a;display:inline-block;width:100%}
.rlx-slot{fill:#93c5fd;stroke:#1e3a8a;stroke-width:.5;cursor:pointer}.rlx-slot.rlx-hl{fill:#f87171}.rlx-slot.rlx-alias{fill-opacity:.35;stroke-dasharray:3 2}
.rlx-bars{display:flex;align-items:flex-end;gap:1px;height:62px}.rlx-bar{width:8px;background:#60a5fa}
.rlx-devgrid{display:grid;align-items:start;grid-template-columns:repeat(auto-fill,minmax(190px,1fr));gap:6px;margin:6px 0}
.rlx-dev{border:1px solid #cbd5e1;border-radius:5px;padding:5px;font-size:12px}.rlx-dev-ok{border-left:4px solid #15803d}.rlx-dev-bad{border-left:4px solid #b91c1c}
.rlx-verif{display:inline-block;background:#eef2ff;border-radius:3px;padding:0 4px;font-size:11px}.rlx-takes{margin:2px 0;padding-left:18px;font-size:11px}.rlx-takes li{cursor:pointer}
.rlx-sbs{display:grid;grid-template-columns:repeat(auto-fill,minmax(340px,1fr));gap:6px}.rlx-sbs-col{min-width:0}.rlx-sbs-col .rlx-code{max-height:360px}
.rlx-roofbox{align-items:flex-start}.rlx-roof{font-size:10px}.rlx-roof .roof{stroke:#0f172a;stroke-width:1.5;fill:none}.rlx-roof .pt-pred{fill:#93c5fd;stroke:#1e3a8a}.rlx-roof .pt-meas{fill:#f97316;stroke:#7c2d12}.rlx-roof .rlx-hl{stroke:#dc2626;stroke-width:3}
.rlx-hbar{height:8px;background:#60a5fa}.rlx-scroll{overflow:auto;max-width:100%}.rlx-detail{border-top:1px solid #e2e8f0;padding:4px 0}
`;

function render({ model, el }) {
  const root = h("div");
  el.append(h("style", { text: CSS_TEXT }), root);
  let app = new App(model, root);
  const t0 = performance.now();
  app.mount().then(() => {
    root.dataset.ready = "1";
    root.dataset.openMs = String(Math.round(performance.now() - t0));
  });
  const onData = () => {
    app = new App(model, root);
    app.mount().then(() => { root.dataset.ready = "1"; });
  };
  model.on("change:data", onData);
  return () => model.off("change:data", onData);
}

export default { render };
