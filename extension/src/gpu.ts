// The slice of the WebGPU API the executor uses, typed here (not @webgpu/types) so that unit
// tests can hand in a small fake GPU. Flag values are the WebGPU spec's constants.

export const BufferUsage = { MAP_READ: 0x0001, COPY_SRC: 0x0004, COPY_DST: 0x0008, STORAGE: 0x0080 };
export const MapMode = { READ: 0x0001 };

// limits forwarded to requestDevice (the defaults are lower than most adapters allow)
export const LIMITS = [
  'maxStorageBuffersPerShaderStage',
  'maxBufferSize',
  'maxStorageBufferBindingSize',
  'maxComputeWorkgroupStorageSize',
  'maxComputeInvocationsPerWorkgroup'
] as const;

export interface GpuBuffer {
  mapAsync(mode: number): Promise<void>;
  getMappedRange(): ArrayBuffer;
  unmap(): void;
  destroy(): void;
}

export interface GpuPipeline {
  getBindGroupLayout(index: number): unknown;
}

export interface GpuPass {
  setPipeline(p: GpuPipeline): void;
  setBindGroup(index: number, group: unknown): void;
  dispatchWorkgroups(x: number, y: number, z: number): void;
  end(): void;
}

export interface GpuEncoder {
  beginComputePass(): GpuPass;
  copyBufferToBuffer(src: GpuBuffer, so: number, dst: GpuBuffer, d: number, n: number): void;
  finish(): unknown;
}

export interface GpuError {
  message: string;
}

export interface GpuDevice {
  createBuffer(desc: { size: number; usage: number }): GpuBuffer;
  createShaderModule(desc: { code: string }): unknown;
  createComputePipeline(desc: {
    layout: 'auto';
    compute: { module: unknown; entryPoint: string };
  }): GpuPipeline;
  createBindGroup(desc: { layout: unknown; entries: unknown[] }): unknown;
  createCommandEncoder(): GpuEncoder;
  pushErrorScope(filter: 'validation' | 'out-of-memory' | 'internal'): void;
  popErrorScope(): Promise<GpuError | null>;
  queue: {
    writeBuffer(buf: GpuBuffer, offset: number, data: ArrayBufferView): void;
    submit(cmds: unknown[]): void;
    onSubmittedWorkDone?(): Promise<void>;
  };
  lost?: Promise<{ message: string }>;
  destroy?(): void;
}

export interface GpuAdapter {
  features: Iterable<string>;
  limits: Record<string, number>;
  info?: { vendor?: string; architecture?: string; device?: string; description?: string };
  requestDevice(desc: {
    requiredFeatures: string[];
    requiredLimits: Record<string, number>;
  }): Promise<GpuDevice>;
}

export interface Gpu {
  requestAdapter(): Promise<GpuAdapter | null>;
  /** The WGSL language extensions the browser has (``packed_4x8_integer_dot_product``, ...). */
  wgslLanguageFeatures?: { has(name: string): boolean };
}

/** The feature the kernel's AdapterInfo gets where the browser's WGSL has dot4I8Packed: the
 * int8 kernels then take the packed-dot dialect (rlx_core/targets/webgpu/wgsl.py PACKED_DOT). */
export const PACKED_DOT = 'wgsl-packed-4x8-integer-dot-product';
