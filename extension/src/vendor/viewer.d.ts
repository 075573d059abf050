// Declarations of the vendored viewer ESM (lib/vendor/viewer.js, written by vendor-viewer.mjs).
declare const viewer: { render(args: { model: unknown; el: HTMLElement }): (() => void) | void };
export default viewer;
