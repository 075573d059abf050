import { describe, expect, it } from 'vitest';

import { asBytes, ExecutorError, parseRequest } from '../src/protocol';

const plan = {
  graph: 'g',
  buffers: [{ name: 'a', nbytes: 8, role: 'input' }],
  kernels: [{ name: 'k', source: 's', bindings: ['a'], workgroups: [1, 1, 1] }],
  outputs: ['a']
};

describe('parseRequest', () => {
  it('accepts the messages of the protocol', () => {
    expect(parseRequest({ rlx: 1, id: 'r1', op: 'hello' }).op).toBe('hello');
    expect(parseRequest({ rlx: 1, id: 'r2', op: 'load', program: 'p', plan, uploads: [] }).plan).toBe(plan);
  });

  it.each([
    [{ rlx: 1, op: 'explode' }, 'unknown op'],
    [{ rlx: 1, op: 'run' }, 'without a program'],
    [{ rlx: 1, op: 'run', program: 'p', uploads: [3] }, 'list of buffer names'],
    [{ rlx: 1, op: 'load', program: 'p' }, 'without a plan'],
    [{ rlx: 1, op: 'load', program: 'p', plan: { ...plan, outputs: ['zz'] } }, 'output zz'],
    [{ rlx: 1, op: 'load', program: 'p', plan: { ...plan, buffers: [{ name: 'a', nbytes: 6 }] } }, 'bad buffer'],
    [{ rlx: 1, op: 'load', program: 'p', plan: { ...plan, kernels: [{ ...plan.kernels[0], bindings: ['q'] }] } }, 'unknown buffer q'],
    [{ rlx: 1, op: 'load', program: 'p', plan: { ...plan, kernels: [{ ...plan.kernels[0], workgroups: [1, 1] }] } }, 'bad kernel'],
    [null, 'unsupported']
  ])('rejects %j', (msg, text) => {
    expect(() => parseRequest(msg)).toThrowError(ExecutorError);
    expect(() => parseRequest(msg)).toThrowError(text);
  });
});

describe('asBytes', () => {
  it('views ArrayBuffers and views without copying the wrong range', () => {
    const buf = new Uint8Array([1, 2, 3, 4, 5, 6]).buffer;
    expect([...asBytes(buf)]).toEqual([1, 2, 3, 4, 5, 6]);
    expect([...asBytes(new DataView(buf, 2, 3))]).toEqual([3, 4, 5]);
  });
});
