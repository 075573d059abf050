"""WebGPU's splatting kernels (WGSL): splat_project and splat_rasterize, in f32.

``splat_project`` is one invocation per Gaussian (the oracle's equations with WGSL matrices).
``splat_rasterize`` is six dispatches in one compute pass, with scratch buffers of its own::

    zero      tile counts := 0
    count     per Gaussian: atomicAdd 1 to every tile its 3-sigma box touches
    scan      one invocation: tile offsets (exclusive prefix sum), the entry total, overflow
    fill      per Gaussian: atomicAdd a slot in each of its tiles, write its index there
    sort      one workgroup per tile: bitonic sort of the tile's entries by (depth, index)
              in place (all-ascending form, so a length that is no power of two pads with
              virtual +inf that never moves), storageBarrier between stages
    composite one workgroup per tile, one invocation per pixel: chunks of 256 Gaussians
              staged in workgroup memory, front-to-back compositing with the early stop

The per-tile sort makes the atomics' arbitrary fill order irrelevant: the result is the
oracle's order. The entry buffer holds ``capacity`` (tile, Gaussian) pairs, 16 per Gaussian
and at least 2^16; a scene that needs more (very large Gaussians) renders NaN, which the
runtime cannot miss. The VJPs have no WGSL kernels yet: on webgpu they fail with RLX-S020.
"""

from __future__ import annotations

from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Kernel, TensorType
from rlx_core.targets.gpu_common.kernels import WG, GpuKernel, _grid

OPS: tuple[str, ...] = ("splat_project", "splat_rasterize")
DTYPES: tuple[str, ...] = ("f32",)
TILE = 16

_SH = """
fn rlx_sh(d: vec3f) -> array<f32, 16> {
  let x = d.x; let y = d.y; let z = d.z;
  let xx = x * x; let yy = y * y; let zz = z * z;
  return array<f32, 16>(0.28209479177387814, -0.4886025119029199 * y, 0.4886025119029199 * z,
    -0.4886025119029199 * x, 1.0925484305920792 * x * y, -1.0925484305920792 * y * z,
    0.31539156525252005 * (2.0 * zz - xx - yy), -1.0925484305920792 * x * z,
    0.5462742152960396 * (xx - yy), -0.5900435899266435 * y * (3.0 * xx - yy),
    2.890611442640554 * x * y * z, -0.4570457994644658 * y * (4.0 * zz - xx - yy),
    0.3731763325901154 * z * (2.0 * zz - 3.0 * xx - 3.0 * yy),
    -0.4570457994644658 * x * (4.0 * zz - xx - yy), 1.445305721320277 * z * (xx - yy),
    -0.5900435899266435 * x * (xx - 3.0 * yy));
}
"""


def _binds(names: list[tuple[str, str]]) -> str:
    return "\n".join(f"@group(0) @binding({i}) var<storage, read_write> {n}: {t};"
                     for i, (n, t) in enumerate(names)) + "\n"


def _flat(grid: tuple[int, int, int]) -> str:
    return f"let i = gid.x + gid.y * {grid[0] * WG}u;"


def _main(wg: int = WG) -> str:
    return (f"@compute @workgroup_size({wg}, 1, 1)\n"
            "fn main(@builtin(global_invocation_id) gid: vec3<u32>, "
            "@builtin(workgroup_id) wid: vec3<u32>,\n"
            "        @builtin(local_invocation_index) lid: u32) {\n")


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


def project_source(n: int, k: int, w: int, h: int, grid: tuple[int, int, int]) -> str:
    b = _binds([("means", "array<f32>"), ("quats", "array<f32>"), ("scales", "array<f32>"),
                ("opac", "array<f32>"), ("sh", "array<f32>"), ("view", "array<f32>"),
                ("intr", "array<f32>"), ("outp", "array<f32>")])
    return b + _SH + _main() + f"""  {_flat(grid)}
  if (i >= {n}u) {{ return; }}
  for (var c = 0u; c < 11u; c = c + 1u) {{ outp[11u * i + c] = 0.0; }}
  let R = mat3x3f(vec3f(view[0], view[4], view[8]), vec3f(view[1], view[5], view[9]),
                  vec3f(view[2], view[6], view[10]));
  let t = vec3f(view[3], view[7], view[11]);
  let m = vec3f(means[3u * i], means[3u * i + 1u], means[3u * i + 2u]);
  let pc = R * m + t;
  let x = pc.x; let y = pc.y; let z = pc.z;
  if (!(z > 0.01)) {{ return; }}
  let q = vec4f(quats[4u * i], quats[4u * i + 1u], quats[4u * i + 2u], quats[4u * i + 3u]);
  let ql = length(q);
  let qn = q / select(1.0, ql, ql > 0.0);
  let qw = qn.x; let a = qn.y; let b = qn.z; let e = qn.w;
  let Rq = mat3x3f(vec3f(1.0 - 2.0 * (b * b + e * e), 2.0 * (a * b + qw * e), 2.0 * (a * e - qw * b)),
                   vec3f(2.0 * (a * b - qw * e), 1.0 - 2.0 * (a * a + e * e), 2.0 * (b * e + qw * a)),
                   vec3f(2.0 * (a * e + qw * b), 2.0 * (b * e - qw * a), 1.0 - 2.0 * (a * a + b * b)));
  let s = vec3f(scales[3u * i], scales[3u * i + 1u], scales[3u * i + 2u]);
  let M = mat3x3f(Rq[0] * s.x, Rq[1] * s.y, Rq[2] * s.z);
  let Sc = R * (M * transpose(M)) * transpose(R);
  let fx = intr[0]; let fy = intr[4]; let cx = intr[2]; let cy = intr[5];
  let J = mat3x2f(vec2f(fx / z, 0.0), vec2f(0.0, fy / z), vec2f(-fx * x / (z * z), -fy * y / (z * z)));
  let S2 = J * Sc * transpose(J);
  let A = S2[0][0] + 0.3; let B = S2[1][0]; let C = S2[1][1] + 0.3;
  let det = A * C - B * B;
  if (!(det > 0.0)) {{ return; }}
  let mid = 0.5 * (A + C);
  let radius = ceil(3.0 * sqrt(mid + sqrt(max(0.1, mid * mid - det))));
  let u = fx * x / z + cx; let v = fy * y / z + cy;
  if (!(radius > 0.0) || !(u + radius > 0.0) || !(u - radius < {w}.0) || !(v + radius > 0.0)
      || !(v - radius < {h}.0)) {{ return; }}
  let dir = m + transpose(R) * t;
  let dl = length(dir);
  let basis = rlx_sh(dir / select(1.0, dl, dl > 0.0));
  var col = vec3f(0.5);
  for (var j = 0u; j < {k}u; j = j + 1u) {{
    let o = (i * {k}u + j) * 3u;
    col = col + basis[j] * vec3f(sh[o], sh[o + 1u], sh[o + 2u]);
  }}
  col = max(col, vec3f(0.0));
  let r = 11u * i;
  outp[r] = u; outp[r + 1u] = v; outp[r + 2u] = C / det; outp[r + 3u] = -B / det;
  outp[r + 4u] = A / det; outp[r + 5u] = z; outp[r + 6u] = radius; outp[r + 7u] = opac[i];
  outp[r + 8u] = col.x; outp[r + 9u] = col.y; outp[r + 10u] = col.z;
}}
"""


def capacity(n: int, tiles: int) -> int:
    """How many (tile, Gaussian) entries the rasterizer's buffer holds."""
    return max(1, min(n * tiles, max(16 * n, 1 << 16)))


def rasterize_kernels(k: Kernel, n: int, w: int, h: int,
                      bg: tuple[float, float, float]) -> tuple[GpuKernel, ...]:
    rec, out = k.inputs[0], k.outputs[0]
    tw, th = -(-w // TILE), -(-h // TILE)
    tiles = tw * th
    cap = capacity(n, tiles)
    cnt, fill, ent, meta = (f"{k.name}.{s}" for s in ("tile_offsets", "tile_fill", "entries",
                                                       "meta"))
    u32 = dt.u32
    scratch = ((cnt, TensorType(u32, (tiles + 1,))), (fill, TensorType(u32, (tiles,))),
               (ent, TensorType(u32, (cap,))), (meta, TensorType(u32, (2,))))
    per_g = _grid(-(-n // WG))
    per_t = _grid(-(-(tiles + 1) // WG))
    box = _box(w, h)
    zero = _binds([("cnt", "array<u32>"), ("flags", "array<u32>")]) + _main() + f"""  {_flat(per_t)}
  if (i <= {tiles}u) {{ cnt[i] = 0u; }}
  if (i < 2u) {{ flags[i] = 0u; }}
}}
"""
    count = _binds([("rec", "array<f32>"), ("cnt", "array<atomic<u32>>")]) + box + _main() + \
        f"""  {_flat(per_g)}
  if (i >= {n}u || !(rec[11u * i + 6u] > 0.0)) {{ return; }}
  let b = rlx_box(i);
  for (var ty = b.z; ty < b.w; ty = ty + 1u) {{
    for (var tx = b.x; tx < b.y; tx = tx + 1u) {{ atomicAdd(&cnt[ty * {tw}u + tx + 1u], 1u); }}
  }}
}}
"""
    scan = _binds([("cnt", "array<u32>"), ("fill", "array<u32>"), ("flags", "array<u32>")]) + \
        _main(1) + f"""  var acc = 0u;
  for (var t = 0u; t < {tiles}u; t = t + 1u) {{
    acc = acc + cnt[t + 1u];
    fill[t] = cnt[t];
    cnt[t + 1u] = acc;
  }}
  flags[0] = acc;
  flags[1] = select(0u, 1u, acc > {cap}u);
}}
"""
    fill_src = _binds([("rec", "array<f32>"), ("fill", "array<atomic<u32>>"),
                       ("ent", "array<u32>")]) + box + _main() + f"""  {_flat(per_g)}
  if (i >= {n}u || !(rec[11u * i + 6u] > 0.0)) {{ return; }}
  let b = rlx_box(i);
  for (var ty = b.z; ty < b.w; ty = ty + 1u) {{
    for (var tx = b.x; tx < b.y; tx = tx + 1u) {{
      let pos = atomicAdd(&fill[ty * {tw}u + tx], 1u);
      if (pos < {cap}u) {{ ent[pos] = i; }}
    }}
  }}
}}
"""
    sort = _binds([("rec", "array<f32>"), ("cnt", "array<u32>"), ("ent", "array<u32>")]) + \
        """var<workgroup> wlen: u32;
var<workgroup> wlo: u32;
fn rlx_less(a: u32, b: u32) -> bool {
  let da = rec[11u * a + 5u]; let db = rec[11u * b + 5u];
  return da < db || (da == db && a < b);
}
""" + _main() + f"""  let t = wid.x;
  if (lid == 0u) {{
    let lo = min(cnt[t], {cap}u);
    wlo = lo;
    wlen = min(cnt[t + 1u], {cap}u) - lo;
  }}
  let n = workgroupUniformLoad(&wlen);
  let lo = workgroupUniformLoad(&wlo);
  var p = 1u;
  while (p < n) {{ p = p * 2u; }}
  for (var size = 2u; size <= p; size = size * 2u) {{
    for (var j = size / 2u; j > 0u; j = j / 2u) {{
      for (var a = lid; a < p / 2u; a = a + {WG}u) {{
        // pair a: the lower index i of a compare; the first step of each merge flips
        let i = (a / j) * 2u * j + a % j;
        var l = i ^ j;
        if (j == size / 2u) {{ l = i ^ (size - 1u); }}
        let lo_i = min(i, l); let hi_i = max(i, l);
        if (hi_i < n) {{
          let x = ent[lo + lo_i]; let y = ent[lo + hi_i];
          if (rlx_less(y, x)) {{ ent[lo + lo_i] = y; ent[lo + hi_i] = x; }}
        }}
      }}
      storageBarrier();
    }}
  }}
}}
"""
    comp = _binds([("rec", "array<f32>"), ("cnt", "array<u32>"), ("ent", "array<u32>"),
                   ("flags", "array<u32>"), ("img", "array<f32>")]) + f"""var<workgroup> wlen: u32;
var<workgroup> wlo: u32;
var<workgroup> stage: array<array<f32, 9>, {WG}>;
""" + _main() + f"""  let t = wid.x;
  let px = (t % {tw}u) * {TILE}u + lid % {TILE}u;
  let py = (t / {tw}u) * {TILE}u + lid / {TILE}u;
  if (lid == 0u) {{
    let lo = min(cnt[t], {cap}u);
    wlo = lo;
    wlen = min(cnt[t + 1u], {cap}u) - lo;
  }}
  let n = workgroupUniformLoad(&wlen);
  let lo = workgroupUniformLoad(&wlo);
  let fx = f32(px) + 0.5; let fy = f32(py) + 0.5;
  var T = 1.0;
  var C = vec3f(0.0);
  var done = px >= {w}u || py >= {h}u;
  for (var s = 0u; s < n; s = s + {WG}u) {{
    if (s + lid < n) {{
      let g = 11u * ent[lo + s + lid];
      stage[lid] = array<f32, 9>(rec[g], rec[g + 1u], rec[g + 2u], rec[g + 3u], rec[g + 4u],
                                 rec[g + 7u], rec[g + 8u], rec[g + 9u], rec[g + 10u]);
    }}
    workgroupBarrier();
    let m = min({WG}u, n - s);
    for (var j = 0u; j < m && !done; j = j + 1u) {{
      let r = stage[j];
      let dx = r[0] - fx; let dy = r[1] - fy;
      let sg = 0.5 * (r[2] * dx * dx + r[4] * dy * dy) + r[3] * dx * dy;
      if (sg < 0.0) {{ continue; }}
      let a = min(0.99, r[5] * exp(-sg));
      if (a < 1.0 / 255.0) {{ continue; }}
      let nT = T * (1.0 - a);
      if (nT <= 1e-4) {{ done = true; break; }}
      C = C + a * T * vec3f(r[6], r[7], r[8]);
      T = nT;
    }}
    workgroupBarrier();
  }}
  if (px < {w}u && py < {h}u) {{
    var o = C + T * vec3f({bg[0]!r}, {bg[1]!r}, {bg[2]!r});
    if (flags[1] != 0u) {{ o = vec3f(bitcast<f32>(0x7fc00000u)); }}
    let p = 3u * (py * {w}u + px);
    img[p] = o.x; img[p + 1u] = o.y; img[p + 2u] = o.z;
  }}
}}
"""
    name = k.name
    return (
        GpuKernel(f"{name}.zero", "splat", zero, (), (cnt, meta), per_t, scratch=scratch),
        GpuKernel(f"{name}.count", "splat", count, (rec,), (cnt,), per_g),
        GpuKernel(f"{name}.scan", "splat", scan, (), (cnt, fill, meta), (1, 1, 1), local=(1, 1, 1)),
        GpuKernel(f"{name}.fill", "splat", fill_src, (rec,), (fill, ent), per_g),
        GpuKernel(f"{name}.sort", "splat", sort, (rec, cnt), (ent,), (tiles, 1, 1)),
        GpuKernel(f"{name}.composite", "splat", comp, (rec, cnt, ent, meta), (out,),
                  (tiles, 1, 1)),
    )


def render_splat(k: Kernel, types: dict[str, TensorType]) -> tuple[GpuKernel, ...]:
    """The dispatches of one kernel holding a splatting op."""
    node = k.nodes[0]
    w, h = int(node.attr("width")), int(node.attr("height"))
    n = types[node.inputs[0]].shape[0]
    if node.op == "splat_project":
        kk = types[node.inputs[4]].shape[1]
        grid = _grid(-(-n // WG))
        src = project_source(n, kk, w, h, grid)
        return (GpuKernel(k.name, "splat", src, tuple(node.inputs), (node.name,), grid),)
    bg = tuple(float(c) for c in node.attr("background"))
    return rasterize_kernels(k, n, w, h, bg)  # type: ignore[arg-type]
