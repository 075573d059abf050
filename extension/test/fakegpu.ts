// A fake WebGPU whose "shaders" are JS functions looked up by source text: enough to check the
// executor binds buffers in order, uploads, dispatches and reads back exactly what a GPU would.
import type { Gpu, GpuAdapter, GpuBuffer, GpuDevice, GpuPipeline } from '../src/gpu';

export type Kernel = (bindings: Float32Array[], workgroups: [number, number, number]) => void;

export class FakeBuffer implements GpuBuffer {
  bytes: Uint8Array;
  destroyed = false;
  mapped = false;
  constructor(
    size: number,
    readonly usage: number
  ) {
    this.bytes = new Uint8Array(size);
  }
  async mapAsync(): Promise<void> {
    this.mapped = true;
  }
  getMappedRange(): ArrayBuffer {
    return this.bytes.slice().buffer;
  }
  unmap(): void {
    this.mapped = false;
  }
  destroy(): void {
    this.destroyed = true;
  }
}

export class FakeDevice implements GpuDevice {
  buffers: FakeBuffer[] = [];
  dispatches: [number, number, number][] = [];
  submits = 0;
  modules = 0;
  errors: string[] = [];
  private scopes: (string | null)[] = [];
  constructor(readonly kernels: Record<string, Kernel>) {}

  createBuffer(desc: { size: number; usage: number }): FakeBuffer {
    const b = new FakeBuffer(desc.size, desc.usage);
    this.buffers.push(b);
    return b;
  }
  createShaderModule(desc: { code: string }): unknown {
    this.modules++;
    if (!(desc.code in this.kernels)) {
      this.fail(`unknown shader: ${desc.code}`);
    }
    return desc.code;
  }
  createComputePipeline(desc: { compute: { module: unknown } }): GpuPipeline {
    const code = desc.compute.module as string;
    return { getBindGroupLayout: () => code };
  }
  createBindGroup(desc: { layout: unknown; entries: { binding: number; resource: { buffer: FakeBuffer } }[] }) {
    return { code: desc.layout as string, buffers: desc.entries.map(e => e.resource.buffer) };
  }
  createCommandEncoder() {
    const ops: (() => void)[] = [];
    const device = this;
    let pipeline = '';
    let group: { code: string; buffers: FakeBuffer[] } | null = null;
    return {
      beginComputePass: () => ({
        setPipeline: (p: GpuPipeline) => {
          pipeline = p.getBindGroupLayout(0) as string;
        },
        setBindGroup: (_: number, g: unknown) => {
          group = g as { code: string; buffers: FakeBuffer[] };
        },
        dispatchWorkgroups: (x: number, y: number, z: number) => {
          const g = group!;
          const fn = device.kernels[pipeline];
          ops.push(() => {
            device.dispatches.push([x, y, z]);
            fn(g.buffers.map(b => new Float32Array(b.bytes.buffer)), [x, y, z]);
          });
        },
        end: () => undefined
      }),
      copyBufferToBuffer: (src: GpuBuffer, so: number, dst: GpuBuffer, d: number, n: number) => {
        ops.push(() => (dst as FakeBuffer).bytes.set((src as FakeBuffer).bytes.subarray(so, so + n), d));
      },
      finish: () => ops
    };
  }
  pushErrorScope(): void {
    this.scopes.push(null);
  }
  async popErrorScope() {
    const e = this.scopes.pop();
    return e ? { message: e } : null;
  }
  private fail(message: string): void {
    this.errors.push(message);
    if (this.scopes.length) {
      this.scopes[this.scopes.length - 1] = message;
    }
  }
  queue = {
    writeBuffer: (buf: GpuBuffer, offset: number, data: ArrayBufferView) => {
      (buf as FakeBuffer).bytes.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), offset);
    },
    submit: (cmds: unknown[]) => {
      this.submits++;
      for (const ops of cmds as (() => void)[][]) {
        ops.forEach(op => op());
      }
    }
  };
}

export function fakeGpu(kernels: Record<string, Kernel>, features: string[] = [], wgsl: string[] = []): Gpu & { device: FakeDevice | null; requested: unknown[] } {
  const gpu = {
    device: null as FakeDevice | null,
    requested: [] as unknown[],
    wgslLanguageFeatures: new Set(wgsl),
    async requestAdapter(): Promise<GpuAdapter> {
      return {
        features,
        limits: {
          maxStorageBuffersPerShaderStage: 10,
          maxBufferSize: 1 << 28,
          maxStorageBufferBindingSize: 1 << 27,
          maxComputeWorkgroupStorageSize: 16384,
          maxComputeInvocationsPerWorkgroup: 256
        },
        info: { vendor: 'google', architecture: 'swiftshader', description: '' },
        requestDevice: async desc => {
          gpu.requested.push(desc);
          gpu.device = new FakeDevice(kernels);
          return gpu.device;
        }
      };
    }
  };
  return gpu;
}

export const f32 = (...xs: number[]) => new Uint8Array(new Float32Array(xs).buffer);
