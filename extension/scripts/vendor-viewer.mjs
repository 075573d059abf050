// Copies the explorer's one ESM viewer into the extension: the parts of rlx_explorer/static/parts
// joined in name order (exactly what rlx_explorer/assets.py viewer_esm() does) and the Graphviz
// WASM build as a string module. Run by `npm run build:lib`; writes lib/vendor/.
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const stat = join(here, '..', '..', 'rlx_explorer', 'static');
const out = join(here, '..', 'lib', 'vendor');
mkdirSync(out, { recursive: true });
const parts = readdirSync(join(stat, 'parts')).filter(f => f.endsWith('.js')).sort();
// The viewer imports Blob URLs at run time (the Graphviz module): tell webpack to leave those
// imports to the browser instead of turning them into a (failing) bundle lookup.
const esm = parts
  .map(f => readFileSync(join(stat, 'parts', f), 'utf8'))
  .join('\n')
  .replace(/\bimport\((?!\s*\/\*)/g, 'import(/* webpackIgnore: true */ ');
writeFileSync(join(out, 'viewer.js'), esm);
const viz = readFileSync(join(stat, 'viz', 'viz.js'), 'utf8');
writeFileSync(join(out, 'viz_src.js'), 'export default ' + JSON.stringify(viz) + ';\n');
console.log(`vendored the viewer (${parts.length} parts) and Graphviz (${viz.length} chars)`);
