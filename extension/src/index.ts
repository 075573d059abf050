// The plugin entry (package.json jupyterlab.extension): the browser WebGPU executor. Every
// notebook's and console's kernel gets the rlx.webgpu comm target, so target "webgpu-browser"
// in a remote kernel (Binder) runs its WGSL on this tab's GPU.

import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { INotebookTracker } from '@jupyterlab/notebook';
import type { ISessionContext } from '@jupyterlab/apputils';

import { registerKernel } from './comm';
import { WebGpuExecutor } from './executor';
import type { Gpu } from './gpu';

declare global {
  interface Window {
    rlxWebGpuExecutor?: WebGpuExecutor;
  }
}

function watch(ctx: ISessionContext, executor: WebGpuExecutor): void {
  registerKernel(ctx.session?.kernel, executor);
  ctx.kernelChanged.connect((_, change) => registerKernel(change.newValue, executor));
}

const executorPlugin: JupyterFrontEndPlugin<void> = {
  id: 'rlx-explorer-labextension:webgpu-executor',
  description: 'Runs WGSL programs sent by the kernel on this browser tab\'s WebGPU.',
  autoStart: true,
  optional: [INotebookTracker],
  activate: (app: JupyterFrontEnd, notebooks: INotebookTracker | null) => {
    const gpu = (navigator as unknown as { gpu?: Gpu }).gpu;
    const executor = new WebGpuExecutor(gpu);
    window.rlxWebGpuExecutor = executor; // for the browser tests and for debugging
    notebooks?.widgetAdded.connect((_, panel) => watch(panel.sessionContext, executor));
    notebooks?.forEach(panel => watch(panel.sessionContext, executor));
    document.body.dataset.rlxExtension = 'active';
    console.log(`rlx-explorer: WebGPU executor active (navigator.gpu ${gpu ? 'present' : 'absent'})`);
  }
};

export default [executorPlugin];
