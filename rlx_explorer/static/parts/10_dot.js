// Part 2: DOT writing (the same rules as rlx_explorer/views/dot.py) and layout — a
// server-rendered SVG for a level's initial state when the host had `dot`, else Graphviz WASM.

const FILL = { input: "#dbeafe", param: "#f1f5f9", node: "#ffffff", kernel: "#fef3c7",
  block: "#e0e7ff" };
const STATUS_FILL = { added: "#dcfce7", changed: "#fef9c3", removed: "#fee2e2" };

function dquote(text) {
  return '"' + String(text).replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n") + '"';
}

function nodeLabel(n) {
  if (n.kind === "input" || n.kind === "param") return `${n.kind} %${n.name}\n${n.type}`;
  return `%${n.name} = ${n.op}\n${n.type}`;
}

function dotUnits(view, params) {
  const lir = view.level === "lir" && view.kernels.length > 0;
  const units = [];
  const unitOf = {};
  for (const n of view.nodes) {
    if (n.kind === "param" && !params) unitOf[n.id] = "";
    else if (lir && n.kernel) unitOf[n.id] = n.kernel;
    else {
      unitOf[n.id] = n.id;
      units.push({ id: n.id, cluster: n.cluster || "", label: nodeLabel(n),
        fill: STATUS_FILL[n.status] || FILL[n.kind] || "#ffffff", dashed: n.status === "removed" });
    }
  }
  if (lir) {
    for (const k of view.kernels) {
      units.push({ id: k.id, cluster: k.cluster || "", fill: FILL.kernel, dashed: false,
        label: `@${k.name} ${k.kind}\n${k.nodes.length} ops` });
    }
  }
  return { units, unitOf };
}

function topClosedOf(view, closed) {
  const clusters = Object.fromEntries(view.clusters.map((c) => [c.id, c]));
  return (cid) => {
    let found = "";
    while (cid) {
      if (closed.has(cid)) found = cid;
      cid = clusters[cid] ? clusters[cid].parent : "";
    }
    return found;
  };
}

function toDot(view, collapsed = [], params = false) {
  const clusters = Object.fromEntries(view.clusters.map((c) => [c.id, c]));
  const closed = new Set(collapsed);
  const topClosed = topClosedOf(view, closed);
  const { units, unitOf } = dotUnits(view, params);
  const boxOf = {};
  for (const u of units) boxOf[u.id] = topClosed(u.cluster) || u.id;
  const lines = ["digraph G {",
    '  graph [rankdir=TB, nodesep=0.25, ranksep=0.35, fontname="Helvetica", fontsize=10];',
    '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=9, ' +
      'height=0.3, margin="0.08,0.03"];',
    '  edge [arrowsize=0.5, color="#64748b"];'];
  const members = {};
  const counts = {};
  for (const u of units) {
    const box = boxOf[u.id];
    if (box !== u.id) {
      counts[box] = (counts[box] || 0) + 1;
      continue;
    }
    const style = u.dashed ? ', style="rounded,filled,dashed"' : "";
    (members[u.cluster] ||= []).push(`  ${u.id} [id=${dquote(u.id)}, label=${dquote(u.label)}, ` +
      `fillcolor=${dquote(u.fill)}${style}];`);
  }
  const children = {};
  for (const c of view.clusters) (children[c.parent] ||= []).push(c.id);
  const emitCluster = (cid, depth) => {
    const c = clusters[cid];
    const pad = "  ".repeat(depth);
    if (closed.has(cid)) {
      const text = c.scope + "\n" + `${counts[cid] || 0} boxes (collapsed)`;
      lines.push(`${pad}${cid} [id=${dquote(cid)}, shape=box3d, label=${dquote(text)}, ` +
        `fillcolor=${dquote(FILL.block)}];`);
      return;
    }
    lines.push(`${pad}subgraph cluster_${cid} {`);
    lines.push(`${pad}  id=${dquote(cid)}; label=${dquote(c.label)}; style=rounded; ` +
      'color="#6366f1";');
    for (const m of members[cid] || []) lines.push(pad + m);
    for (const child of children[cid] || []) emitCluster(child, depth + 1);
    lines.push(`${pad}}`);
  };
  lines.push(...(members[""] || []));
  for (const cid of children[""] || []) emitCluster(cid, 1);
  const seen = new Set();
  const pairs = [];
  for (const [a, b] of view.edges) {
    const ra = boxOf[unitOf[a] || ""] || "", rb = boxOf[unitOf[b] || ""] || "";
    if (!ra || !rb || ra === rb || seen.has(ra + ">" + rb)) continue;
    seen.add(ra + ">" + rb);
    pairs.push([ra, rb]);
  }
  // collapsed blocks whose kernels interleave pass values both ways: one dashed two-headed
  // edge (as views/dot.py writes it), so it does not read as a cycle
  const order = new Map(pairs.map(([x, y], i) => [x + ">" + y, i]));
  for (const [ra, rb] of pairs) {
    if (!seen.has(rb + ">" + ra)) lines.push(`  ${ra} -> ${rb};`);
    else if (order.get(ra + ">" + rb) < order.get(rb + ">" + ra)) {
      lines.push(`  ${ra} -> ${rb} [dir=both, style=dashed, color="#b45309", tooltip="values ` +
        "flow both ways: the blocks' kernels interleave (not a cycle)\"];");
    }
  }
  lines.push("}");
  return lines.join("\n") + "\n";
}

// Graphviz WASM, loaded once per page from the source the host hands over (a Blob URL keeps
// every host identical: no file serving, works offline and in JupyterLite).
let vizPromise = null;
function loadViz(model) {
  if (!vizPromise) {
    vizPromise = (async () => {
      const src = model.get("viz_src");
      if (!src) throw new Error("no Graphviz build was provided by the host");
      const url = URL.createObjectURL(new Blob([src], { type: "text/javascript" }));
      const mod = await import(url);
      return mod.instance();
    })();
  }
  return vizPromise;
}

function sameState(a, b) {
  return a && b && a.params === b.params &&
    JSON.stringify([...a.collapsed].sort()) === JSON.stringify([...b.collapsed].sort());
}

async function layout(model, data, view, state, key) {
  const pre = key && data.svg ? data.svg[key] : null;
  if (pre && sameState(pre.state, state)) return { svg: sanitizeSvg(pre.svg), engine: "dot" };
  const viz = await loadViz(model);
  const text = viz.renderString(toDot(view, state.collapsed, state.params), { format: "svg" });
  return { svg: sanitizeSvg(text), engine: "wasm" };
}
