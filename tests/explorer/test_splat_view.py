"""The orbitable splat view's Python side: angles in, a valid PNG of the rendered image out."""

from __future__ import annotations

import base64
import struct
import zlib

import numpy as np
import pytest

pytest.importorskip("anywidget")

from rlx_explorer.splat_view import SplatView, encode_png  # noqa: E402


def _decode(png: bytes) -> np.ndarray:
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, size = 8, b"", None
    while pos < len(png):
        n = struct.unpack(">I", png[pos:pos + 4])[0]
        tag, data = png[pos + 4:pos + 8], png[pos + 8:pos + 8 + n]
        assert struct.unpack(">I", png[pos + 8 + n:pos + 12 + n])[0] == zlib.crc32(tag + data)
        if tag == b"IHDR":
            size = struct.unpack(">II", data[:8])
        elif tag == b"IDAT":
            idat += data
        pos += 12 + n
    w, h = size
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(h, 3 * w + 1)
    assert (raw[:, 0] == 0).all()
    return raw[:, 1:].reshape(h, w, 3)


def test_png_round_trips_clipped_pixels() -> None:
    img = np.zeros((3, 5, 3))
    img[1, 2] = (1.0, 0.5, -1.0)
    img[2, 4] = (2.0, 0.0, 0.25)
    got = _decode(encode_png(img))
    assert got.shape == (3, 5, 3)
    assert tuple(got[1, 2]) == (255, 128, 0) and tuple(got[2, 4]) == (255, 0, 64)


def test_view_renders_again_when_the_angles_change() -> None:
    seen: list[tuple[float, float]] = []

    def render(az: float, el: float) -> np.ndarray:
        seen.append((az, el))
        return np.full((4, 6, 3), (az % 360) / 360.0)

    v = SplatView(render, azimuth=90.0, elevation=10.0)
    assert v.renders == 1 and seen[-1] == (90.0, 10.0)
    v.azimuth = 180.0
    assert v.renders == 2 and seen[-1] == (180.0, 10.0)
    px = _decode(base64.b64decode(v.png))
    assert px.shape == (4, 6, 3) and (px == 128).all()
