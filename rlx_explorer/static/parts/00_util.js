// RLX Explorer viewer, part 1: DOM helpers. Every string from the IR goes in through
// textContent or setAttribute on a fixed attribute name; markup is never built from data.

const SVG_NS = "http://www.w3.org/2000/svg";

function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = String(v);
    else if (k.startsWith("on") && typeof v === "function") node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function s(tag, attrs = {}) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "text") node.textContent = String(v);
    else node.setAttribute(k, String(v));
  }
  return node;
}

function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
  return node;
}

function fmtBytes(n) {
  if (n >= 1 << 20) return (n / (1 << 20)).toFixed(2) + " MiB";
  if (n >= 1 << 10) return (n / (1 << 10)).toFixed(1) + " KiB";
  return n + " B";
}

function fmtTime(sec) {
  if (sec >= 1) return sec.toFixed(3) + " s";
  if (sec >= 1e-3) return (sec * 1e3).toFixed(3) + " ms";
  return (sec * 1e6).toFixed(1) + " µs";
}

// Tokens from the Python highlighter ([cls, text] pairs) as spans.
function tokensLine(tokens) {
  const line = h("span", { class: "rlx-code-line" });
  for (const [cls, text] of tokens) {
    line.append(cls ? h("span", { class: "tok-" + cls, text }) : document.createTextNode(text));
  }
  return line;
}

// Graphviz output is parsed as SVG (never as HTML) and stripped of anything active, so even a
// hostile label that survived DOT quoting cannot run script.
function sanitizeSvg(text) {
  const doc = new DOMParser().parseFromString(text, "image/svg+xml");
  const root = doc.documentElement;
  if (!root || root.nodeName.toLowerCase() !== "svg") return null;
  const walk = (node) => {
    for (const child of [...node.children]) {
      const name = child.nodeName.toLowerCase();
      if (name === "script" || name === "foreignobject" || name === "iframe") {
        child.remove();
        continue;
      }
      for (const attr of [...child.attributes]) {
        const a = attr.name.toLowerCase();
        const v = attr.value.trim().toLowerCase();
        if (a.startsWith("on") || ((a === "href" || a.endsWith(":href")) && !v.startsWith("#"))) {
          child.removeAttribute(attr.name);
        }
      }
      walk(child);
    }
  };
  walk(root);
  return document.importNode(root, true);
}
