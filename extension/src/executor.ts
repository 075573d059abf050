// The browser WebGPU executor: runs the plans a kernel sends over the rlx.webgpu comm on this
// tab's GPU. Same execution as the Python runtimes (runtime_native.py, runtime_browser.py): one
// storage buffer per value, the kernels' dispatches in one compute pass, outputs copied into
// mappable staging buffers in the same submission, then mapped back.

import { BufferUsage, Gpu, GpuBuffer, GpuDevice, GpuPipeline, LIMITS, MapMode, PACKED_DOT } from './gpu';
import {
  AdapterJSON,
  asBytes,
  ExecutorError,
  parseRequest,
  PlanJSON,
  Reply,
  Request,
  VERSION
} from './protocol';

interface Loaded {
  plan: PlanJSON;
  buffers: Map<string, GpuBuffer>;
  sizes: Map<string, number>;
  staging: Map<string, GpuBuffer>;
  steps: { pipeline: GpuPipeline; group: unknown; workgroups: [number, number, number] }[];
}

export interface Answer {
  reply: Reply;
  buffers: ArrayBuffer[];
}

export class WebGpuExecutor {
  private device: GpuDevice | null = null;
  private adapter: AdapterJSON | null = null;
  private opening: Promise<GpuDevice> | null = null;
  private programs = new Map<string, Loaded>();
  private pipelines = new Map<string, GpuPipeline>();

  /** ``gpu`` is navigator.gpu (undefined where the browser has no WebGPU). */
  constructor(private readonly gpu: Gpu | undefined) {}

  get programCount(): number {
    return this.programs.size;
  }

  /** Answer one request; null for messages that take no reply (free, open). */
  async handle(data: unknown, buffers: (ArrayBuffer | ArrayBufferView)[] = []): Promise<Answer | null> {
    const id = typeof (data as Request)?.id === 'string' ? (data as Request).id! : '';
    try {
      const req = parseRequest(data);
      switch (req.op) {
        case 'open':
          return null;
        case 'free':
          this.free(req.program!);
          return null;
        case 'hello':
          await this.open();
          return { reply: { rlx: VERSION, id, ok: true, adapter: this.adapter! }, buffers: [] };
        case 'load':
          await this.load(req, buffers.map(asBytes));
          return { reply: { rlx: VERSION, id, ok: true }, buffers: [] };
        case 'run': {
          const out = await this.run(req, buffers.map(asBytes));
          return { reply: { rlx: VERSION, id, ok: true, outputs: out.names }, buffers: out.data };
        }
      }
    } catch (err) {
      const kind = err instanceof ExecutorError ? err.kind : 'run';
      const reply: Reply = { rlx: VERSION, id, ok: false, kind, error: String((err as Error)?.message ?? err) };
      return id ? { reply, buffers: [] } : null;
    }
    return null;
  }

  private async open(): Promise<GpuDevice> {
    if (this.device) {
      return this.device;
    }
    if (!this.opening) {
      this.opening = this.openDevice().finally(() => {
        this.opening = null;
      });
    }
    return this.opening;
  }

  private async openDevice(): Promise<GpuDevice> {
    if (!this.gpu) {
      throw new ExecutorError('no-gpu', 'this browser has no navigator.gpu (WebGPU is off or missing)');
    }
    const adapter = await this.gpu.requestAdapter();
    if (!adapter) {
      throw new ExecutorError('no-gpu', 'navigator.gpu.requestAdapter() found no adapter');
    }
    const features = [...adapter.features].map(String).sort();
    const limits: Record<string, number> = {};
    for (const k of LIMITS) {
      limits[k] = Number(adapter.limits[k]);
    }
    const device = await adapter.requestDevice({
      requiredFeatures: features.includes('shader-f16') ? ['shader-f16'] : [],
      requiredLimits: limits
    });
    const info = adapter.info ?? {};
    this.adapter = {
      name: info.description || [info.vendor, info.architecture, info.device].filter(Boolean).join(' ') || 'browser adapter',
      backend: 'webgpu',
      // a WGSL language extension is no adapter feature: reported as one, so the kernel picks
      // the packed int8 dialect where the browser compiles dot4I8Packed
      features: this.gpu.wgslLanguageFeatures?.has('packed_4x8_integer_dot_product')
        ? [...features, PACKED_DOT]
        : features,
      limits
    };
    // a lost device (driver reset, tab in background on some browsers) invalidates every
    // program: the kernel then sees unknown-program and loads again on the next hello
    void device.lost?.then(() => {
      if (this.device === device) {
        this.device = null;
        this.programs.clear();
        this.pipelines.clear();
      }
    });
    this.device = device;
    return device;
  }

  private pipeline(device: GpuDevice, source: string): GpuPipeline {
    // keyed without comments: they name values, so one kernel shape shares one pipeline
    const key = source
      .split('\n')
      .map(l => l.split('//')[0].trimEnd())
      .join('\n');
    let p = this.pipelines.get(key);
    if (!p) {
      const module = device.createShaderModule({ code: source });
      p = device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' } });
      this.pipelines.set(key, p);
    }
    return p;
  }

  private async load(req: Request, data: Uint8Array[]): Promise<void> {
    const device = await this.open();
    const plan = req.plan!;
    this.free(req.program!);
    const usage = BufferUsage.STORAGE | BufferUsage.COPY_DST | BufferUsage.COPY_SRC;
    const buffers = new Map<string, GpuBuffer>();
    const sizes = new Map<string, number>();
    for (const b of plan.buffers) {
      buffers.set(b.name, device.createBuffer({ size: b.nbytes, usage }));
      sizes.set(b.name, b.nbytes);
    }
    const staging = new Map<string, GpuBuffer>();
    for (const o of plan.outputs) {
      staging.set(o, device.createBuffer({ size: sizes.get(o)!, usage: BufferUsage.MAP_READ | BufferUsage.COPY_DST }));
    }
    const loaded: Loaded = { plan, buffers, sizes, staging, steps: [] };
    device.pushErrorScope('validation');
    for (const k of plan.kernels) {
      const pipeline = this.pipeline(device, k.source);
      const entries = k.bindings.map((v, i) => ({
        binding: i,
        resource: { buffer: buffers.get(v)!, offset: 0, size: sizes.get(v)! }
      }));
      const group = device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries });
      loaded.steps.push({ pipeline, group, workgroups: k.workgroups });
    }
    const err = await device.popErrorScope();
    if (err) {
      destroy(loaded);
      this.pipelines.clear(); // an invalid pipeline must not be reused
      throw new ExecutorError('shader', err.message);
    }
    this.write(device, loaded, req.uploads ?? [], data);
    this.programs.set(req.program!, loaded);
  }

  private write(device: GpuDevice, p: Loaded, names: string[], data: Uint8Array[]): void {
    if (names.length !== data.length) {
      throw new ExecutorError('protocol', `${names.length} upload names but ${data.length} buffers`);
    }
    names.forEach((name, i) => {
      const size = p.sizes.get(name);
      if (size === undefined) {
        throw new ExecutorError('protocol', `upload of unknown buffer ${name}`);
      }
      if (data[i].byteLength > size || data[i].byteLength % 4 !== 0) {
        throw new ExecutorError('protocol', `${name}: ${data[i].byteLength} bytes for a ${size}-byte buffer`);
      }
      device.queue.writeBuffer(p.buffers.get(name)!, 0, data[i]);
    });
  }

  private async run(req: Request, data: Uint8Array[]): Promise<{ names: string[]; data: ArrayBuffer[] }> {
    const p = this.programs.get(req.program!);
    if (!p || !this.device) {
      throw new ExecutorError('unknown-program', `program ${req.program} is not loaded in this tab`);
    }
    const device = this.device;
    this.write(device, p, req.uploads ?? [], data);
    device.pushErrorScope('validation');
    const enc = device.createCommandEncoder();
    if (p.steps.length) {
      const pass = enc.beginComputePass();
      for (const s of p.steps) {
        pass.setPipeline(s.pipeline);
        pass.setBindGroup(0, s.group);
        pass.dispatchWorkgroups(...s.workgroups);
      }
      pass.end();
    }
    for (const [o, stage] of p.staging) {
      enc.copyBufferToBuffer(p.buffers.get(o)!, 0, stage, 0, p.sizes.get(o)!);
    }
    device.queue.submit([enc.finish()]);
    const err = await device.popErrorScope();
    if (err) {
      throw new ExecutorError('run', err.message);
    }
    const names: string[] = [];
    const out: ArrayBuffer[] = [];
    for (const [o, stage] of p.staging) {
      await stage.mapAsync(MapMode.READ);
      try {
        out.push(stage.getMappedRange().slice(0));
      } finally {
        stage.unmap();
      }
      names.push(o);
    }
    return { names, data: out };
  }

  free(program: string): void {
    const p = this.programs.get(program);
    if (p) {
      destroy(p);
      this.programs.delete(program);
    }
  }

  dispose(): void {
    for (const id of [...this.programs.keys()]) {
      this.free(id);
    }
  }
}

function destroy(p: Loaded): void {
  for (const b of p.buffers.values()) {
    b.destroy();
  }
  for (const b of p.staging.values()) {
    b.destroy();
  }
}
