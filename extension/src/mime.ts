// The mime extension entry (package.json jupyterlab.mimeExtension): renders saved explorer
// outputs (application/vnd.rlx.trace+json) with the explorer's own ESM viewer, vendored at
// build time from rlx_explorer/static (scripts/vendor-viewer.mjs) — no second viewer.

import type { IRenderMime } from '@jupyterlab/rendermime-interfaces';

import type { Viewer } from './model';
import { MIME_TYPE, rendererFactory, ViewerSource } from './renderer';

const source: ViewerSource = {
  viewer: async () => (await import('./vendor/viewer.js')).default as Viewer,
  // the Graphviz WASM build, ~1.2 MB: its own chunk, fetched on the first render only
  vizSource: async () => (await import('./vendor/viz_src.js')).default
};

const extension: IRenderMime.IExtension = {
  id: 'rlx-explorer-labextension:mime',
  description: 'Renders RLX Explorer outputs saved in notebooks.',
  rendererFactory: rendererFactory(source),
  rank: 40, // ahead of text/html (50): the outputs carry an HTML fallback too
  dataType: 'json',
  fileTypes: [],
  documentWidgetFactoryOptions: []
};

export { MIME_TYPE };
export default extension;
