// The MIME renderer's widget: mounts the explorer viewer on the saved bundle. Loading of the
// viewer and of the Graphviz WASM source is injected, so tests use a fake viewer.

import type { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import { bundleText, staticModel, Viewer } from './model';

export const MIME_TYPE = 'application/vnd.rlx.trace+json';

export interface ViewerSource {
  viewer(): Promise<Viewer>;
  vizSource(): Promise<string>;
}

export class TraceRenderer extends Widget implements IRenderMime.IRenderer {
  private cleanup: (() => void) | void = undefined;

  constructor(
    private readonly mimeType: string,
    private readonly source: ViewerSource
  ) {
    super();
    this.addClass('rlx-trace-output');
  }

  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    this.dispose_view();
    this.node.textContent = '';
    let data: string;
    try {
      data = bundleText(model.data[this.mimeType]);
    } catch (err) {
      this.node.textContent = `RLX Explorer: cannot read this output (${(err as Error).message})`;
      return;
    }
    const [viewer, vizSrc] = await Promise.all([this.source.viewer(), this.source.vizSource()]);
    const el = document.createElement('div');
    el.dataset.rlxMime = '1';
    this.node.appendChild(el);
    // live: false — no kernel behind a saved output; the policy selector switches between
    // the policies the bundle already holds instead of recompiling
    const values = { data, viz_src: vizSrc, live: false, policy: '' };
    this.cleanup = viewer.render({ model: staticModel(values), el });
  }

  private dispose_view(): void {
    if (typeof this.cleanup === 'function') {
      this.cleanup();
    }
    this.cleanup = undefined;
  }

  dispose(): void {
    this.dispose_view();
    super.dispose();
  }
}

export function rendererFactory(source: ViewerSource): IRenderMime.IRendererFactory {
  return {
    safe: true,
    mimeTypes: [MIME_TYPE],
    defaultRank: 50,
    createRenderer: options => new TraceRenderer(options.mimeType, source)
  };
}
