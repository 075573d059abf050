// The rlx.webgpu comm protocol (mirror of rlx_core/targets/webgpu_browser/protocol.py).

export const VERSION = 1;
export const COMM_TARGET = 'rlx.webgpu';

export interface BufferJSON {
  name: string;
  nbytes: number;
  role: string;
}

export interface KernelJSON {
  name: string;
  source: string;
  bindings: string[]; // reads, then writes: binding i is bindings[i]
  workgroups: [number, number, number];
}

export interface PlanJSON {
  graph: string;
  buffers: BufferJSON[];
  kernels: KernelJSON[];
  outputs: string[];
}

export type Op = 'hello' | 'load' | 'run' | 'free' | 'open';

export interface Request {
  rlx: number;
  op: Op;
  id?: string;
  program?: string;
  plan?: PlanJSON;
  uploads?: string[];
}

export type ErrorKind = 'no-gpu' | 'shader' | 'run' | 'protocol' | 'unknown-program';

export interface AdapterJSON {
  name: string;
  backend: string;
  features: string[];
  limits: Record<string, number>;
}

export interface Reply {
  rlx: number;
  id: string;
  ok: boolean;
  kind?: ErrorKind;
  error?: string;
  adapter?: AdapterJSON;
  outputs?: string[];
}

/** A failure the kernel should see as a typed error of this kind. */
export class ExecutorError extends Error {
  constructor(
    readonly kind: ErrorKind,
    message: string
  ) {
    super(message);
  }
}

const isName = (x: unknown): x is string => typeof x === 'string' && x.length > 0;
const isCount = (x: unknown): x is number => Number.isInteger(x) && (x as number) >= 0;

/** Checks a request's shape; the kernel is trusted code, but a version skew must say so. */
export function parseRequest(data: unknown): Request {
  const r = data as Request;
  if (!r || typeof r !== 'object' || r.rlx !== VERSION) {
    throw new ExecutorError('protocol', `unsupported rlx.webgpu message (want version ${VERSION})`);
  }
  if (!['hello', 'load', 'run', 'free', 'open'].includes(r.op)) {
    throw new ExecutorError('protocol', `unknown op ${JSON.stringify(r.op)}`);
  }
  if ((r.op === 'load' || r.op === 'run' || r.op === 'free') && !isName(r.program)) {
    throw new ExecutorError('protocol', `${r.op} without a program id`);
  }
  if (r.uploads !== undefined && !(Array.isArray(r.uploads) && r.uploads.every(isName))) {
    throw new ExecutorError('protocol', 'uploads must be a list of buffer names');
  }
  if (r.op === 'load') {
    checkPlan(r.plan);
  }
  return r;
}

function checkPlan(plan: PlanJSON | undefined): void {
  if (!plan || !Array.isArray(plan.buffers) || !Array.isArray(plan.kernels)) {
    throw new ExecutorError('protocol', 'load without a plan');
  }
  const names = new Set<string>();
  for (const b of plan.buffers) {
    if (!isName(b.name) || !isCount(b.nbytes) || b.nbytes % 4 !== 0) {
      throw new ExecutorError('protocol', `bad buffer ${JSON.stringify(b)}`);
    }
    names.add(b.name);
  }
  for (const k of plan.kernels) {
    const wg = k.workgroups;
    if (typeof k.source !== 'string' || !Array.isArray(wg) || wg.length !== 3 || !wg.every(isCount)) {
      throw new ExecutorError('protocol', `bad kernel ${JSON.stringify(k.name)}`);
    }
    for (const v of k.bindings) {
      if (!names.has(v)) {
        throw new ExecutorError('protocol', `kernel ${k.name} binds unknown buffer ${v}`);
      }
    }
  }
  for (const o of plan.outputs) {
    if (!names.has(o)) {
      throw new ExecutorError('protocol', `output ${o} has no buffer`);
    }
  }
}

/** Incoming comm buffers arrive as ArrayBuffer or views; the executor wants plain bytes. */
export function asBytes(b: ArrayBuffer | ArrayBufferView): Uint8Array {
  return b instanceof ArrayBuffer ? new Uint8Array(b) : new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
}
