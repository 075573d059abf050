// Part 3: a graph panel — lays out one graph view, makes its boxes clickable (a block box
// collapses / expands, any other box selects), and shows the app's highlight on it.

const DEFAULT_COLLAPSE_ABOVE = 60;

function initialState(view) {
  const ops = view.nodes.filter((n) => n.kind === "node").length;
  const collapsed = ops > DEFAULT_COLLAPSE_ABOVE
    ? view.clusters.filter((c) => !c.parent).map((c) => c.id) : [];
  return { collapsed, params: false };
}

class GraphPanel {
  constructor(app, view, key, title) {
    this.app = app;
    this.view = view;
    this.key = key; // level name for server-side layouts, or "" (diff graphs)
    this.state = initialState(view);
    this.byId = Object.fromEntries(view.nodes.map((n) => [n.id, n]));
    this.clusterIds = new Set(view.clusters.map((c) => c.id));
    this.kernelIds = new Set(view.kernels.map((k) => k.id));
    this.canvas = h("div", { class: "rlx-graph-canvas", "data-level": view.level });
    const c = view.counts || {};
    const weights = h("label", { class: "rlx-small" },
      h("input", { type: "checkbox", onchange: (e) => {
        this.state.params = e.target.checked;
        this.draw();
      } }), " weights");
    const blocks = view.clusters.length
      ? h("button", { class: "rlx-btn", onclick: () => this.toggleAll(), text: "collapse/expand blocks" })
      : null;
    this.status = h("span", { class: "rlx-small rlx-muted" });
    this.zoom = 1;
    const zoomBtn = (text, title, f) => h("button", { class: "rlx-btn rlx-zoom", title, text,
      "data-zoom": text, onclick: () => { f(); this.applyZoom(); } });
    const zooms = h("span", { class: "rlx-zooms" },
      zoomBtn("fit", "fit the graph to the pane", () => { this.zoom = this.fitZoom(); }),
      zoomBtn("−", "zoom out (or ctrl + wheel)", () => { this.zoom /= 1.25; }),
      zoomBtn("+", "zoom in (or ctrl + wheel)", () => { this.zoom *= 1.25; }),
      zoomBtn("1:1", "natural size", () => { this.zoom = 1; }));
    this.el = h("div", { class: "rlx-graph", "data-graph": key || view.level },
      h("div", { class: "rlx-graph-head" },
        h("b", { text: title }), " ",
        h("span", { class: "rlx-small rlx-muted",
          text: `${c.nodes ?? view.nodes.length} ops` + (c.kernels ? `, ${c.kernels} kernels` : "") }),
        " ", blocks, " ", weights, " ", zooms, " ", this.status),
      this.canvas);
    this.canvas.addEventListener("click", (e) => this.onClick(e));
    this.canvas.addEventListener("wheel", (e) => {
      if (!e.ctrlKey) return;
      e.preventDefault();
      this.zoom *= e.deltaY < 0 ? 1.1 : 1 / 1.1;
      this.applyZoom();
    }, { passive: false });
    // drag the background to pan (a click without a drag still selects)
    let drag = null;
    this.canvas.addEventListener("mousedown", (e) => {
      drag = { x: e.clientX, y: e.clientY, left: this.canvas.scrollLeft, top: this.canvas.scrollTop, moved: false };
    });
    this.canvas.addEventListener("mousemove", (e) => {
      if (!drag || !(e.buttons & 1)) { drag = null; return; }
      const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
      if (Math.abs(dx) + Math.abs(dy) > 4) drag.moved = true;
      if (drag.moved) {
        this.canvas.scrollLeft = drag.left - dx;
        this.canvas.scrollTop = drag.top - dy;
      }
    });
    this.canvas.addEventListener("click", (e) => {
      if (drag && drag.moved) e.stopImmediatePropagation();
      drag = null;
    }, true);
    this.marks = {};
  }

  natural() {
    const svg = this.canvas.querySelector("svg");
    if (!svg) return null;
    if (!svg.dataset.w) {
      const vb = svg.viewBox && svg.viewBox.baseVal;
      svg.dataset.w = String(vb && vb.width ? vb.width : parseFloat(svg.getAttribute("width")) || 0);
      svg.dataset.h = String(vb && vb.height ? vb.height : parseFloat(svg.getAttribute("height")) || 0);
    }
    return { svg, w: Number(svg.dataset.w), h: Number(svg.dataset.h) };
  }

  fitZoom() {
    const n = this.natural();
    if (!n || !n.w || !n.h) return 1;
    const maxH = parseFloat(getComputedStyle(this.canvas).maxHeight) || 640;
    return Math.min((this.canvas.clientWidth - 4) / n.w, (maxH - 4) / n.h, 2);
  }

  applyZoom() {
    const n = this.natural();
    if (!n || !n.w || !n.h) return;
    this.zoom = Math.min(8, Math.max(0.05, this.zoom));
    n.svg.setAttribute("width", `${n.w * this.zoom}pt`);
    n.svg.setAttribute("height", `${n.h * this.zoom}pt`);
    this.canvas.dataset.zoom = this.zoom.toFixed(3);
  }

  toggleAll() {
    const top = this.view.clusters.filter((c) => !c.parent).map((c) => c.id);
    this.state.collapsed = this.state.collapsed.length ? [] : top;
    this.draw();
  }

  async draw() {
    const t0 = performance.now();
    this.status.textContent = "laying out…";
    try {
      const { svg, engine } = await layout(this.app.model, this.app.data, this.view, this.state,
        this.key);
      clear(this.canvas);
      if (svg) this.canvas.append(svg);
      if (this.zoom !== 1) this.applyZoom();
      this.status.textContent = `${engine} ${Math.round(performance.now() - t0)} ms`;
      this.canvas.dataset.rendered = "1";
      for (const [cls, ids] of Object.entries(this.marks)) this.mark(cls, ids);
    } catch (err) {
      this.status.textContent = "layout failed: " + err.message;
    }
    return this;
  }

  // The drawn box standing for node ``id``: its kernel (LIR), or its outermost collapsed block.
  boxFor(id) {
    const n = this.byId[id];
    if (!n) return id;
    const topClosed = topClosedOf(this.view, new Set(this.state.collapsed));
    if (this.view.level === "lir" && n.kernel && this.view.kernels.length) {
      const k = this.view.kernels.find((x) => x.id === n.kernel);
      return topClosed(k ? k.cluster || "" : "") || n.kernel;
    }
    return topClosed(n.cluster || "") || id;
  }

  // Adds ``cls`` to the drawn boxes standing for ``ids`` (remembered across re-layouts).
  mark(cls, ids) {
    this.marks[cls] = ids;
    for (const g of this.canvas.querySelectorAll("." + cls)) g.classList.remove(cls);
    for (const id of ids) {
      const g = this.canvas.querySelector(`[id="${CSS.escape(this.boxFor(id))}"]`);
      if (g) g.classList.add(cls);
    }
  }

  onClick(e) {
    const g = e.target.closest("g.node, g.cluster");
    if (!g) return;
    const id = g.getAttribute("id");
    if (this.clusterIds.has(id)) {
      const i = this.state.collapsed.indexOf(id);
      if (i >= 0) this.state.collapsed.splice(i, 1);
      else this.state.collapsed.push(id);
      this.draw();
    } else if (this.kernelIds.has(id)) {
      this.app.selectKernel(id);
    } else if (this.byId[id]) {
      const n = this.byId[id];
      this.app.select(n.loc.origin || n.name, { level: this.view.level, id, node: n });
    }
  }
}
