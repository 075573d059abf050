// The vendored Graphviz WASM module's source text (lib/vendor/viz_src.js).
declare const source: string;
export default source;
