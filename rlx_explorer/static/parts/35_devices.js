// Part 4b: every device side by side — one column per registered target headed by its
// verification level, what it would take to make the model compile-ready there, and the same
// LIR kernel in every target's language (lines linked to their nodes).

function originIds(app, origins) {
  const out = [];
  for (const o of origins) {
    const e = app.data.links.origins[o];
    if (e) out.push(...(e.hir || []), ...(e.mir || []), ...(e.lir || []));
  }
  return out;
}

// a source line as text, its trailing comment dimmed (no highlighter for fifteen languages)
function plainLine(text) {
  const span = h("span", { class: "rlx-code-line" });
  const at = text.search(/\/\/|\/\*/);
  if (at < 0) span.append(text);
  else span.append(text.slice(0, at), h("span", { class: "tok-com", text: text.slice(at) }));
  return span;
}

function viewDevices(app, box) {
  const dv = app.data.devices;
  if (!dv || !dv.targets || !dv.targets.length) {
    box.append(h("p", { class: "rlx-muted", text: "devices side by side: not computed (devices=False)" }));
    return;
  }
  box.append(h("div", { class: "rlx-small" }, h("b", { text: `${dv.ready.length} of ${dv.targets.length} targets compile-ready: ` }),
    dv.ready.join(", ") || "none"));
  const grid = h("div", { class: "rlx-devgrid" });
  for (const t of dv.targets) {
    const routes = Object.entries(t.routes).filter(([, n]) => n).map(([r, n]) => h("span", {
      class: "rlx-route " + (ROUTE_CLASS[r] || ""), text: `${n} ${r}` }));
    const card = h("div", { class: "rlx-dev " + (t.compile_ready ? "rlx-dev-ok" : "rlx-dev-bad"), "data-target": t.name },
      h("div", {}, h("b", { text: t.name }), " ", h("span", { class: "rlx-small rlx-muted", text: t.language })),
      h("div", { class: "rlx-verif", text: t.verification }),
      h("div", { class: "rlx-small " + (t.compile_ready ? "rlx-ok" : "rlx-bad-text"),
        text: t.compile_ready ? "compile-ready" : `not ready: ${t.failing_nodes} node(s)` }),
      h("div", { class: "rlx-small" }, routes),
      t.available ? null : h("div", { class: "rlx-small rlx-muted", title: t.why, text: "not runnable here" }));
    if (t.takes.length) {
      card.append(h("div", { class: "rlx-small" }, h("b", { text: "what it would take:" })),
        h("ol", { class: "rlx-takes" }, t.takes.map((k) => h("li", { "data-code": k.code,
          onclick: () => k.nodes.length && app.selectMany(k.nodes, `${t.name}: ${k.code}`) },
        h("code", { class: "rlx-code-badge", text: k.code }), " ", k.fix_line))));
    }
    grid.append(card);
  }
  box.append(grid);
  const sbs = dv.side_by_side;
  if (!sbs || !sbs.kernels.length) return;
  const pick = h("select", { class: "rlx-sbs-pick" });
  sbs.kernels.forEach((k, i) => pick.append(h("option", { value: i,
    text: `@${k.name} (${k.kind}: ${k.ops.slice(0, 6).join(", ")}${k.ops.length > 6 ? ", …" : ""})` })));
  const cols = h("div", { class: "rlx-sbs" });
  const draw = () => {
    const k = sbs.kernels[Number(pick.value)];
    clear(cols);
    for (const c of k.targets) {
      const col = h("div", { class: "rlx-sbs-col", "data-target": c.target },
        h("div", {}, h("b", { text: c.target }), " ", h("span", { class: "rlx-small", text: c.language }),
          c.kernel ? h("span", { class: "rlx-small rlx-muted", text: ` @${c.kernel} · ${c.how}` }) : null));
      if (c.error) col.append(h("div", { class: "rlx-small rlx-bad-text", text: c.error }));
      else if (c.same_as) col.append(h("div", { class: "rlx-small rlx-muted", text: `the same source as ${c.same_as}` }));
      else {
        const pre = h("pre", { class: "rlx-code", "data-kernel": c.kernel });
        for (const line of c.lines) {
          const span = plainLine(line.text);
          if (line.nodes.length) {
            span.dataset.nodes = originIds(app, line.nodes).join(" ");
            span.dataset.origins = line.nodes.join(" ");
            span.classList.add("rlx-link");
            span.addEventListener("click", () => app.selectMany(line.nodes, `${c.target} @${c.kernel}`));
          }
          pre.append(span, "\n");
        }
        col.append(pre);
      }
      cols.append(col);
    }
    app.refresh();
  };
  pick.addEventListener("change", draw);
  box.append(h("h3", { text: "the same kernel in every target's language" }),
    h("div", { class: "rlx-row" }, "kernel ", pick, h("span", { class: "rlx-small rlx-muted",
      text: " · each target lowered the model itself; its kernel computing these nodes is shown; " +
        "a click on a line selects its nodes (from the renderer's // %name comments where it writes them)" })),
    cols);
  draw();
}

// The cost overlay: a log-log roofline of this CPU (FMA peak, read bandwidth) with each
// kernel's measured GFLOP/s at its arithmetic intensity, and the table beside it.
function fmtNum(n) {
  if (n >= 1e9) return (n / 1e9).toFixed(2) + " G";
  if (n >= 1e6) return (n / 1e6).toFixed(2) + " M";
  if (n >= 1e3) return (n / 1e3).toFixed(1) + " k";
  return String(Math.round(n * 100) / 100);
}

function rooflineSvg(app, rf) {
  const pts = rf.kernels.filter((k) => k.flops > 0 && k.bytes > 0);
  const W = 420, H = 240, L = 48, B = 28;
  const svg = s("svg", { width: W + L + 10, height: H + B + 10, class: "rlx-roof" });
  if (!pts.length) return svg;
  const xs = pts.map((k) => k.intensity), ys = pts.map((k) => k.achieved_gflops || 0).filter((y) => y > 0);
  const peak = rf.peaks ? rf.peaks.gflops : 0, bw = rf.peaks ? rf.peaks.gbps : 0;
  let x0 = Math.min(...xs) / 4, x1 = Math.max(...xs) * 4;
  if (peak) { x0 = Math.min(x0, rf.peaks.ridge / 8); x1 = Math.max(x1, rf.peaks.ridge * 8); }
  const yAll = [...ys, ...(peak ? [peak, bw * x0] : [])];
  let y0 = Math.min(...yAll) / 4, y1 = Math.max(...yAll) * 2;
  if (!(y0 > 0)) { y0 = 1e-3; y1 = Math.max(1, y1); }
  const X = (v) => L + (Math.log10(v / x0) / Math.log10(x1 / x0)) * W;
  const Y = (v) => 5 + H - (Math.log10(v / y0) / Math.log10(y1 / y0)) * H;
  svg.append(s("rect", { x: L, y: 5, width: W, height: H, fill: "#f8fafc", stroke: "#cbd5e1" }));
  for (let e = Math.ceil(Math.log10(x0)); e <= Math.floor(Math.log10(x1)); e++) {
    svg.append(s("text", { x: X(10 ** e), y: H + 18, "text-anchor": "middle", text: `1e${e}` }));
  }
  for (let e = Math.ceil(Math.log10(y0)); e <= Math.floor(Math.log10(y1)); e++) {
    svg.append(s("text", { x: L - 4, y: Y(10 ** e) + 3, "text-anchor": "end", text: `1e${e}` }));
  }
  svg.append(s("text", { x: L + W / 2, y: H + B + 6, "text-anchor": "middle", text: "FLOP / byte" }),
    s("text", { x: 10, y: 12, text: "GFLOP/s" }));
  if (peak) {
    const ridge = rf.peaks.ridge;
    svg.append(s("polyline", { class: "roof", points: `${X(x0)},${Y(bw * x0)} ${X(ridge)},${Y(peak)} ${X(x1)},${Y(peak)}` }),
      s("text", { x: X(x1) - 4, y: Y(peak) - 4, "text-anchor": "end", text: `FMA peak ${peak} GFLOP/s` }),
      s("text", { x: X(x0) + 4, y: Y(bw * x0) - 6, text: `${bw} GB/s` }));
  } else {
    svg.append(s("text", { x: L + 8, y: 20, class: "rlx-bad-text", text: "uncalibrated: no roof (peaks not measured)" }));
  }
  for (const k of pts) {
    if (peak) {
      const c = s("circle", { cx: X(k.intensity), cy: Y(Math.min(peak, bw * k.intensity)), r: 4, class: "pt-pred", "data-node": k.id });
      c.append(s("title", { text: `@${k.name}: bound ${k.bound}, predicted ${fmtTime(k.predicted_s)}` }));
      svg.append(c);
    }
    if (k.achieved_gflops > 0) {
      const m = s("rect", { x: X(k.intensity) - 4, y: Y(k.achieved_gflops) - 4, width: 8, height: 8, class: "pt-meas", "data-node": k.id });
      m.append(s("title", { text: `@${k.name}: measured ${fmtTime(k.measured_s)} = ${k.achieved_gflops.toFixed(2)} GFLOP/s` }));
      m.addEventListener("click", () => k.id && app.selectKernel(k.id));
      svg.append(m);
    }
  }
  return svg;
}

function viewRoofline(app, box) {
  const rf = app.data.roofline;
  if (!rf || !rf.present) return;
  const pk = rf.peaks;
  box.append(h("h3", { text: "cost overlay (roofline)" }),
    h("div", { class: "rlx-small" + (rf.status === "calibrated" ? "" : " rlx-bad-text"),
      text: pk ? `${pk.cpu}, ${pk.threads} thread(s): FMA ${pk.gflops} GFLOP/s, read ${pk.gbps} GB/s ` +
        `(ridge ${pk.ridge.toFixed(2)} FLOP/byte, measured ${pk.measured})` : `uncalibrated: ${rf.why}` }));
  const table = h("table", { class: "rlx-profile rlx-rooftable" }, h("tr", {},
    ["kernel", "kind", "FLOPs", "bytes", "FLOP/B", "bound", "predicted", "measured", "of roofline", ""].map((t) => h("th", { text: t }))));
  for (const k of rf.kernels) {
    table.append(h("tr", { class: "rlx-link", "data-kid": k.id, onclick: () => k.id && app.selectKernel(k.id) },
      h("td", { text: "@" + k.name }), h("td", { text: k.kind }), h("td", { text: fmtNum(k.flops) }),
      h("td", { text: fmtBytes(k.bytes) }), h("td", { text: k.intensity.toFixed(2) }),
      h("td", { text: k.bound || "—" }), h("td", { text: k.predicted_s == null ? "—" : fmtTime(k.predicted_s) }),
      h("td", { text: k.measured_s == null ? "—" : fmtTime(k.measured_s) }),
      h("td", { text: k.of_roofline == null ? "—" : (100 * k.of_roofline).toFixed(1) + "%" }),
      h("td", { class: k.status === "calibrated" ? "rlx-ok" : "rlx-muted", title: k.why, text: k.status })));
  }
  box.append(h("div", { class: "rlx-split rlx-wrap rlx-roofbox" }, rooflineSvg(app, rf), table));
}
