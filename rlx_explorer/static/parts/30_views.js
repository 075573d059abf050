// Part 4: the views. Each is a function (app, container) that fills the container from
// app.data; selection and highlight go through app.select / app.selectKernel.

const ROUTE_CLASS = { native: "r-native", "common-IR": "r-common", rewritten: "r-rewritten",
  unsupported: "r-unsupported" };

function viewGraphs(app, box) {
  const levels = ["hir", "mir", "lir"].filter((l) => app.data.levels[l]);
  const row = h("div", { class: "rlx-levels" });
  // side by side, or one level over the whole width (the others a click away; selections
  // still light up in every level)
  const modes = h("div", { class: "rlx-layout rlx-small" }, "layout: ");
  const setMode = (mode) => {
    for (const b of modes.querySelectorAll("button")) b.classList.toggle("rlx-active", b.dataset.layout === mode);
    for (const l of levels) app.graphs[l].el.hidden = mode !== "all" && mode !== l;
  };
  for (const mode of ["all", ...levels]) {
    modes.append(h("button", { class: "rlx-tab", "data-layout": mode,
      text: mode === "all" ? "side by side" : mode.toUpperCase(), onclick: () => setMode(mode) }));
  }
  box.append(modes, row);
  app.graphs = {};
  for (const level of levels) {
    const panel = new GraphPanel(app, app.data.levels[level], level, level.toUpperCase());
    app.graphs[level] = panel;
    row.append(panel.el);
  }
  setMode("all");
  // HIR first: the initial, readable view opens before the bigger levels are laid out
  return levels.reduce((p, l) => p.then(() => app.graphs[l].draw()), Promise.resolve());
}

function viewText(app, box) {
  const row = h("div", { class: "rlx-levels" });
  const toggle = h("input", { type: "checkbox", class: "rlx-locs-toggle", checked: "checked",
    onchange: () => row.classList.toggle("rlx-hide-locs", !toggle.checked) });
  box.append(h("label", { class: "rlx-small" }, toggle, " source locations (loc)"), row);
  for (const [level, tv] of Object.entries(app.data.texts)) {
    const pre = h("pre", { class: "rlx-code", "data-text": level });
    tv.lines.forEach((line) => {
      const span = tokensLine(line.tokens);
      if (line.loc) span.append(h("span", { class: "rlx-loc", text: " " + line.loc }));
      if (line.node) {
        span.dataset.node = line.node;
        span.classList.add("rlx-link");
        span.addEventListener("click", () => app.selectById(level, line.node));
      }
      pre.append(span, "\n");
    });
    row.append(h("div", { class: "rlx-col" }, h("b", { text: level.toUpperCase() }), pre));
  }
}

function viewPasses(app, box) {
  const steps = app.data.passes.steps;
  const list = h("div", { class: "rlx-steplist" });
  const body = h("div", { class: "rlx-stepbody" });
  box.append(h("div", { class: "rlx-split" }, list, body));
  let current = -1;
  const show = (i) => {
    current = i;
    for (const b of list.children) b.classList.toggle("rlx-active", Number(b.dataset.step) === i);
    const st = steps[i];
    clear(body);
    body.append(h("div", { class: "rlx-stephead" },
      h("b", { text: `${i + 1}. ${st.name}` }), " ",
      h("span", { class: "rlx-muted", text: `${st.file}:${st.line}` }), " ",
      h("span", { class: "rlx-small", text: `${st.level_before} → ${st.level_after}, ` +
        `${st.rules.length} rule firings, ${fmtTime(st.seconds)}` }), " ",
      h("button", { class: "rlx-btn", onclick: () => i > 0 && show(i - 1), text: "◀ prev" }),
      h("button", { class: "rlx-btn", onclick: () => i < steps.length - 1 && show(i + 1),
        text: "next ▶" })));
    if (!st.changed) {
      body.append(h("p", { class: "rlx-muted", text: "this pass left the graph unchanged" }));
    }
    let panel = null;
    if (st.graph) {
      const sm = st.graph.summary;
      body.append(h("div", { class: "rlx-small" },
        h("span", { class: "st-added", text: `+${sm.added} added` }), " ",
        h("span", { class: "st-changed", text: `~${sm.changed} changed` }), " ",
        h("span", { class: "st-removed", text: `−${sm.removed} removed` })));
      panel = new GraphPanel(app, st.graph, "", "graph diff");
      panel.state.collapsed = [];
      panel.el.classList.add("rlx-diff");
    }
    const rules = h("ol", { class: "rlx-rules" });
    st.rules.forEach((r, j) => {
      rules.append(h("li", { class: "rlx-link", "data-rule": j, onclick: (e) => {
        for (const li of rules.children) li.classList.remove("rlx-active");
        e.currentTarget.classList.add("rlx-active");
        if (panel) panel.mark("rlx-hl", r.touched);
        clear(detail).append(h("div", {}, h("b", { text: r.rule }), " ",
          h("span", { class: "rlx-muted", text: `${r.file}:${r.line}` })),
          h("div", { class: "rlx-small", text: "before" }),
          h("pre", { class: "rlx-code" }, r.before.join("\n")),
          h("div", { class: "rlx-small", text: "after" }),
          h("pre", { class: "rlx-code" }, r.after.join("\n")));
      } }, h("b", { text: r.rule }), " at %", r.node, " ",
      h("span", { class: "rlx-muted", text: `${r.file}:${r.line}` })));
    });
    const detail = h("div", { class: "rlx-ruledetail" });
    if (st.rules.length) body.append(h("b", { text: "rule applications" }), rules, detail);
    if (panel) {
      body.append(panel.el);
      panel.draw();
    }
    if (st.text_diff.length) {
      const pre = h("pre", { class: "rlx-code rlx-textdiff" });
      for (const line of st.text_diff) {
        const cls = line.startsWith("+") ? "st-added" : line.startsWith("-") ? "st-removed" : "";
        pre.append(h("span", { class: cls, text: line }), "\n");
      }
      body.append(h("details", {}, h("summary", { text: "text diff" }), pre));
    }
  };
  steps.forEach((st, i) => list.append(h("button", {
    class: "rlx-step" + (st.changed ? "" : " rlx-muted"), "data-step": i, onclick: () => show(i),
    text: `${i + 1}. ${st.name} (${st.rules.length})` })));
  if (steps.length) show(steps.findIndex((st) => st.changed) >= 0
    ? steps.findIndex((st) => st.changed) : 0);
  else box.append(h("p", { class: "rlx-muted", text: "no compile succeeded: no passes to show" }));
}

function decisionRecord(rec, nested) {
  const out = h("div", { class: "rlx-record" },
    h("div", {}, h("b", { text: `%${rec.node} = ${rec.op}` }), " on ", h("b", { text: rec.target }),
      ": ", h("span", { class: "rlx-route " + (ROUTE_CLASS[rec.route] || ""), text: rec.route }),
      rec.rule ? h("span", { text: ` via ${rec.rule}` }) : ""),
    h("div", { class: "rlx-small", text: `policy ${rec.policy} · ${rec.types} · at ${rec.where}` }),
    h("div", { class: "rlx-small", text: `cost: ${rec.cost.nodes} nodes, ${rec.cost.flops} flops, ` +
      `${fmtBytes(rec.cost.bytes)}` }));
  if (rec.code) out.append(h("div", { class: "rlx-bad-text", text: `[${rec.code}] ${rec.hint}` }));
  if (rec.rejected.length) {
    const ul = h("ul", { class: "rlx-rejected" });
    for (const rej of rec.rejected) {
      for (const r of rej.reasons) {
        ul.append(h("li", {}, h("b", { text: rej.route + (rej.rule ? ` (${rej.rule})` : "") }),
          ": ", h("code", { text: r.code }), " ", r.message, r.hint ? ` — fix: ${r.hint}` : ""));
      }
    }
    out.append(h("div", { class: "rlx-small", text: "rejected routes" }), ul);
  }
  if (rec.produced.length) {
    out.append(h("details", {}, h("summary", { text: `produced ${rec.produced.length} node(s)` }),
      h("pre", { class: "rlx-code" }, rec.produced.join("\n"))));
  }
  if (nested && nested.length) {
    out.append(h("details", {}, h("summary", { text: `${nested.length} nested decision(s)` }),
      h("ul", {}, nested.map((d) => h("li", {}, `%${d.node} ${d.op}: `,
        h("span", { class: "rlx-route " + (ROUTE_CLASS[d.route] || ""), text: d.route }))))));
  }
  return out;
}

function viewDispatch(app, box) {
  const pol = app.data.dispatch;
  const sel = h("select", { class: "rlx-policy" });
  for (const p of pol.available) {
    const opt = h("option", { value: p, text: p });
    if (p === app.policy) opt.selected = true;
    sel.append(opt);
  }
  sel.addEventListener("change", () => app.setPolicy(sel.value));
  const m = pol.matrices[app.policy] || pol.matrices[pol.current];
  const moved = app.policy === pol.current ? [] : (pol.moved[app.policy] || []);
  const live = app.model.get("live") ? "recompiles live" : "precomputed static probe";
  box.append(h("div", { class: "rlx-row" }, "policy ", sel, " ",
    h("span", { class: "rlx-small rlx-muted", text: `(${live}; compiled with ${pol.current})` })));
  const legend = h("div", { class: "rlx-small" }, pol.matrices[pol.current].routes.map((r) =>
    h("span", { class: "rlx-route " + ROUTE_CLASS[r], text: r })));
  box.append(legend);
  if (app.policy !== pol.current) {
    box.append(h("div", { class: "rlx-moved" }, h("b", { text: moved.length
      ? `${moved.length} kind(s) moved route under ${app.policy}:` : `no kind moved under ${app.policy}` }),
    h("ul", {}, moved.map((mv) => h("li", { text: `${mv.target} · ${mv.kind}: ` +
      Object.entries(mv.before).filter(([, n]) => n).map(([r, n]) => `${n} ${r}`).join(", ") + " → " +
      Object.entries(mv.after).filter(([, n]) => n).map(([r, n]) => `${n} ${r}`).join(", ") })))));
  }
  const table = h("table", { class: "rlx-matrix" });
  const head = h("tr", {}, h("th", { text: "node" }), h("th", { text: "op" }),
    h("th", { text: "source" }));
  for (const t of m.targets) {
    head.append(h("th", { title: t.verification },
      t.name, h("div", { class: "rlx-small " + (t.compile_ready ? "rlx-ok" : "rlx-bad-text"),
        text: `${t.verification} · ${t.compile_ready ? "ready" : "not ready"}` })));
  }
  table.append(head);
  const detail = h("div", { class: "rlx-celldetail" });
  for (const row of m.rows) {
    const tr = h("tr", { "data-origin": row.origin },
      h("td", { class: "rlx-link", text: "%" + row.node, onclick: () => app.select(row.origin) }),
      h("td", { text: row.op }), h("td", { class: "rlx-small", title: row.where,
        text: row.where.split("/").pop() }));
    for (const t of m.targets) {
      const cell = row.cells[t.name];
      const td = h("td", { class: "rlx-cell " + (cell ? ROUTE_CLASS[cell.route] || "" : ""),
        "data-target": t.name, "data-route": cell ? cell.route : "",
        // the route only: fifteen targets' columns must fit; the rule is in the tooltip and
        // the full record one click away
        title: cell && cell.rule ? `${cell.route} · ${cell.rule}` : undefined,
        text: cell ? cell.route : "—" });
      if (cell) td.addEventListener("click", () => {
        for (const x of table.querySelectorAll(".rlx-active")) x.classList.remove("rlx-active");
        td.classList.add("rlx-active");
        clear(detail).append(decisionRecord(cell.record, cell.nested));
        app.select(row.origin, { keepView: true });
      });
      tr.append(td);
    }
    table.append(tr);
  }
  // every target's column stays in view: the cell detail moves below when it does not fit
  box.append(h("div", { class: "rlx-split rlx-wrap" }, h("div", { class: "rlx-scroll" }, table), detail));
}

function viewFailures(app, box) {
  const fails = app.data.failures;
  if (!fails.length) {
    box.append(h("p", { class: "rlx-ok", text: "every target compiled: no legalization failures" }));
    return;
  }
  for (const f of fails) {
    const sec = h("div", { class: "rlx-failure", "data-target": f.target });
    sec.append(h("h3", { class: "rlx-bad-text",
      text: `${f.count} node(s) cannot run on ${f.target} (policy ${f.policy})` }),
    h("div", { class: "rlx-small rlx-muted", text: (f.compiled ? "from the compile" :
      "from the static probe (the target is not built here)") + ` · codes: ${f.codes.join(", ")}` +
      ` · every code is explained in ${f.docs}` }));
    const list = h("div", { class: "rlx-cards" });
    const byNode = Object.fromEntries(f.failures.map((i) => [i.node, i]));
    const badge = (code) => (f.code_links && f.code_links[code]
      ? h("a", { class: "rlx-code-badge", href: f.code_links[code], target: "_blank",
        rel: "noopener", title: "what " + code + " means and how to fix it", text: code })
      : h("code", { class: "rlx-code-badge", text: code }));
    const nodeCard = (item, cause) => h("div", { class: "rlx-card", "data-node": item.node,
      onclick: (ev) => { ev.stopPropagation(); app.select(item.origin, { keepView: true }); } },
      h("div", {}, badge(item.code), " ",
        h("b", { text: `%${item.node} = ${item.op}` }), " ", h("span", { class: "rlx-small", text: item.types })),
      h("div", { class: "rlx-srcline" }, h("span", { class: "rlx-muted", text: `${item.file_label || item.file}:${item.line}  ` }),
        h("code", { text: item.source_line.trim() })),
      h("div", { text: item.message }),
      cause ? h("div", { class: "rlx-small rlx-muted", text: `poisoned by ${cause}` })
        : h("div", { class: "rlx-hint", text: "fix: " + (item.hint || "see " + f.docs) }),
      h("details", {}, h("summary", { text: "routes tried" }),
        h("ul", {}, item.rejected.flatMap((rej) => rej.reasons.map((r) => h("li", {},
          h("b", { text: rej.route }), `: [${r.code}] ${r.message}`))))));
    const groups = f.groups || [];
    if (groups.length) {
      sec.append(h("div", { class: "rlx-small", text: `${groups.length} root cause(s): fix ` +
        "each at its source line; the nodes it poisons are listed under it" }));
    }
    for (const g of groups) {
      const own = g.kind === "node";
      list.append(h("div", { class: "rlx-cause", "data-cause": g.cause,
        onclick: () => g.hir_id && app.select(g.cause, { keepView: true }) },
      h("div", {}, badge(g.code), " ", h("b", { text: g.title })),
      g.file ? h("div", { class: "rlx-srcline" }, h("span", { class: "rlx-muted",
        text: `${g.file_label || g.file}:${g.line}  ` }), h("code", { text: (g.source_line || "").trim() })) : null,
      h("div", { class: "rlx-hint", text: "fix: " + g.fix_line }),
      h("div", { class: "rlx-cards rlx-poisoned" },
        g.nodes.map((n) => byNode[n]).filter(Boolean).map((i) => nodeCard(i, own ? "" : "`" + g.cause + "`")))));
    }
    if (!groups.length) for (const item of f.failures) list.append(nodeCard(item, ""));
    sec.append(list);
    if (app.data.levels.hir) {
      const panel = new GraphPanel(app, app.data.levels.hir, "hir", `HIR — illegal on ${f.target}`);
      panel.marks["rlx-bad"] = f.failures.map((i) => i.hir_id).filter(Boolean);
      sec.append(panel.el);
      panel.draw();
      app.extraGraphs.push(panel);
    }
    box.append(sec);
  }
}

function viewKernels(app, box) {
  const targets = Object.keys(app.data.kernels);
  if (!targets.length) {
    box.append(h("p", { class: "rlx-muted", text: "no target compiled: no kernels" }));
    return;
  }
  for (const t of targets) {
    const kv = app.data.kernels[t];
    const sec = h("div", { class: "rlx-kernels", "data-target": t },
      h("h3", { text: `${t}: ${kv.kernels.length} kernels` + (kv.generated ? "" :
        " (interpreted: the LIR of each kernel is what runs)") }));
    for (const k of kv.kernels) {
      const pre = h("pre", { class: "rlx-code", "data-kernel": k.name });
      k.lines.forEach((line) => {
        const span = tokensLine(line.tokens);
        if (line.nodes.length) {
          span.dataset.nodes = line.nodes.join(" ");
          span.classList.add("rlx-link");
          span.addEventListener("click", () => app.selectById("lir", line.nodes[0]));
        }
        pre.append(span, "\n");
      });
      sec.append(h("div", { class: "rlx-kernel", "data-kid": k.id },
        h("b", { class: "rlx-link", text: `@${k.name}`, onclick: () => k.id && app.selectKernel(k.id) }),
        h("span", { class: "rlx-small", text: ` ${k.kind}, ${k.nodes.length} fused nodes` }), pre));
    }
    box.append(sec);
  }
}

function viewMemory(app, box) {
  const mem = app.data.memory;
  if (!mem.present) {
    box.append(h("p", { class: "rlx-muted", text: "no arena plan (no compile succeeded)" }));
    return;
  }
  box.append(h("div", {}, h("b", { text: `peak ${fmtBytes(mem.peak_bytes)}` }),
    ` for ${mem.slots.length} buffers; without reuse ${fmtBytes(mem.naive_bytes)} ` +
    `(saved ${fmtBytes(mem.saved_bytes)}), alignment ${mem.alignment}`));
  const steps = Math.max(1, mem.live_bytes.length);
  const W = Math.max(400, steps * 24), H = 260, peak = Math.max(1, mem.peak_bytes);
  const svg = s("svg", { width: W + 60, height: H + 40, class: "rlx-timeline" });
  svg.append(s("text", { x: 0, y: 12, "font-size": 10, text: "offset" }));
  for (const slot of mem.slots) {
    const rect = s("rect", { x: 50 + slot.first * (W / steps), y: 20 + (slot.offset / peak) * H,
      width: Math.max(2, (slot.last - slot.first + 1) * (W / steps) - 2),
      height: Math.max(2, (slot.size / peak) * H - 1), class: slot.alias ? "rlx-slot rlx-alias" : "rlx-slot", "data-node": slot.id });
    rect.append(s("title", { text: `%${slot.value}: ${fmtBytes(slot.size)} @${slot.offset}, ` +
      `live kernels ${slot.first}..${slot.last}` +
      (slot.alias ? `, shares the bytes of %${slot.alias} (a reshape: nothing copied)` : "") }));
    rect.addEventListener("click", () => slot.id && app.selectById("lir", slot.id));
    svg.append(rect);
    // a label on every buffer big enough to hold one (the full details stay in the tooltip)
    const rw = Number(rect.getAttribute("width")), rh = Number(rect.getAttribute("height"));
    if (rw >= 36 && rh >= 11) {
      const full = `%${slot.value} ${fmtBytes(slot.size)}`;
      const fit = Math.floor((rw - 4) / 5.5);
      svg.append(s("text", { x: Number(rect.getAttribute("x")) + 2,
        y: Number(rect.getAttribute("y")) + Math.min(rh - 2, 10), "font-size": 9,
        class: "rlx-slot-label", "pointer-events": "none",
        text: full.length > fit ? full.slice(0, Math.max(1, fit - 1)) + "…" : full }));
    }
  }
  // axes: offsets (0 and the peak) and kernel indices (names on hover)
  svg.append(s("text", { x: 46, y: 28, "font-size": 9, "text-anchor": "end", text: "0" }),
    s("text", { x: 46, y: 20 + H, "font-size": 9, "text-anchor": "end", text: fmtBytes(peak) }));
  const every = Math.max(1, Math.ceil(steps / Math.floor(W / 28)));
  for (let i = 0; i < steps; i += every) {
    const t = s("text", { x: 50 + (i + 0.5) * (W / steps), y: H + 24, "font-size": 9,
      "text-anchor": "middle", class: "rlx-kernel-tick", text: String(i) });
    t.append(s("title", { text: mem.kernels[i] || `kernel ${i}` }));
    svg.append(t);
  }
  svg.append(s("text", { x: 50, y: H + 36, "font-size": 10, text: "kernel →" }));
  box.append(h("div", { class: "rlx-scroll" }, svg));
  const maxLive = Math.max(1, ...mem.live_bytes);
  const at = mem.live_bytes.indexOf(maxLive);
  box.append(h("div", { class: "rlx-small", text: `bytes live per kernel (most: ` +
    `${fmtBytes(maxLive)} at ${mem.kernels[at] || "kernel " + at})` }),
    h("div", { class: "rlx-bars" }, mem.live_bytes.map((b, i) => h("div", { class: "rlx-bar",
      title: `${mem.kernels[i] || i}: ${fmtBytes(b)}`, style: `height:${Math.round(60 * b / maxLive)}px` }))));
}

function viewProfile(app, box) {
  const p = app.data.profile;
  if (!p.present) {
    box.append(h("p", { class: "rlx-muted", text: "not run: no profile" }));
  } else {
    box.append(h("div", {}, h("b", { text: `${p.target}: ${fmtTime(p.total_seconds)} per call` }),
      ` · per kernel: ${p.method}, best of ${p.runs}`));
    const table = h("table", { class: "rlx-profile" });
    for (const k of p.kernels) {
      table.append(h("tr", { class: "rlx-link", onclick: () => k.id && app.selectKernel(k.id) },
        h("td", { text: "@" + k.name }), h("td", { text: k.kind }),
        h("td", { text: fmtTime(k.seconds) }),
        h("td", {}, h("div", { class: "rlx-hbar", style: `width:${Math.round(200 * k.share)}px` }))));
    }
    box.append(table);
  }
  viewRoofline(app, box);
}

function viewCache(app, box) {
  const c = app.data.cache;
  if (!c.present) {
    box.append(h("p", { class: "rlx-muted", text: "not a @rlx.jit function: no specialization cache" }));
    return;
  }
  box.append(h("div", {}, h("b", { text: c.function }), ` · ${c.specializations.length} ` +
    `specialization(s) · ${c.hits} hit(s) · ${c.misses} miss(es)`));
  box.append(h("ol", { start: 0 }, c.specializations.map((sp) => h("li", {},
    h("code", { text: sp.guards.join("; ") }), ` → ${sp.target}, ${sp.kernels} kernels`))));
  box.append(h("table", { class: "rlx-events" }, h("tr", {}, h("th", { text: "call" }),
    h("th", { text: "result" }), h("th", { text: "specialization" }), h("th", { text: "failing guard" })),
  c.events.map((e, i) => h("tr", { class: e.hit ? "rlx-ok" : "rlx-bad-text" },
    h("td", { text: i }), h("td", { text: e.hit ? "hit" : "miss" }),
    h("td", { text: e.specialization }), h("td", { text: e.failed_guard })))));
}

const VIEWS = { graph: ["graphs", viewGraphs], text: ["IR text", viewText], passes: ["passes", viewPasses],
  dispatch: ["dispatch", viewDispatch], devices: ["devices", viewDevices], failures: ["failures", viewFailures],
  kernels: ["kernels", viewKernels], memory: ["memory", viewMemory], profile: ["profile", viewProfile],
  cache: ["cache", viewCache] };
