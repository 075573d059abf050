"""WGSL of splat_project and splat_project_vjp: one invocation per Gaussian, the oracle's
equations with WGSL matrices (column-major: ``m[c][r]`` is row r of column c), in f32."""

from __future__ import annotations

from rlx_core.targets.gpu_common.kernels import WG
from rlx_core.targets.webgpu.wgsl import storage_bindings

SH = """
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
fn rlx_sh_grad(d: vec3f) -> array<vec3f, 16> {
  let x = d.x; let y = d.y; let z = d.z;
  let xx = x * x; let yy = y * y; let zz = z * z;
  let C1 = 0.4886025119029199;
  let c20 = 1.0925484305920792; let c21 = -1.0925484305920792; let c22 = 0.31539156525252005;
  let c23 = -1.0925484305920792; let c24 = 0.5462742152960396;
  let c30 = -0.5900435899266435; let c31 = 2.890611442640554; let c32 = -0.4570457994644658;
  let c33 = 0.3731763325901154; let c34 = -0.4570457994644658; let c35 = 1.445305721320277;
  let c36 = -0.5900435899266435;
  return array<vec3f, 16>(vec3f(0.0), vec3f(0.0, -C1, 0.0), vec3f(0.0, 0.0, C1),
    vec3f(-C1, 0.0, 0.0), vec3f(c20 * y, c20 * x, 0.0), vec3f(0.0, c21 * z, c21 * y),
    vec3f(-2.0 * c22 * x, -2.0 * c22 * y, 4.0 * c22 * z), vec3f(c23 * z, 0.0, c23 * x),
    vec3f(2.0 * c24 * x, -2.0 * c24 * y, 0.0),
    vec3f(6.0 * c30 * x * y, c30 * (3.0 * xx - 3.0 * yy), 0.0),
    vec3f(c31 * y * z, c31 * x * z, c31 * x * y),
    vec3f(-2.0 * c32 * x * y, c32 * (4.0 * zz - xx - 3.0 * yy), 8.0 * c32 * y * z),
    vec3f(-6.0 * c33 * x * z, -6.0 * c33 * y * z, c33 * (6.0 * zz - 3.0 * xx - 3.0 * yy)),
    vec3f(c34 * (4.0 * zz - 3.0 * xx - yy), -2.0 * c34 * x * y, 8.0 * c34 * x * z),
    vec3f(2.0 * c35 * x * z, -2.0 * c35 * y * z, c35 * (xx - yy)),
    vec3f(c36 * (3.0 * xx - 3.0 * yy), -6.0 * c36 * x * y, 0.0));
}
"""

GEO = """
struct Geo {
  valid: bool, pc: vec3f, qn: vec4f, ql: f32, Rq: mat3x3f, M: mat3x3f, Sc: mat3x3f,
  J: mat3x2f, conic: vec3f, u: f32, v: f32, radius: f32, dn: vec3f, dl: f32, col: vec3f,
  R: mat3x3f,
}
fn rlx_geo(i: u32) -> Geo {
  var g: Geo;
  g.valid = false;
  g.R = mat3x3f(vec3f(view[0], view[4], view[8]), vec3f(view[1], view[5], view[9]),
                vec3f(view[2], view[6], view[10]));
  let t = vec3f(view[3], view[7], view[11]);
  let m = vec3f(means[3u * i], means[3u * i + 1u], means[3u * i + 2u]);
  g.pc = g.R * m + t;
  let x = g.pc.x; let y = g.pc.y; let z = g.pc.z;
  if (!(z > 0.01)) { return g; }
  let q = vec4f(quats[4u * i], quats[4u * i + 1u], quats[4u * i + 2u], quats[4u * i + 3u]);
  g.ql = length(q);
  g.qn = q / select(1.0, g.ql, g.ql > 0.0);
  let qw = g.qn.x; let a = g.qn.y; let b = g.qn.z; let e = g.qn.w;
  g.Rq = mat3x3f(vec3f(1.0 - 2.0 * (b * b + e * e), 2.0 * (a * b + qw * e), 2.0 * (a * e - qw * b)),
                 vec3f(2.0 * (a * b - qw * e), 1.0 - 2.0 * (a * a + e * e), 2.0 * (b * e + qw * a)),
                 vec3f(2.0 * (a * e + qw * b), 2.0 * (b * e - qw * a), 1.0 - 2.0 * (a * a + b * b)));
  let s = vec3f(scales[3u * i], scales[3u * i + 1u], scales[3u * i + 2u]);
  g.M = mat3x3f(g.Rq[0] * s.x, g.Rq[1] * s.y, g.Rq[2] * s.z);
  g.Sc = g.R * (g.M * transpose(g.M)) * transpose(g.R);
  let fx = intr[0]; let fy = intr[4]; let cx = intr[2]; let cy = intr[5];
  g.J = mat3x2f(vec2f(fx / z, 0.0), vec2f(0.0, fy / z), vec2f(-fx * x / (z * z), -fy * y / (z * z)));
  let S2 = g.J * g.Sc * transpose(g.J);
  let A = S2[0][0] + 0.3; let B = S2[1][0]; let C = S2[1][1] + 0.3;
  let det = A * C - B * B;
  if (!(det > 0.0)) { return g; }
  let mid = 0.5 * (A + C);
  g.radius = ceil(3.0 * sqrt(mid + sqrt(max(0.1, mid * mid - det))));
  g.u = fx * x / z + cx; g.v = fy * y / z + cy;
  if (!(g.radius > 0.0) || !(g.u + g.radius > 0.0) || !(g.u - g.radius < WIDTH)
      || !(g.v + g.radius > 0.0) || !(g.v - g.radius < HEIGHT)) { return g; }
  g.conic = vec3f(C / det, -B / det, A / det);
  let dir = m + transpose(g.R) * t;
  g.dl = length(dir);
  g.dn = dir / select(1.0, g.dl, g.dl > 0.0);
  let basis = rlx_sh(g.dn);
  var col = vec3f(0.5);
  for (var j = 0u; j < SHK; j = j + 1u) {
    let o = (i * SHK + j) * 3u;
    col = col + basis[j] * vec3f(sh[o], sh[o + 1u], sh[o + 2u]);
  }
  g.col = col;
  g.valid = true;
  return g;
}
"""


def main(wg: int = WG) -> str:
    return (f"@compute @workgroup_size({wg}, 1, 1)\n"
            "fn main(@builtin(global_invocation_id) gid: vec3<u32>, "
            "@builtin(workgroup_id) wid: vec3<u32>,\n"
            "        @builtin(local_invocation_index) lid: u32) {\n")


def flat(grid: tuple[int, int, int]) -> str:
    return f"let i = gid.x + gid.y * {grid[0] * WG}u;"


def _consts(n: int, k: int, w: int, h: int) -> str:
    return (f"const NG: u32 = {n}u;\nconst SHK: u32 = {k}u;\nconst WIDTH: f32 = {w}.0;\n"
            f"const HEIGHT: f32 = {h}.0;\n")


_F32 = "array<f32>"


def project_source(n: int, k: int, w: int, h: int, grid: tuple[int, int, int]) -> str:
    b = storage_bindings([("means", _F32), ("quats", _F32), ("scales", _F32), ("opac", _F32),
               ("sh", _F32), ("view", _F32), ("intr", _F32), ("outp", _F32)])
    return b + _consts(n, k, w, h) + SH + GEO + main() + f"""  {flat(grid)}
  if (i >= NG) {{ return; }}
  for (var c = 0u; c < 11u; c = c + 1u) {{ outp[11u * i + c] = 0.0; }}
  let g = rlx_geo(i);
  if (!g.valid) {{ return; }}
  let col = max(g.col, vec3f(0.0));
  let r = 11u * i;
  outp[r] = g.u; outp[r + 1u] = g.v; outp[r + 2u] = g.conic.x; outp[r + 3u] = g.conic.y;
  outp[r + 4u] = g.conic.z; outp[r + 5u] = g.pc.z; outp[r + 6u] = g.radius;
  outp[r + 7u] = opac[i]; outp[r + 8u] = col.x; outp[r + 9u] = col.y; outp[r + 10u] = col.z;
}}
"""


def project_vjp_source(n: int, k: int, w: int, h: int, grid: tuple[int, int, int]) -> str:
    """The opacities are not bound (their gradient is the cotangent's column): 8 buffers."""
    b = storage_bindings([("means", _F32), ("quats", _F32), ("scales", _F32), ("sh", _F32),
               ("view", _F32), ("intr", _F32), ("grad", _F32), ("outp", _F32)])
    cols = 11 + 3 * k
    return b + _consts(n, k, w, h) + SH + GEO + main() + f"""  {flat(grid)}
  if (i >= NG) {{ return; }}
  for (var c = 0u; c < {cols}u; c = c + 1u) {{ outp[{cols}u * i + c] = 0.0; }}
  let g = rlx_geo(i);
  if (!g.valid) {{ return; }}
  let o = {cols}u * i;
  let gi = 11u * i;
  let gcol = select(vec3f(0.0), vec3f(grad[gi + 8u], grad[gi + 9u], grad[gi + 10u]),
                    g.col > vec3f(0.0));
  let basis = rlx_sh(g.dn);
  let bgr = rlx_sh_grad(g.dn);
  var g_dn = vec3f(0.0);
  for (var j = 0u; j < SHK; j = j + 1u) {{
    let s3 = (i * SHK + j) * 3u;
    let shj = vec3f(sh[s3], sh[s3 + 1u], sh[s3 + 2u]);
    outp[o + 11u + 3u * j] = basis[j] * gcol.x;
    outp[o + 12u + 3u * j] = basis[j] * gcol.y;
    outp[o + 13u + 3u * j] = basis[j] * gcol.z;
    g_dn = g_dn + dot(gcol, shj) * bgr[j];
  }}
  g_dn = g_dn - g.dn * dot(g.dn, g_dn);
  var g_means = g_dn / select(1.0, g.dl, g.dl > 0.0);
  let inv = mat2x2f(vec2f(g.conic.x, g.conic.y), vec2f(g.conic.y, g.conic.z));
  let G = mat2x2f(vec2f(grad[gi + 2u], 0.5 * grad[gi + 3u]), vec2f(0.5 * grad[gi + 3u], grad[gi + 4u]));
  let gs2 = -1.0 * (inv * G * inv);
  let gsc = transpose(g.J) * gs2 * g.J;
  let gJ = 2.0 * (gs2 * g.J * g.Sc);
  let gsig = transpose(g.R) * gsc * g.R;
  let gM = 2.0 * (gsig * g.M);
  let s = vec3f(scales[3u * i], scales[3u * i + 1u], scales[3u * i + 2u]);
  outp[o + 7u] = dot(gM[0], g.Rq[0]);
  outp[o + 8u] = dot(gM[1], g.Rq[1]);
  outp[o + 9u] = dot(gM[2], g.Rq[2]);
  let d = mat3x3f(gM[0] * s.x, gM[1] * s.y, gM[2] * s.z);  // d[c][r]: d loss / d Rq(r, c)
  let qw = g.qn.x; let x = g.qn.y; let y = g.qn.z; let z = g.qn.w;
  let gqn = 2.0 * vec4f(
    -z * d[1][0] + y * d[2][0] + z * d[0][1] - x * d[2][1] - y * d[0][2] + x * d[1][2],
    y * d[1][0] + z * d[2][0] + y * d[0][1] - 2.0 * x * d[1][1] - qw * d[2][1] + z * d[0][2]
      + qw * d[1][2] - 2.0 * x * d[2][2],
    -2.0 * y * d[0][0] + x * d[1][0] + qw * d[2][0] + x * d[0][1] + z * d[2][1] - qw * d[0][2]
      + z * d[1][2] - 2.0 * y * d[2][2],
    -2.0 * z * d[0][0] - qw * d[1][0] + x * d[2][0] + qw * d[0][1] - 2.0 * z * d[1][1]
      + y * d[2][1] + x * d[0][2] + y * d[1][2]);
  let gq = (gqn - g.qn * dot(g.qn, gqn)) / select(1.0, g.ql, g.ql > 0.0);
  outp[o + 3u] = gq.x; outp[o + 4u] = gq.y; outp[o + 5u] = gq.z; outp[o + 6u] = gq.w;
  let px = g.pc.x; let py = g.pc.y; let pz = g.pc.z;
  let fx = intr[0]; let fy = intr[4];
  let gu = grad[gi]; let gv = grad[gi + 1u];
  let z2 = pz * pz; let z3 = z2 * pz;
  let gpc = vec3f(fx / pz * gu - fx / z2 * gJ[2][0], fy / pz * gv - fy / z2 * gJ[2][1],
                  -fx * px / z2 * gu - fy * py / z2 * gv + grad[gi + 5u] - fx / z2 * gJ[0][0]
                  + 2.0 * fx * px / z3 * gJ[2][0] - fy / z2 * gJ[1][1]
                  + 2.0 * fy * py / z3 * gJ[2][1]);
  g_means = g_means + transpose(g.R) * gpc;
  outp[o] = g_means.x; outp[o + 1u] = g_means.y; outp[o + 2u] = g_means.z;
  outp[o + 10u] = grad[gi + 7u];
}}
"""
