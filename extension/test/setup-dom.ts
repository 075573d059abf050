// jsdom lacks DragEvent, which @lumino/dragdrop extends at import time.
if (typeof globalThis.DragEvent === 'undefined' && typeof globalThis.MouseEvent !== 'undefined') {
  (globalThis as Record<string, unknown>).DragEvent = class extends MouseEvent {};
}
