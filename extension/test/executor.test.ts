import { describe, expect, it } from 'vitest';

import { WebGpuExecutor } from '../src/executor';
import { fakeGpu, f32 } from './fakegpu';

// c = a + b, d = c * 2: two kernels, bindings in reads-then-writes order
const ADD = 'add // c = a + b';
const DBL = 'dbl';
const kernels = {
  [ADD]: ([a, b, c]: Float32Array[]) => a.forEach((x, i) => (c[i] = x + b[i])),
  [DBL]: ([c, d]: Float32Array[]) => c.forEach((x, i) => (d[i] = 2 * x))
};
const plan = {
  graph: 'g',
  buffers: [
    { name: 'a', nbytes: 16, role: 'input' },
    { name: 'b', nbytes: 16, role: 'param' },
    { name: 'c', nbytes: 16, role: 'output' },
    { name: 'd', nbytes: 16, role: 'output' }
  ],
  kernels: [
    { name: 'k0', source: ADD, bindings: ['a', 'b', 'c'], workgroups: [1, 1, 1] as [number, number, number] },
    { name: 'k1', source: DBL, bindings: ['c', 'd'], workgroups: [2, 1, 1] as [number, number, number] }
  ],
  outputs: ['c', 'd']
};
const floats = (b: ArrayBuffer) => [...new Float32Array(b)];

describe('WebGpuExecutor', () => {
  it('answers hello with the adapter and the limits it opened the device with', async () => {
    const gpu = fakeGpu(kernels, ['shader-f16', 'timestamp-query']);
    const ex = new WebGpuExecutor(gpu);
    const ans = await ex.handle({ rlx: 1, id: 'r1', op: 'hello' });
    expect(ans!.reply.ok).toBe(true);
    expect(ans!.reply.adapter!.name).toBe('google swiftshader');
    expect(ans!.reply.adapter!.limits.maxStorageBuffersPerShaderStage).toBe(10);
    expect(ans!.reply.adapter!.features).toEqual(['shader-f16', 'timestamp-query']);
    expect(gpu.requested[0]).toMatchObject({ requiredFeatures: ['shader-f16'] });
  });

  it('reports the packed int8 dot product where the WGSL has it, so int8 kernels use it', async () => {
    const packed = await new WebGpuExecutor(fakeGpu(kernels, ['shader-f16'], ['packed_4x8_integer_dot_product'])).handle({ rlx: 1, id: 'r1', op: 'hello' });
    expect(packed!.reply.adapter!.features).toEqual(['shader-f16', 'wgsl-packed-4x8-integer-dot-product']);
    const plain = await new WebGpuExecutor(fakeGpu(kernels, ['shader-f16'], ['pointer_composite_access'])).handle({ rlx: 1, id: 'r1', op: 'hello' });
    expect(plain!.reply.adapter!.features).toEqual(['shader-f16']);
  });

  it('loads a plan and runs it: outputs equal the oracle, params uploaded once', async () => {
    const gpu = fakeGpu(kernels);
    const ex = new WebGpuExecutor(gpu);
    await ex.handle({ rlx: 1, id: 'r1', op: 'hello' });
    const load = await ex.handle({ rlx: 1, id: 'r2', op: 'load', program: 'p1', plan, uploads: ['b'] }, [f32(10, 20, 30, 40)]);
    expect(load!.reply).toMatchObject({ ok: true, id: 'r2' });
    for (const a of [
      [1, 2, 3, 4],
      [-1, 0.5, 7, 9]
    ]) {
      const run = await ex.handle({ rlx: 1, id: 'r3', op: 'run', program: 'p1', uploads: ['a'] }, [new DataView(f32(...a).buffer)]);
      expect(run!.reply.outputs).toEqual(['c', 'd']);
      const c = a.map((x, i) => x + [10, 20, 30, 40][i]);
      expect(floats(run!.buffers[0])).toEqual(c);
      expect(floats(run!.buffers[1])).toEqual(c.map(x => 2 * x));
    }
    expect(gpu.device!.dispatches).toEqual([
      [1, 1, 1],
      [2, 1, 1],
      [1, 1, 1],
      [2, 1, 1]
    ]);
    expect(gpu.device!.submits).toBe(2); // one submission per run
  });

  it('shares one pipeline between kernels that differ only in comments', async () => {
    const gpu = fakeGpu({ ...kernels, 'add // other names': kernels[ADD] });
    const ex = new WebGpuExecutor(gpu);
    const p2 = { ...plan, kernels: [plan.kernels[0], { ...plan.kernels[0], name: 'k2', source: 'add // other names' }] };
    await ex.handle({ rlx: 1, id: 'r1', op: 'load', program: 'p1', plan: p2, uploads: [] });
    expect(gpu.device!.modules).toBe(1);
  });

  it('reports a rejected shader as kind "shader" and keeps no program', async () => {
    const ex = new WebGpuExecutor(fakeGpu(kernels));
    const bad = { ...plan, kernels: [{ ...plan.kernels[0], source: 'nonsense' }] };
    const ans = await ex.handle({ rlx: 1, id: 'r1', op: 'load', program: 'p1', plan: bad, uploads: [] });
    expect(ans!.reply).toMatchObject({ ok: false, kind: 'shader' });
    expect(ans!.reply.error).toContain('unknown shader');
    expect(ex.programCount).toBe(0);
  });

  it('says no-gpu without navigator.gpu, unknown-program for a run before load', async () => {
    const none = await new WebGpuExecutor(undefined).handle({ rlx: 1, id: 'r1', op: 'hello' });
    expect(none!.reply).toMatchObject({ ok: false, kind: 'no-gpu' });
    const ex = new WebGpuExecutor(fakeGpu(kernels));
    await ex.handle({ rlx: 1, id: 'r1', op: 'hello' });
    const run = await ex.handle({ rlx: 1, id: 'r2', op: 'run', program: 'p9', uploads: [] });
    expect(run!.reply).toMatchObject({ ok: false, kind: 'unknown-program' });
  });

  it('rejects oversized uploads and version skew as protocol errors', async () => {
    const ex = new WebGpuExecutor(fakeGpu(kernels));
    await ex.handle({ rlx: 1, id: 'r1', op: 'load', program: 'p1', plan, uploads: [] });
    const big = await ex.handle({ rlx: 1, id: 'r2', op: 'run', program: 'p1', uploads: ['a'] }, [f32(1, 2, 3, 4, 5)]);
    expect(big!.reply).toMatchObject({ ok: false, kind: 'protocol' });
    const skew = await ex.handle({ rlx: 2, id: 'r3', op: 'hello' });
    expect(skew!.reply).toMatchObject({ ok: false, kind: 'protocol' });
  });

  it('free destroys the buffers and takes no reply', async () => {
    const gpu = fakeGpu(kernels);
    const ex = new WebGpuExecutor(gpu);
    await ex.handle({ rlx: 1, id: 'r1', op: 'load', program: 'p1', plan, uploads: [] });
    expect(await ex.handle({ rlx: 1, op: 'free', program: 'p1' })).toBeNull();
    expect(ex.programCount).toBe(0);
    expect(gpu.device!.buffers.every(b => b.destroyed)).toBe(true);
  });
});
