// A stand-in for the anywidget model, so the explorer's one ESM viewer renders a saved bundle
// (the same shim the HTML export uses): get / set / on / off / save_changes over plain values.

export type Handler = () => void;

export interface ViewerModel {
  get(key: string): unknown;
  set(key: string, value: unknown): void;
  on(event: string, f: Handler): void;
  off(event: string, f: Handler): void;
  save_changes(): void;
}

export function staticModel(values: Record<string, unknown>): ViewerModel {
  const state = { ...values };
  const handlers: Record<string, Handler[]> = {};
  return {
    get: key => state[key],
    set: (key, value) => {
      state[key] = value;
      for (const f of handlers['change:' + key] ?? []) {
        f();
      }
    },
    on: (event, f) => {
      (handlers[event] ??= []).push(f);
    },
    off: (event, f) => {
      handlers[event] = (handlers[event] ?? []).filter(g => g !== f);
    },
    save_changes: () => undefined
  };
}

/** What the viewer ESM exports (``export default { render }``). */
export interface Viewer {
  render(args: { model: ViewerModel; el: HTMLElement }): (() => void) | void;
}

/** The saved output's data: the explorer bundle, as an object or its JSON text. */
export function bundleText(data: unknown): string {
  if (typeof data === 'string') {
    JSON.parse(data); // throws on a corrupt saved output: shown as an error, not a blank view
    return data;
  }
  if (!data || typeof data !== 'object') {
    throw new Error('the output holds no RLX Explorer bundle');
  }
  return JSON.stringify(data);
}
