// Wires the executor to kernels: registers the rlx.webgpu comm target on a kernel connection;
// every message the kernel sends is answered on the same comm (JupyterLab sends comm messages
// over a kernel subshell, so the reply reaches a kernel whose cell is still waiting).

import type { Kernel, KernelMessage } from '@jupyterlab/services';

import { WebGpuExecutor } from './executor';
import { COMM_TARGET } from './protocol';

type Comm = Pick<Kernel.IComm, 'send' | 'commId'> & {
  // resolves once JupyterLab created this comm's subshell (services >= 7.4)
  subshellStarted?: Promise<void>;
  onMsg: (msg: KernelMessage.ICommMsgMsg) => void | PromiseLike<void>;
  onClose: (msg: KernelMessage.ICommCloseMsg) => void | PromiseLike<void>;
};

/**
 * Handles one comm: every request is answered in order of arrival. ``supportsSubshells`` says
 * whether the kernel has subshells; then replies wait until the comm's subshell exists, since
 * JupyterLab sends on the main shell before that — where a waiting cell would never read it.
 */
export function attachComm(
  comm: Comm,
  executor: WebGpuExecutor,
  supportsSubshells: () => Promise<boolean> = async () => false
): void {
  let chain: Promise<void> = (async () => {
    if (comm.subshellStarted && (await supportsSubshells())) {
      await comm.subshellStarted.catch(err => console.warn('rlx-explorer: no comm subshell', err));
    }
  })();
  console.debug(`rlx-explorer: comm ${comm.commId} opened`);
  comm.onMsg = (msg): void => {
    const data = msg.content.data;
    const buffers = (msg.buffers ?? []) as (ArrayBuffer | ArrayBufferView)[];
    chain = chain.then(async () => {
      const answer = await executor.handle(data, buffers);
      if (answer) {
        comm.send(answer.reply as unknown as KernelMessage.ICommMsgMsg['content']['data'], undefined, answer.buffers);
      }
    });
    // not returned: JupyterLab handles kernel messages one at a time and awaits this
    // handler, so waiting here would also hold back the create_subshell_reply we wait for
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
  console.debug(`rlx-explorer: comm target ${COMM_TARGET} registered on kernel ${kernel.id}`);
  const subshells = async () => {
    await kernel.info;
    return kernel.supportsSubshells;
  };
  kernel.registerCommTarget(COMM_TARGET, comm => attachComm(comm as unknown as Comm, executor, subshells));
}
