"""An 8-bit RGB PNG from nested lists or an array, with the standard library alone (zlib): the
splat view widget and the JupyterLite splat demo (Pyodide: no numpy, no imaging package) use it.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any


def encode_png(rgb: Any) -> bytes:
    """An 8-bit RGB PNG of a (height, width, 3) float image in [0, 1] (values are clipped)."""
    h, w = len(rgb), len(rgb[0])
    rows = bytearray()
    for row in rgb:
        rows.append(0)  # filter: none
        for px in row:
            rows.extend(int(round(min(1.0, max(0.0, float(c))) * 255)) for c in px[:3])

    def chunk(tag: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + tag + data
                + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(bytes(rows), 6)) + chunk(b"IEND", b""))
