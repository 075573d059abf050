// Wires the executor to kernels: registers the rlx.webgpu comm target on a kernel connection;
// every message the kernel sends is answered on the same comm (JupyterLab sends comm messages
// over a kernel subshell, so the reply reaches a kernel whose cell is still waiting).

import type { Kernel, KernelMessage } from '@jupyterlab/services';

import { WebGpuExecutor } from './executor';
import { COMM_TARGET } from './protocol';

type Comm = Pick<Kernel.IComm, 'send' | 'commId'> & {
  onMsg: (msg: KernelMessage.ICommMsgMsg) => void | PromiseLike<void>;
  onClose: (msg: KernelMessage.ICommCloseMsg) => void | PromiseLike<void>;
};

/** Handles one comm: every request is answered in order of arrival. */
export function attachComm(comm: Comm, executor: WebGpuExecutor): void {
  let chain: Promise<void> = Promise.resolve();
  comm.onMsg = msg => {
    const data = msg.content.data;
    const buffers = (msg.buffers ?? []) as (ArrayBuffer | ArrayBufferView)[];
    chain = chain.then(async () => {
      const answer = await executor.handle(data, buffers);
      if (answer) {
        comm.send(answer.reply as unknown as KernelMessage.ICommMsgMsg['content']['data'], undefined, answer.buffers);
      }
    });
    return chain;
  };
  comm.onClose = () => undefined;
}

const registered = new WeakSet<Kernel.IKernelConnection>();

/** Registers the comm target once per kernel connection. */
export function registerKernel(kernel: Kernel.IKernelConnection | null | undefined, executor: WebGpuExecutor): void {
  if (!kernel || registered.has(kernel)) {
    return;
  }
  registered.add(kernel);
  kernel.registerCommTarget(COMM_TARGET, comm => attachComm(comm as unknown as Comm, executor));
}
