"""WGSL of splat_rasterize and splat_rasterize_vjp: tile binning with a per-tile bitonic sort,
then per-pixel compositing (forward) or back-to-front gradients reduced per tile (VJP).

Both run the same five binning dispatches (zero, count, scan, fill, sort; see splat.py). The
VJP then runs, per tile (one workgroup, one invocation per pixel), the forward again for each
pixel's T_final and last Gaussian, walks the tile's list back to front (T_i = T_{i+1} /
(1 - alpha_i), the colour behind accumulated), sums each Gaussian's nine gradients over the
tile's pixels with a two-level workgroup reduction (two barriers per Gaussian) and writes them at the Gaussian's slot in the
tile list; a last dispatch, one invocation per Gaussian, finds its slot in every tile it
touches (binary search by (depth, index)) and adds them up. No float atomics are needed, and
the sums come out in a fixed order.
"""

from __future__ import annotations

from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Kernel, TensorType
from rlx_core.splat.errors import tile_entries_overflow
from rlx_core.targets.gpu_common.kernels import WG, GpuKernel, Guard, _grid
from rlx_core.targets.webgpu.splat_project import flat, main
from rlx_core.targets.webgpu.wgsl import storage_bindings

TILE = 16
RG = 16  # partial sums per gradient in the VJP's two-level tile reduction (divides WG)
_F32, _U32 = "array<f32>", "array<u32>"


def capacity(n: int, tiles: int, want: int = 0) -> int:
    """How many (tile, Gaussian) entries the rasterizer's buffer holds: ``want`` (the op's
    ``tile_entries``) when set, else 16 per Gaussian and at least 2^16 (never more than all
    pairs). A scene that needs more sets the overflow flag, and the call raises RLX-S021."""
    if want > 0:
        return want
    return max(1, min(n * tiles, max(16 * n, 1 << 16)))


def _box(w: int, h: int) -> str:
    """WGSL: the tile box (x0, x1, y0, y1) of record r (at rec[11 r])."""
    tw, th = -(-w // TILE), -(-h // TILE)
    return f"""
fn rlx_box(r: u32) -> vec4<u32> {{
  let u = rec[11u * r]; let v = rec[11u * r + 1u]; let rad = rec[11u * r + 6u];
  let lo = vec4f(floor((u - rad) / {TILE}.0), ceil((u + rad) / {TILE}.0),
                 floor((v - rad) / {TILE}.0), ceil((v + rad) / {TILE}.0));
  let hi = vec4f({tw}.0, {tw}.0, {th}.0, {th}.0);
  return vec4<u32>(clamp(lo, vec4f(0.0), hi));
}}
"""


_LESS = """
fn rlx_less(a: u32, b: u32) -> bool {
  let da = rec[11u * a + 5u]; let db = rec[11u * b + 5u];
  return da < db || (da == db && a < b);
}
"""

# the nine values compositing reads, and one Gaussian's alpha at a pixel (0: skipped)
_ALPHA = """
fn rlx_rec9(g: u32) -> array<f32, 9> {
  let o = 11u * g;
  return array<f32, 9>(rec[o], rec[o + 1u], rec[o + 2u], rec[o + 3u], rec[o + 4u],
                       rec[o + 7u], rec[o + 8u], rec[o + 9u], rec[o + 10u]);
}
fn rlx_alpha(r: array<f32, 9>, fx: f32, fy: f32) -> vec2f {
  let dx = r[0] - fx; let dy = r[1] - fy;
  let sg = 0.5 * (r[2] * dx * dx + r[4] * dy * dy) + r[3] * dx * dy;
  let a = min(0.99, r[5] * exp(-sg));
  return vec2f(select(0.0, a, sg >= 0.0 && a >= 1.0 / 255.0), sg);
}
"""

# a tile's slice of the entry list, read once by invocation 0 and made uniform
_SEGMENT = """  if (lid == 0u) {
    let lo0 = min(cnt[t], CAP);
    wlo = lo0;
    wlen = min(cnt[t + 1u], CAP) - lo0;
  }
  let n = workgroupUniformLoad(&wlen);
  let lo = workgroupUniformLoad(&wlo);
"""


class _Bins:
    """The binning dispatches of one kernel and the names of their scratch buffers."""

    def __init__(self, k: Kernel, n: int, w: int, h: int) -> None:
        self.n, self.w, self.h = n, w, h
        self.tw, self.th = -(-w // TILE), -(-h // TILE)
        self.tiles = self.tw * self.th
        node = k.nodes[0]
        self.cap = cap = capacity(n, self.tiles, int(node.attr("tile_entries", 0)))

        def check(words: tuple[int, ...]) -> None:  # flags: the entry total, overflowed
            if words[1]:
                raise tile_entries_overflow(node.op, cap, words[0])

        self.guard = Guard(f"{k.name}.flags", 2, check)
        self.rec = k.inputs[0]
        self.cnt, self.fill, self.ent, self.flags = (
            f"{k.name}.{s}" for s in ("tile_offsets", "tile_fill", "entries", "flags"))
        self.scratch: list[tuple[str, TensorType]] = [
            (self.cnt, TensorType(dt.u32, (self.tiles + 1,))),
            (self.fill, TensorType(dt.u32, (self.tiles,))),
            (self.ent, TensorType(dt.u32, (self.cap,))), (self.flags, TensorType(dt.u32, (2,)))]
        self.consts = (f"const CAP: u32 = {self.cap}u;\nconst TW: u32 = {self.tw}u;\n"
                       f"const NG: u32 = {n}u;\n")

    def kernels(self, name: str) -> list[GpuKernel]:
        tiles, tw, cap = self.tiles, self.tw, self.cap
        per_g, per_t = _grid(-(-self.n // WG)), _grid(-(-(tiles + 1) // WG))
        box = _box(self.w, self.h)
        zero = storage_bindings([("cnt", _U32), ("flags", _U32)]) + main() + f"""  {flat(per_t)}
  if (i <= {tiles}u) {{ cnt[i] = 0u; }}
  if (i < 2u) {{ flags[i] = 0u; }}
}}
"""
        count = storage_bindings([("rec", _F32), ("cnt", "array<atomic<u32>>")]) + box + \
            main() + f"""  {flat(per_g)}
  if (i >= {self.n}u || !(rec[11u * i + 6u] > 0.0)) {{ return; }}
  let b = rlx_box(i);
  for (var ty = b.z; ty < b.w; ty = ty + 1u) {{
    for (var tx = b.x; tx < b.y; tx = tx + 1u) {{ atomicAdd(&cnt[ty * {tw}u + tx + 1u], 1u); }}
  }}
}}
"""
        scan = storage_bindings([("cnt", _U32), ("fill", _U32), ("flags", _U32)]) + \
            main(1) + f"""  var acc = 0u;
  for (var t = 0u; t < {tiles}u; t = t + 1u) {{
    acc = acc + cnt[t + 1u];
    fill[t] = cnt[t];
    cnt[t + 1u] = acc;
  }}
  flags[0] = acc;
  flags[1] = select(0u, 1u, acc > {cap}u);
}}
"""
        fill = storage_bindings([("rec", _F32), ("fill", "array<atomic<u32>>"),
                                 ("ent", _U32)]) + box + \
            main() + f"""  {flat(per_g)}
  if (i >= {self.n}u || !(rec[11u * i + 6u] > 0.0)) {{ return; }}
  let b = rlx_box(i);
  for (var ty = b.z; ty < b.w; ty = ty + 1u) {{
    for (var tx = b.x; tx < b.y; tx = tx + 1u) {{
      let pos = atomicAdd(&fill[ty * {tw}u + tx], 1u);
      if (pos < {cap}u) {{ ent[pos] = i; }}
    }}
  }}
}}
"""
        sort = storage_bindings([("rec", _F32), ("cnt", _U32), ("ent", _U32)]) + self.consts + \
            "var<workgroup> wlen: u32;\nvar<workgroup> wlo: u32;\n" + _LESS + main() + \
            "  let t = wid.x;\n" + _SEGMENT + f"""  var p = 1u;
  while (p < n) {{ p = p * 2u; }}
  for (var size = 2u; size <= p; size = size * 2u) {{
    for (var j = size / 2u; j > 0u; j = j / 2u) {{
      for (var a = lid; a < p / 2u; a = a + {WG}u) {{
        // pair a: the lower index i of a compare; the first step of each merge flips
        let i = (a / j) * 2u * j + a % j;
        var l = i ^ j;
        if (j == size / 2u) {{ l = i ^ (size - 1u); }}
        if (l < n) {{
          let x = ent[lo + i]; let y = ent[lo + l];
          if (rlx_less(y, x)) {{ ent[lo + i] = y; ent[lo + l] = x; }}
        }}
      }}
      storageBarrier();
    }}
  }}
}}
"""
        return [
            GpuKernel(f"{name}.zero", "splat", zero, (), (self.cnt, self.flags), per_t,
                      scratch=tuple(self.scratch), guard=self.guard),
            GpuKernel(f"{name}.count", "splat", count, (self.rec,), (self.cnt,), per_g),
            GpuKernel(f"{name}.scan", "splat", scan, (), (self.cnt, self.fill, self.flags),
                      (1, 1, 1), local=(1, 1, 1)),
            GpuKernel(f"{name}.fill", "splat", fill, (self.rec,), (self.fill, self.ent), per_g),
            GpuKernel(f"{name}.sort", "splat", sort, (self.rec, self.cnt), (self.ent,),
                      (tiles, 1, 1)),
        ]

    def pixel(self) -> str:
        """WGSL: this invocation's pixel in tile t, its centre and whether it is in the image."""
        return f"""  let t = wid.x;
  let px = (t % TW) * {TILE}u + lid % {TILE}u;
  let py = (t / TW) * {TILE}u + lid / {TILE}u;
  let inside = px < {self.w}u && py < {self.h}u;
  let fx = f32(px) + 0.5; let fy = f32(py) + 0.5;
"""


def rasterize_kernels(k: Kernel, n: int, w: int, h: int,
                      bg: tuple[float, float, float]) -> tuple[GpuKernel, ...]:
    b = _Bins(k, n, w, h)
    comp = storage_bindings([("rec", _F32), ("cnt", _U32), ("ent", _U32), ("flags", _U32),
                   ("img", _F32)]) + b.consts + f"""var<workgroup> wlen: u32;
var<workgroup> wlo: u32;
var<workgroup> stage: array<array<f32, 9>, {WG}>;
""" + _ALPHA + main() + b.pixel() + _SEGMENT + f"""  var T = 1.0;
  var C = vec3f(0.0);
  var done = !inside;
  for (var s = 0u; s < n; s = s + {WG}u) {{
    if (s + lid < n) {{ stage[lid] = rlx_rec9(ent[lo + s + lid]); }}
    workgroupBarrier();
    let m = min({WG}u, n - s);
    for (var j = 0u; j < m && !done; j = j + 1u) {{
      let r = stage[j];
      let a = rlx_alpha(r, fx, fy).x;
      if (a == 0.0) {{ continue; }}
      let nT = T * (1.0 - a);
      if (nT <= 1e-4) {{ done = true; break; }}
      C = C + a * T * vec3f(r[6], r[7], r[8]);
      T = nT;
    }}
    workgroupBarrier();
  }}
  if (inside) {{
    var o = C + T * vec3f({bg[0]!r}, {bg[1]!r}, {bg[2]!r});
    // NaN from a runtime value: Tint (Chrome) rejects a constant NaN, naga does not
    if (flags[1] != 0u) {{ o = vec3f(bitcast<f32>(0x7fc00000u | flags[1])); }}
    let p = 3u * (py * {w}u + px);
    img[p] = o.x; img[p + 1u] = o.y; img[p + 2u] = o.z;
  }}
}}
"""
    return (*b.kernels(k.name),
            GpuKernel(f"{k.name}.composite", "splat", comp, (b.rec, b.cnt, b.ent, b.flags),
                      (k.outputs[0],), (b.tiles, 1, 1)))


def rasterize_vjp_kernels(k: Kernel, n: int, w: int, h: int,
                          bg: tuple[float, float, float]) -> tuple[GpuKernel, ...]:
    b = _Bins(k, n, w, h)
    gimg = k.inputs[1]
    part = f"{k.name}.partials"
    b.scratch.append((part, TensorType(dt.f32, (9 * b.cap,))))
    back = storage_bindings([("rec", _F32), ("cnt", _U32), ("ent", _U32), ("gimg", _F32),
                  ("part", _F32)]) + b.consts + f"""var<workgroup> wlen: u32;
var<workgroup> wlo: u32;
var<workgroup> wlast: atomic<u32>;
var<workgroup> wmax: u32;
var<workgroup> red: array<array<f32, 9>, {WG}>;
var<workgroup> red2: array<f32, {9 * RG}>;
""" + _ALPHA + main() + b.pixel() + _SEGMENT + f"""  if (lid == 0u) {{ atomicStore(&wlast, 0u); }}
  workgroupBarrier();
  // the forward again: T_final and the list position after the last Gaussian added
  var T = 1.0;
  var last = 0u;
  if (inside) {{
    for (var j = 0u; j < n; j = j + 1u) {{
      let a = rlx_alpha(rlx_rec9(ent[lo + j]), fx, fy).x;
      if (a == 0.0) {{ continue; }}
      let nT = T * (1.0 - a);
      if (nT <= 1e-4) {{ break; }}
      T = nT;
      last = j + 1u;
    }}
  }}
  atomicMax(&wlast, last);
  workgroupBarrier();
  if (lid == 0u) {{ wmax = atomicLoad(&wlast); }}
  let m = workgroupUniformLoad(&wmax);
  let bgc = vec3f({bg[0]!r}, {bg[1]!r}, {bg[2]!r});
  var S = T * bgc;
  var gp = vec3f(0.0);
  if (inside) {{
    let p = 3u * (py * {w}u + px);
    gp = vec3f(gimg[p], gimg[p + 1u], gimg[p + 2u]);
  }}
  for (var jj = 0u; jj < m; jj = jj + 1u) {{
    let j = m - 1u - jj;
    let r = rlx_rec9(ent[lo + j]);
    let al = rlx_alpha(r, fx, fy);
    let a = al.x;
    var c = array<f32, 9>(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    if (inside && a > 0.0 && j < last) {{
      let one = 1.0 - a;
      T = T / one;
      let wgt = a * T;
      let col = vec3f(r[6], r[7], r[8]);
      let ga = dot(gp, T * col - S / one);
      S = S + wgt * col;
      let e = exp(-al.y);
      let clamped = r[5] * e >= 0.99;
      let gs = select(-ga * a, 0.0, clamped);
      let dx = r[0] - fx; let dy = r[1] - fy;
      c = array<f32, 9>(gs * (r[2] * dx + r[3] * dy), gs * (r[4] * dy + r[3] * dx),
                        gs * 0.5 * dx * dx, gs * dx * dy, gs * 0.5 * dy * dy,
                        select(ga * e, 0.0, clamped), wgt * gp.x, wgt * gp.y, wgt * gp.z);
    }}
    // the tile's sum in two levels, two barriers per Gaussian: {RG} sums of {WG // RG} pixels per
    // gradient, then one invocation per gradient adds them (a tree is 8 barriers, and a
    // barrier is what a CPU driver (lavapipe) pays for most). The next Gaussian's writes to
    // red come after the second barrier, by which every read of red is done.
    red[lid] = c;
    workgroupBarrier();
    if (lid < {9 * RG}u) {{
      let q = lid % 9u;
      let g0 = (lid / 9u) * {WG // RG}u;
      var s = 0.0;
      for (var t = 0u; t < {WG // RG}u; t = t + 1u) {{ s = s + red[g0 + t][q]; }}
      red2[lid] = s;
    }}
    workgroupBarrier();
    if (lid < 9u) {{
      var s = 0.0;
      for (var g = 0u; g < {RG}u; g = g + 1u) {{ s = s + red2[9u * g + lid]; }}
      part[9u * (lo + j) + lid] = s;
    }}
  }}
}}
"""
    per_g = _grid(-(-n // WG))
    gather = storage_bindings([("rec", _F32), ("cnt", _U32), ("ent", _U32), ("part", _F32),
                    ("flags", _U32), ("outp", _F32)]) + b.consts + _box(w, h) + _LESS + \
        main() + f"""  {flat(per_g)}
  if (i >= NG) {{ return; }}
  for (var c = 0u; c < 11u; c = c + 1u) {{ outp[11u * i + c] = 0.0; }}
  if (!(rec[11u * i + 6u] > 0.0)) {{ return; }}
  var acc = array<f32, 9>(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
  let bx = rlx_box(i);
  for (var ty = bx.z; ty < bx.w; ty = ty + 1u) {{
    for (var tx = bx.x; tx < bx.y; tx = tx + 1u) {{
      let t = ty * TW + tx;
      var lo = min(cnt[t], CAP);
      var hi = min(cnt[t + 1u], CAP);
      while (lo < hi) {{  // the first slot whose Gaussian is not before i
        let mid = (lo + hi) / 2u;
        if (rlx_less(ent[mid], i)) {{ lo = mid + 1u; }} else {{ hi = mid; }}
      }}
      if (lo < min(cnt[t + 1u], CAP) && ent[lo] == i) {{
        for (var q = 0u; q < 9u; q = q + 1u) {{ acc[q] = acc[q] + part[9u * lo + q]; }}
      }}
    }}
  }}
  let o = 11u * i;
  let nan = bitcast<f32>(0x7fc00000u | flags[1]);  // not a constant: Tint rejects one
  let bad = flags[1] != 0u;
  var cols = array<u32, 9>(0u, 1u, 2u, 3u, 4u, 7u, 8u, 9u, 10u);
  for (var q = 0u; q < 9u; q = q + 1u) {{ outp[o + cols[q]] = select(acc[q], nan, bad); }}
}}
"""
    return (*b.kernels(k.name),
            GpuKernel(f"{k.name}.backward", "splat", back, (b.rec, b.cnt, b.ent, gimg), (part,),
                      (b.tiles, 1, 1)),
            GpuKernel(f"{k.name}.gather", "splat", gather, (b.rec, b.cnt, b.ent, part,
                                                            b.flags), (k.outputs[0],), per_g))
