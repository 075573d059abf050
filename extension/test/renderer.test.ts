// @vitest-environment jsdom
import { describe, expect, it, vi } from 'vitest';

import { staticModel, Viewer, ViewerModel } from '../src/model';
import { MIME_TYPE, rendererFactory } from '../src/renderer';
import { attachComm } from '../src/comm';
import { WebGpuExecutor } from '../src/executor';
import { fakeGpu, f32 } from './fakegpu';

function fakeViewer(): Viewer & { calls: { model: ViewerModel; el: HTMLElement }[]; cleaned: number } {
  const v = {
    calls: [] as { model: ViewerModel; el: HTMLElement }[],
    cleaned: 0,
    render(args: { model: ViewerModel; el: HTMLElement }) {
      v.calls.push(args);
      const data = JSON.parse(args.model.get('data') as string);
      const title = document.createElement('b');
      title.textContent = 'RLX Explorer · ' + data.title; // textContent: names never become markup
      args.el.appendChild(title);
      return () => {
        v.cleaned++;
      };
    }
  };
  return v;
}

const mimeModel = (data: unknown) => ({ data: { [MIME_TYPE]: data }, metadata: {}, trusted: true, setData: () => undefined }) as never;

describe('TraceRenderer', () => {
  it('mounts the shared viewer on the saved bundle with a static model', async () => {
    const viewer = fakeViewer();
    const factory = rendererFactory({ viewer: async () => viewer, vizSource: async () => 'VIZ' });
    expect(factory.mimeTypes).toEqual([MIME_TYPE]);
    const r = factory.createRenderer({ mimeType: MIME_TYPE } as never) as never as {
      renderModel(m: unknown): Promise<void>;
      node: HTMLElement;
      dispose(): void;
    };
    await r.renderModel(mimeModel({ title: '<img src=x onerror=alert(1)>', schema: 1 }));
    expect(viewer.calls).toHaveLength(1);
    const m = viewer.calls[0].model;
    expect(m.get('live')).toBe(false);
    expect(m.get('viz_src')).toBe('VIZ');
    expect(JSON.parse(m.get('data') as string).schema).toBe(1);
    expect(r.node.querySelector('img')).toBeNull();
    expect(r.node.textContent).toContain('<img src=x');
    await r.renderModel(mimeModel(JSON.stringify({ title: 'again' }))); // JSON text works too
    expect(viewer.cleaned).toBe(1); // the previous view was cleaned up
    r.dispose();
    expect(viewer.cleaned).toBe(2);
  });

  it('says so when the output is corrupt instead of rendering nothing', async () => {
    const viewer = fakeViewer();
    const r = rendererFactory({ viewer: async () => viewer, vizSource: async () => '' }).createRenderer({
      mimeType: MIME_TYPE
    } as never) as never as { renderModel(m: unknown): Promise<void>; node: HTMLElement };
    await r.renderModel(mimeModel('{not json'));
    expect(r.node.textContent).toContain('cannot read this output');
    expect(viewer.calls).toHaveLength(0);
  });
});

describe('staticModel', () => {
  it('notifies change handlers and stops after off', () => {
    const m = staticModel({ policy: '' });
    let n = 0;
    const f = () => n++;
    m.on('change:policy', f);
    m.set('policy', 'force-common');
    m.off('change:policy', f);
    m.set('policy', 'force-native');
    expect(n).toBe(1);
    expect(m.get('policy')).toBe('force-native');
  });
});

describe('attachComm', () => {
  it('answers each comm message on the same comm, with the output buffers', async () => {
    const sent: [unknown, unknown, unknown][] = [];
    const comm = { commId: 'c1', send: (d: unknown, m: unknown, b: unknown) => sent.push([d, m, b]), onMsg: null as never, onClose: null as never };
    const kernels = { k: ([a, b]: Float32Array[]) => a.forEach((x, i) => (b[i] = -x)) };
    attachComm(comm as never, new WebGpuExecutor(fakeGpu(kernels)));
    const plan = {
      graph: 'g',
      buffers: [
        { name: 'x', nbytes: 8, role: 'input' },
        { name: 'y', nbytes: 8, role: 'output' }
      ],
      kernels: [{ name: 'k', source: 'k', bindings: ['x', 'y'], workgroups: [1, 1, 1] }],
      outputs: ['y']
    };
    const msg = (data: unknown, buffers: unknown[] = []) => ({ content: { comm_id: 'c1', data }, buffers }) as never;
    (comm as never as { onMsg(m: unknown): void }).onMsg(msg({ rlx: 1, id: 'r1', op: 'load', program: 'p', plan, uploads: [] }));
    (comm as never as { onMsg(m: unknown): void }).onMsg(msg({ rlx: 1, id: 'r2', op: 'run', program: 'p', uploads: ['x'] }, [f32(1.5, -2)]));
    await vi.waitFor(() => expect(sent).toHaveLength(2));
    expect(sent.map(s => (s[0] as { id: string }).id)).toEqual(['r1', 'r2']);
    expect([...new Float32Array((sent[1][2] as ArrayBuffer[])[0])]).toEqual([-1.5, 2]);
  });
});

describe('attachComm over a subshell', () => {
  it('holds replies until the comm subshell exists, without blocking the message handler', async () => {
    let started!: () => void;
    const sent: unknown[] = [];
    const comm = {
      commId: 'c2',
      subshellStarted: new Promise<void>(r => (started = r)),
      send: (d: unknown) => sent.push(d),
      onMsg: null as never,
      onClose: null as never
    };
    attachComm(comm as never, new WebGpuExecutor(fakeGpu({})), async () => true);
    const ret = (comm as never as { onMsg(m: unknown): unknown }).onMsg({ content: { data: { rlx: 1, id: 'r1', op: 'hello' } }, buffers: [] });
    expect(ret).toBeUndefined(); // JupyterLab awaits this: it must not wait for the subshell
    await new Promise(r => setTimeout(r, 20));
    expect(sent).toHaveLength(0);
    started();
    await vi.waitFor(() => expect(sent).toHaveLength(1));
    expect(sent[0]).toMatchObject({ id: 'r1', ok: true });
  });
});
