"""The C of the CPU's splatting kernels (cpu/splat.py writes the calls), one translation unit
header. The arithmetic is the oracle's (rlx_core/splat/reference.py): projection and its VJP
per Gaussian in double, compositing in float; see cpu/splat.py for the loop structure."""

from rlx_core.targets.cpu.team_runtime import WORK_SYNC_C

SOURCE = WORK_SYNC_C + r"""
#ifndef RLX_SPLAT_H
#define RLX_SPLAT_H
#define RLX_SPLAT_TILE 16
#define RLX_SPLAT_PIX (RLX_SPLAT_TILE * RLX_SPLAT_TILE)

/* ---- spherical harmonics to degree 3 (3DGS's constants) ---- */
static void rlx_splat_sh(double x, double y, double z, int k, double *b, double *g) {
    const double C0 = 0.28209479177387814, C1 = 0.4886025119029199;
    const double c2[5] = {1.0925484305920792, -1.0925484305920792, 0.31539156525252005,
                          -1.0925484305920792, 0.5462742152960396};
    const double c3[7] = {-0.5900435899266435, 2.890611442640554, -0.4570457994644658,
                          0.3731763325901154, -0.4570457994644658, 1.445305721320277,
                          -0.5900435899266435};
    const double xx = x * x, yy = y * y, zz = z * z;
    const double B[16] = {C0, -C1 * y, C1 * z, -C1 * x,
        c2[0] * x * y, c2[1] * y * z, c2[2] * (2 * zz - xx - yy), c2[3] * x * z,
        c2[4] * (xx - yy),
        c3[0] * y * (3 * xx - yy), c3[1] * x * y * z, c3[2] * y * (4 * zz - xx - yy),
        c3[3] * z * (2 * zz - 3 * xx - 3 * yy), c3[4] * x * (4 * zz - xx - yy),
        c3[5] * z * (xx - yy), c3[6] * x * (xx - 3 * yy)};
    for (int j = 0; j < k; ++j) b[j] = B[j];
    if (!g) return;
    const double G[16][3] = {{0, 0, 0}, {0, -C1, 0}, {0, 0, C1}, {-C1, 0, 0},
        {c2[0] * y, c2[0] * x, 0}, {0, c2[1] * z, c2[1] * y},
        {-2 * c2[2] * x, -2 * c2[2] * y, 4 * c2[2] * z}, {c2[3] * z, 0, c2[3] * x},
        {2 * c2[4] * x, -2 * c2[4] * y, 0},
        {6 * c3[0] * x * y, c3[0] * (3 * xx - 3 * yy), 0},
        {c3[1] * y * z, c3[1] * x * z, c3[1] * x * y},
        {-2 * c3[2] * x * y, c3[2] * (4 * zz - xx - 3 * yy), 8 * c3[2] * y * z},
        {-6 * c3[3] * x * z, -6 * c3[3] * y * z, c3[3] * (6 * zz - 3 * xx - 3 * yy)},
        {c3[4] * (4 * zz - 3 * xx - yy), -2 * c3[4] * x * y, 8 * c3[4] * x * z},
        {2 * c3[5] * x * z, -2 * c3[5] * y * z, c3[5] * (xx - yy)},
        {c3[6] * (3 * xx - 3 * yy), -6 * c3[6] * x * y, 0}};
    for (int j = 0; j < k; ++j)
        for (int d = 0; d < 3; ++d) g[3 * j + d] = G[j][d];
}

/* the camera: R, t, its centre and the intrinsics */
typedef struct {
    double R[3][3], t[3], campos[3], fx, fy, cx, cy;
    int64_t width, height;
} rlx_splat_cam;

static void rlx_splat_cam_of(const float *view, const float *intr, int64_t width,
                             int64_t height, rlx_splat_cam *c) {
    for (int r = 0; r < 3; ++r) {
        for (int q = 0; q < 3; ++q) c->R[r][q] = view[4 * r + q];
        c->t[r] = view[4 * r + 3];
    }
    for (int d = 0; d < 3; ++d)
        c->campos[d] = -(c->R[0][d] * c->t[0] + c->R[1][d] * c->t[1] + c->R[2][d] * c->t[2]);
    c->fx = intr[0]; c->fy = intr[4]; c->cx = intr[2]; c->cy = intr[5];
    c->width = width; c->height = height;
}

/* one Gaussian's projection and the intermediates its VJP needs */
typedef struct {
    int valid;
    double pc[3], qn[4], qnorm, Rq[3][3], M[3][3], Sc[3][3], J[2][3], zs;
    double conic[3], u, v, radius, dn[3], dlen, basis[16], col_raw[3];
} rlx_splat_geo;

static void rlx_splat_geo_of(int64_t i, int k, const float *means, const float *quats,
                             const float *scales, const float *sh, const rlx_splat_cam *c,
                             rlx_splat_geo *g) {
    const float *m = means + 3 * i, *q = quats + 4 * i, *s = scales + 3 * i;
    g->valid = 0;
    for (int r = 0; r < 3; ++r)
        g->pc[r] = c->R[r][0] * m[0] + c->R[r][1] * m[1] + c->R[r][2] * m[2] + c->t[r];
    const double x = g->pc[0], y = g->pc[1], z = g->pc[2];
    if (!(z > 0.01)) return;  /* NEAR */
    g->qnorm = sqrt((double)q[0] * q[0] + (double)q[1] * q[1] + (double)q[2] * q[2]
                    + (double)q[3] * q[3]);
    const double qd = g->qnorm > 0 ? g->qnorm : 1.0;
    for (int d = 0; d < 4; ++d) g->qn[d] = q[d] / qd;
    const double w = g->qn[0], a = g->qn[1], b = g->qn[2], e = g->qn[3];
    const double Rq[3][3] = {
        {1 - 2 * (b * b + e * e), 2 * (a * b - w * e), 2 * (a * e + w * b)},
        {2 * (a * b + w * e), 1 - 2 * (a * a + e * e), 2 * (b * e - w * a)},
        {2 * (a * e - w * b), 2 * (b * e + w * a), 1 - 2 * (a * a + b * b)}};
    double sig[3][3], tmp[3][3];
    for (int r = 0; r < 3; ++r)
        for (int q2 = 0; q2 < 3; ++q2) { g->Rq[r][q2] = Rq[r][q2]; g->M[r][q2] = Rq[r][q2] * s[q2]; }
    for (int r = 0; r < 3; ++r)
        for (int q2 = 0; q2 < 3; ++q2)
            sig[r][q2] = g->M[r][0] * g->M[q2][0] + g->M[r][1] * g->M[q2][1]
                         + g->M[r][2] * g->M[q2][2];
    for (int r = 0; r < 3; ++r)  /* tmp = R sig */
        for (int q2 = 0; q2 < 3; ++q2)
            tmp[r][q2] = c->R[r][0] * sig[0][q2] + c->R[r][1] * sig[1][q2] + c->R[r][2] * sig[2][q2];
    for (int r = 0; r < 3; ++r)  /* Sc = tmp R^T */
        for (int q2 = 0; q2 < 3; ++q2)
            g->Sc[r][q2] = tmp[r][0] * c->R[q2][0] + tmp[r][1] * c->R[q2][1] + tmp[r][2] * c->R[q2][2];
    g->zs = z;
    const double J[2][3] = {{c->fx / z, 0, -c->fx * x / (z * z)}, {0, c->fy / z, -c->fy * y / (z * z)}};
    double JS[2][3], S2[2][2];
    for (int r = 0; r < 2; ++r)
        for (int q2 = 0; q2 < 3; ++q2) {
            g->J[r][q2] = J[r][q2];
            JS[r][q2] = J[r][0] * g->Sc[0][q2] + J[r][1] * g->Sc[1][q2] + J[r][2] * g->Sc[2][q2];
        }
    for (int r = 0; r < 2; ++r)
        for (int q2 = 0; q2 < 2; ++q2)
            S2[r][q2] = JS[r][0] * J[q2][0] + JS[r][1] * J[q2][1] + JS[r][2] * J[q2][2];
    const double A = S2[0][0] + 0.3, B = S2[0][1], C = S2[1][1] + 0.3;  /* EPS2D */
    const double det = A * C - B * B;
    if (!(det > 0)) return;
    const double mid = 0.5 * (A + C), disc = mid * mid - det;
    const double lam = mid + sqrt(disc > 0.1 ? disc : 0.1);
    g->radius = ceil(3 * sqrt(lam));
    g->u = c->fx * x / z + c->cx;
    g->v = c->fy * y / z + c->cy;
    if (!(g->radius > 0) || !(g->u + g->radius > 0) || !(g->u - g->radius < c->width)
        || !(g->v + g->radius > 0) || !(g->v - g->radius < c->height)) return;
    g->conic[0] = C / det; g->conic[1] = -B / det; g->conic[2] = A / det;
    double dir[3];
    for (int d = 0; d < 3; ++d) dir[d] = m[d] - c->campos[d];
    g->dlen = sqrt(dir[0] * dir[0] + dir[1] * dir[1] + dir[2] * dir[2]);
    const double dl = g->dlen > 0 ? g->dlen : 1.0;
    for (int d = 0; d < 3; ++d) g->dn[d] = dir[d] / dl;
    rlx_splat_sh(g->dn[0], g->dn[1], g->dn[2], k, g->basis, 0);
    const float *shi = sh + (int64_t)3 * k * i;
    for (int ch = 0; ch < 3; ++ch) {
        double acc = 0.0;
        for (int j = 0; j < k; ++j) acc += g->basis[j] * shi[3 * j + ch];
        g->col_raw[ch] = acc + 0.5;
    }
    g->valid = 1;
}

static void rlx_splat_project(int64_t n, int k, const float *means, const float *quats,
                              const float *scales, const float *opac, const float *sh,
                              const float *view, const float *intr, int64_t width,
                              int64_t height, float *out) {
    rlx_splat_cam c;
    rlx_splat_cam_of(view, intr, width, height, &c);
    for (int64_t i = 0; i < n; ++i) {
        rlx_splat_geo g;
        rlx_splat_geo_of(i, k, means, quats, scales, sh, &c, &g);
        float *o = out + 11 * i;
        if (!g.valid) { for (int j = 0; j < 11; ++j) o[j] = 0.0f; continue; }
        o[0] = (float)g.u; o[1] = (float)g.v;
        o[2] = (float)g.conic[0]; o[3] = (float)g.conic[1]; o[4] = (float)g.conic[2];
        o[5] = (float)g.pc[2]; o[6] = (float)g.radius; o[7] = opac[i];
        for (int ch = 0; ch < 3; ++ch) o[8 + ch] = (float)(g.col_raw[ch] > 0 ? g.col_raw[ch] : 0.0);
    }
}

/* d loss / d unit quaternion from d loss / d rotation */
static void rlx_splat_quat_vjp(const double *q, double d[3][3], double *gq) {
    const double w = q[0], x = q[1], y = q[2], z = q[3];
    gq[0] = 2 * (-z * d[0][1] + y * d[0][2] + z * d[1][0] - x * d[1][2] - y * d[2][0] + x * d[2][1]);
    gq[1] = 2 * (y * d[0][1] + z * d[0][2] + y * d[1][0] - 2 * x * d[1][1] - w * d[1][2]
                 + z * d[2][0] + w * d[2][1] - 2 * x * d[2][2]);
    gq[2] = 2 * (-2 * y * d[0][0] + x * d[0][1] + w * d[0][2] + x * d[1][0] + z * d[1][2]
                 - w * d[2][0] + z * d[2][1] - 2 * y * d[2][2]);
    gq[3] = 2 * (-2 * z * d[0][0] - w * d[0][1] + x * d[0][2] + w * d[1][0] - 2 * z * d[1][1]
                 + y * d[1][2] + x * d[2][0] + y * d[2][1]);
}

static void rlx_splat_project_vjp(int64_t n, int k, const float *means, const float *quats,
                                  const float *scales, const float *opac, const float *sh,
                                  const float *view, const float *intr, const float *grad,
                                  int64_t width, int64_t height, float *out) {
    (void)opac;
    rlx_splat_cam c;
    rlx_splat_cam_of(view, intr, width, height, &c);
    const int64_t cols = 11 + 3 * k;
    for (int64_t i = 0; i < n; ++i) {
        rlx_splat_geo g;
        rlx_splat_geo_of(i, k, means, quats, scales, sh, &c, &g);
        float *o = out + cols * i;
        for (int64_t j = 0; j < cols; ++j) o[j] = 0.0f;
        if (!g.valid) continue;
        const float *gr = grad + 11 * i, *shi = sh + (int64_t)3 * k * i, *s = scales + 3 * i;
        double gcol[3], bg[48], g_dn[3] = {0, 0, 0}, g_means[3];
        for (int ch = 0; ch < 3; ++ch) gcol[ch] = g.col_raw[ch] > 0 ? gr[8 + ch] : 0.0;
        rlx_splat_sh(g.dn[0], g.dn[1], g.dn[2], k, g.basis, bg);
        for (int j = 0; j < k; ++j)
            for (int ch = 0; ch < 3; ++ch) {
                o[11 + 3 * j + ch] = (float)(g.basis[j] * gcol[ch]);
                for (int d = 0; d < 3; ++d) g_dn[d] += gcol[ch] * shi[3 * j + ch] * bg[3 * j + d];
            }
        const double dd = g.dn[0] * g_dn[0] + g.dn[1] * g_dn[1] + g.dn[2] * g_dn[2];
        const double dl = g.dlen > 0 ? g.dlen : 1.0;
        for (int d = 0; d < 3; ++d) g_means[d] = (g_dn[d] - g.dn[d] * dd) / dl;
        /* conic = inverse(Sigma2): dSigma2 = -Inv G Inv, the off-diagonal cotangent halved */
        const double A = g.conic[0], B = g.conic[1], C = g.conic[2];
        const double inv[2][2] = {{A, B}, {B, C}};
        const double G[2][2] = {{gr[2], 0.5 * gr[3]}, {0.5 * gr[3], gr[4]}};
        double t2[2][2], gs2[2][2];
        for (int r = 0; r < 2; ++r)
            for (int q2 = 0; q2 < 2; ++q2) t2[r][q2] = inv[r][0] * G[0][q2] + inv[r][1] * G[1][q2];
        for (int r = 0; r < 2; ++r)
            for (int q2 = 0; q2 < 2; ++q2)
                gs2[r][q2] = -(t2[r][0] * inv[0][q2] + t2[r][1] * inv[1][q2]);
        double gJ_[2][3], gsc[3][3], gsJ[2][3], gsig[3][3], tmp[3][3], gM[3][3];
        for (int r = 0; r < 2; ++r)  /* gsJ = gs2 J */
            for (int q2 = 0; q2 < 3; ++q2) gsJ[r][q2] = gs2[r][0] * g.J[0][q2] + gs2[r][1] * g.J[1][q2];
        for (int r = 0; r < 3; ++r)  /* gsc = J^T gs2 J */
            for (int q2 = 0; q2 < 3; ++q2) gsc[r][q2] = g.J[0][r] * gsJ[0][q2] + g.J[1][r] * gsJ[1][q2];
        for (int r = 0; r < 2; ++r)  /* gJ = 2 gs2 J Sc */
            for (int q2 = 0; q2 < 3; ++q2)
                gJ_[r][q2] = 2 * (gsJ[r][0] * g.Sc[0][q2] + gsJ[r][1] * g.Sc[1][q2]
                                  + gsJ[r][2] * g.Sc[2][q2]);
        for (int r = 0; r < 3; ++r)  /* tmp = R^T gsc */
            for (int q2 = 0; q2 < 3; ++q2)
                tmp[r][q2] = c.R[0][r] * gsc[0][q2] + c.R[1][r] * gsc[1][q2] + c.R[2][r] * gsc[2][q2];
        for (int r = 0; r < 3; ++r)  /* gsig = tmp R */
            for (int q2 = 0; q2 < 3; ++q2)
                gsig[r][q2] = tmp[r][0] * c.R[0][q2] + tmp[r][1] * c.R[1][q2] + tmp[r][2] * c.R[2][q2];
        for (int r = 0; r < 3; ++r)  /* gM = 2 gsig M */
            for (int q2 = 0; q2 < 3; ++q2)
                gM[r][q2] = 2 * (gsig[r][0] * g.M[0][q2] + gsig[r][1] * g.M[1][q2]
                                 + gsig[r][2] * g.M[2][q2]);
        double gRq[3][3], gqn[4];
        for (int q2 = 0; q2 < 3; ++q2) {
            o[7 + q2] = (float)(gM[0][q2] * g.Rq[0][q2] + gM[1][q2] * g.Rq[1][q2]
                                + gM[2][q2] * g.Rq[2][q2]);
            for (int r = 0; r < 3; ++r) gRq[r][q2] = gM[r][q2] * s[q2];
        }
        rlx_splat_quat_vjp(g.qn, gRq, gqn);
        const double qq = g.qn[0] * gqn[0] + g.qn[1] * gqn[1] + g.qn[2] * gqn[2] + g.qn[3] * gqn[3];
        const double qd = g.qnorm > 0 ? g.qnorm : 1.0;
        for (int d = 0; d < 4; ++d) o[3 + d] = (float)((gqn[d] - g.qn[d] * qq) / qd);
        const double x = g.pc[0], y = g.pc[1], z = g.zs, fx = c.fx, fy = c.fy;
        const double gu = gr[0], gv = gr[1];
        double gpc[3];
        gpc[0] = fx / z * gu - fx / (z * z) * gJ_[0][2];
        gpc[1] = fy / z * gv - fy / (z * z) * gJ_[1][2];
        gpc[2] = -fx * x / (z * z) * gu - fy * y / (z * z) * gv + gr[5]
                 - fx / (z * z) * gJ_[0][0] + 2 * fx * x / (z * z * z) * gJ_[0][2]
                 - fy / (z * z) * gJ_[1][1] + 2 * fy * y / (z * z * z) * gJ_[1][2];
        for (int d = 0; d < 3; ++d)
            o[d] = (float)(g_means[d] + gpc[0] * c.R[0][d] + gpc[1] * c.R[1][d] + gpc[2] * c.R[2][d]);
        o[10] = gr[7];
    }
}

/* ---- tile binning: every tile's Gaussians, front to back ---- */
typedef struct { float depth; int32_t id; } rlx_splat_key;

static int rlx_splat_key_cmp(const void *a, const void *b) {
    const rlx_splat_key *x = (const rlx_splat_key *)a, *y = (const rlx_splat_key *)b;
    if (x->depth < y->depth) return -1;
    if (x->depth > y->depth) return 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* the tile box of record r: [x0, x1) x [y0, y1), as the oracle's floor / ceil in double */
static void rlx_splat_box(const float *r, int64_t tw, int64_t th, int64_t *b) {
    const double u = r[0], v = r[1], rad = r[6];
    double lo[4] = {floor((u - rad) / RLX_SPLAT_TILE), ceil((u + rad) / RLX_SPLAT_TILE),
                    floor((v - rad) / RLX_SPLAT_TILE), ceil((v + rad) / RLX_SPLAT_TILE)};
    const double hi[4] = {(double)tw, (double)tw, (double)th, (double)th};
    for (int j = 0; j < 4; ++j) b[j] = (int64_t)(lo[j] < 0 ? 0 : (lo[j] > hi[j] ? hi[j] : lo[j]));
}

/* one global sort by (depth, index), then each Gaussian appended to its tiles in that order:
   every tile's list comes out sorted. *offsets (tiles + 1) and *ids are malloc'd */
static int rlx_splat_bin(int64_t n, const float *rec, int64_t tw, int64_t th,
                         int64_t **offsets, int32_t **ids) {
    const int64_t tiles = tw * th;
    rlx_splat_key *keys = (rlx_splat_key *)malloc(sizeof(rlx_splat_key) * (size_t)(n > 0 ? n : 1));
    int64_t *off = (int64_t *)calloc((size_t)tiles + 1, sizeof(int64_t));
    if (!keys || !off) { free(keys); free(off); return 1; }
    int64_t live = 0;
    for (int64_t i = 0; i < n; ++i) {
        const float *r = rec + 11 * i;
        if (!(r[6] > 0)) continue;
        int64_t b[4];
        rlx_splat_box(r, tw, th, b);
        for (int64_t ty = b[2]; ty < b[3]; ++ty)
            for (int64_t tx = b[0]; tx < b[1]; ++tx) off[ty * tw + tx + 1] += 1;
        keys[live].depth = r[5]; keys[live].id = (int32_t)i; ++live;
    }
    qsort(keys, (size_t)live, sizeof(rlx_splat_key), rlx_splat_key_cmp);
    for (int64_t t = 0; t < tiles; ++t) off[t + 1] += off[t];
    int32_t *list = (int32_t *)malloc(sizeof(int32_t) * (size_t)(off[tiles] > 0 ? off[tiles] : 1));
    int64_t *fill = (int64_t *)malloc(sizeof(int64_t) * (size_t)tiles);
    if (!list || !fill) { free(keys); free(off); free(list); free(fill); return 1; }
    memcpy(fill, off, sizeof(int64_t) * (size_t)tiles);
    for (int64_t s = 0; s < live; ++s) {
        const int32_t i = keys[s].id;
        int64_t b[4];
        rlx_splat_box(rec + 11 * (int64_t)i, tw, th, b);
        for (int64_t ty = b[2]; ty < b[3]; ++ty)
            for (int64_t tx = b[0]; tx < b[1]; ++tx) list[fill[ty * tw + tx]++] = i;
    }
    free(keys); free(fill);
    *offsets = off; *ids = list;
    return 0;
}

/* ---- compositing: one tile, all its pixels at once (the pixel loop is the vector loop) ---- */
typedef struct {
    float px[RLX_SPLAT_PIX], py[RLX_SPLAT_PIX], T[RLX_SPLAT_PIX], C[3][RLX_SPLAT_PIX];
    int32_t last[RLX_SPLAT_PIX];  /* list position after the last Gaussian added */
    int32_t done[RLX_SPLAT_PIX];
} rlx_splat_tile;

/* alpha of Gaussian r at every pixel (0 where skipped: sigma < 0 or alpha < 1/255) */
static inline void rlx_splat_alpha(const float *r, const rlx_splat_tile *s, float *alpha,
                                   float *sigma) {
    const float u = r[0], v = r[1], A = r[2], B = r[3], C = r[4], o = r[7];
    #pragma omp simd
    for (int p = 0; p < RLX_SPLAT_PIX; ++p) {
        const float dx = u - s->px[p], dy = v - s->py[p];
        const float sg = 0.5f * (A * dx * dx + C * dy * dy) + B * dx * dy;
        float a = o * rlx_exp_f(-sg);
        a = a < 0.99f ? a : 0.99f;
        alpha[p] = (sg >= 0.0f && a >= 1.0f / 255.0f) ? a : 0.0f;
        sigma[p] = sg;
    }
}

static void rlx_splat_tile_forward(const float *rec, const int32_t *ids, int64_t cnt,
                                   rlx_splat_tile *s) {
    float alpha[RLX_SPLAT_PIX], sigma[RLX_SPLAT_PIX];
    int32_t left = 0;
    for (int p = 0; p < RLX_SPLAT_PIX; ++p) left += !s->done[p];
    for (int64_t j = 0; j < cnt && left > 0; ++j) {
        const float *r = rec + 11 * (int64_t)ids[j];
        rlx_splat_alpha(r, s, alpha, sigma);
        const float c0 = r[8], c1 = r[9], c2 = r[10];
        int32_t stopped = 0;
        #pragma omp simd reduction(+:stopped)
        for (int p = 0; p < RLX_SPLAT_PIX; ++p) {
            const float a = alpha[p], T = s->T[p], nT = T * (1.0f - a);
            const int live = a > 0.0f && !s->done[p];
            const int stop = live && nT <= 1e-4f;
            const int take = live && !stop;
            const float wgt = take ? a * T : 0.0f;
            s->C[0][p] += wgt * c0; s->C[1][p] += wgt * c1; s->C[2][p] += wgt * c2;
            s->T[p] = take ? nT : T;
            s->last[p] = take ? (int32_t)(j + 1) : s->last[p];
            s->done[p] = s->done[p] | stop;
            stopped += stop;
        }
        left -= stopped;
    }
}

static void rlx_splat_tile_init(rlx_splat_tile *s, int64_t tx, int64_t ty, int64_t width,
                                int64_t height) {
    for (int p = 0; p < RLX_SPLAT_PIX; ++p) {
        const int64_t x = tx * RLX_SPLAT_TILE + p % RLX_SPLAT_TILE;
        const int64_t y = ty * RLX_SPLAT_TILE + p / RLX_SPLAT_TILE;
        s->px[p] = (float)x + 0.5f; s->py[p] = (float)y + 0.5f;
        s->T[p] = 1.0f; s->C[0][p] = s->C[1][p] = s->C[2][p] = 0.0f;
        s->last[p] = 0;
        s->done[p] = (x >= width || y >= height);  /* outside a partial tile: nothing to do */
    }
}

/* the team's shared state of one call (one program call runs at a time): the tile lists
   thread 0 bins, the next tile to claim, per-thread gradient rows, a failure flag */
static int64_t *rlx_splat_off;
static int32_t *rlx_splat_ids;
static float *rlx_splat_part;
static atomic_llong rlx_splat_next;
static atomic_int rlx_splat_failed;

/* every thread of the team enters (a team block; alone, team = 1): thread 0 bins, then the
   threads claim tiles one at a time (a tile's cost varies with its list: no static split),
   each compositing into its own scratch; tiles write disjoint pixels. NaN on a failure */
static void rlx_splat_rasterize(int64_t n, const float *rec, int64_t width, int64_t height,
                                float b0, float b1, float b2, float *out) {
    const int tid = rlx_work_tid(), team = rlx_work_team();
    const int64_t tw = (width + RLX_SPLAT_TILE - 1) / RLX_SPLAT_TILE;
    const int64_t th = (height + RLX_SPLAT_TILE - 1) / RLX_SPLAT_TILE;
    if (tid == 0) {
        atomic_store(&rlx_splat_failed, rlx_splat_bin(n, rec, tw, th, &rlx_splat_off,
                                                      &rlx_splat_ids));
        atomic_store(&rlx_splat_next, 0);
    }
    rlx_work_sync(team);
    rlx_splat_tile *s = atomic_load(&rlx_splat_failed) ? 0
        : (rlx_splat_tile *)malloc(sizeof(rlx_splat_tile));
    if (!s) atomic_store(&rlx_splat_failed, 1);
    for (int64_t t; s && (t = atomic_fetch_add(&rlx_splat_next, 1)) < tw * th;) {
        const int64_t tx = t % tw, ty = t / tw, *off = rlx_splat_off;
        rlx_splat_tile_init(s, tx, ty, width, height);
        rlx_splat_tile_forward(rec, rlx_splat_ids + off[t], off[t + 1] - off[t], s);
        for (int p = 0; p < RLX_SPLAT_PIX; ++p) {
            const int64_t x = tx * RLX_SPLAT_TILE + p % RLX_SPLAT_TILE;
            const int64_t y = ty * RLX_SPLAT_TILE + p / RLX_SPLAT_TILE;
            if (x >= width || y >= height) continue;
            float *o = out + 3 * (y * width + x);
            o[0] = s->C[0][p] + s->T[p] * b0;
            o[1] = s->C[1][p] + s->T[p] * b1;
            o[2] = s->C[2][p] + s->T[p] * b2;
        }
    }
    free(s);
    rlx_work_sync(team);
    if (tid == 0) {
        free(rlx_splat_off); free(rlx_splat_ids);
        rlx_splat_off = 0; rlx_splat_ids = 0;
        if (atomic_load(&rlx_splat_failed))
            for (int64_t i = 0; i < 3 * width * height; ++i) out[i] = __builtin_nanf("");
    }
}

/* backward of one tile: the forward again for T_final and each pixel's last Gaussian, then
   back to front, T_i = T_{i+1} / (1 - alpha_i) and S (what lies behind) accumulated */
static void rlx_splat_tile_backward(const float *rec, const int32_t *ids, int64_t cnt,
                                    rlx_splat_tile *s, const float *gimg, int64_t width,
                                    int64_t height, int64_t tx, int64_t ty, const float *bg,
                                    float *grad) {
    float alpha[RLX_SPLAT_PIX], sigma[RLX_SPLAT_PIX], g[3][RLX_SPLAT_PIX], S[3][RLX_SPLAT_PIX];
    int32_t maxlast = 0;
    for (int p = 0; p < RLX_SPLAT_PIX; ++p) {
        const int64_t x = tx * RLX_SPLAT_TILE + p % RLX_SPLAT_TILE;
        const int64_t y = ty * RLX_SPLAT_TILE + p / RLX_SPLAT_TILE;
        const int in = x < width && y < height;
        for (int ch = 0; ch < 3; ++ch) {
            g[ch][p] = in ? gimg[3 * (y * width + x) + ch] : 0.0f;
            S[ch][p] = s->T[p] * bg[ch];
        }
        maxlast = s->last[p] > maxlast ? s->last[p] : maxlast;
    }
    for (int64_t j = (int64_t)maxlast - 1; j >= 0; --j) {
        const int32_t gi = ids[j];
        const float *r = rec + 11 * (int64_t)gi;
        rlx_splat_alpha(r, s, alpha, sigma);
        const float u = r[0], v = r[1], A = r[2], B = r[3], C = r[4], o = r[7];
        const float c0 = r[8], c1 = r[9], c2 = r[10];
        float du = 0, dv = 0, dA = 0, dB = 0, dC = 0, dO = 0, d0 = 0, d1 = 0, d2 = 0;
        #pragma omp simd reduction(+:du, dv, dA, dB, dC, dO, d0, d1, d2)
        for (int p = 0; p < RLX_SPLAT_PIX; ++p) {
            const float a = alpha[p];
            const int take = a > 0.0f && j < s->last[p];
            const float one = 1.0f - a;
            const float T = take ? s->T[p] / one : s->T[p];
            const float wgt = take ? a * T : 0.0f;
            d0 += wgt * g[0][p]; d1 += wgt * g[1][p]; d2 += wgt * g[2][p];
            const float ga = take ? (g[0][p] * (T * c0 - S[0][p] / one)
                                     + g[1][p] * (T * c1 - S[1][p] / one)
                                     + g[2][p] * (T * c2 - S[2][p] / one)) : 0.0f;
            S[0][p] += wgt * c0; S[1][p] += wgt * c1; S[2][p] += wgt * c2;
            s->T[p] = T;
            const float e = rlx_exp_f(-sigma[p]);
            const int clamped = o * e >= 0.99f;
            const float gs = clamped ? 0.0f : -ga * a;
            dO += clamped ? 0.0f : ga * e;
            const float dx = u - s->px[p], dy = v - s->py[p];
            du += gs * (A * dx + B * dy);
            dv += gs * (C * dy + B * dx);
            dA += gs * 0.5f * dx * dx;
            dB += gs * dx * dy;
            dC += gs * 0.5f * dy * dy;
        }
        float *o_ = grad + 11 * (int64_t)gi;
        o_[0] += du; o_[1] += dv; o_[2] += dA; o_[3] += dB; o_[4] += dC; o_[7] += dO;
        o_[8] += d0; o_[9] += d1; o_[10] += d2;
    }
}

/* as the forward, but tile t goes to thread t % team (a fixed split: each thread adds its
   tiles' gradients in tile order into rows of its own, thread 0's the result, and the rows
   are added in thread order), so the sums do not depend on timing (for a given team size) */
static void rlx_splat_rasterize_vjp(int64_t n, const float *rec, const float *gimg,
                                    int64_t width, int64_t height, float b0, float b1,
                                    float b2, float *grad) {
    const int tid = rlx_work_tid(), team = rlx_work_team();
    const int64_t tw = (width + RLX_SPLAT_TILE - 1) / RLX_SPLAT_TILE;
    const int64_t th = (height + RLX_SPLAT_TILE - 1) / RLX_SPLAT_TILE;
    const int64_t cols = 11 * n, r0 = cols * tid / team, r1 = cols * (tid + 1) / team;
    const float bg[3] = {b0, b1, b2};
    for (int64_t j = r0; j < r1; ++j) grad[j] = 0.0f;
    if (tid == 0) {
        int bad = rlx_splat_bin(n, rec, tw, th, &rlx_splat_off, &rlx_splat_ids);
        rlx_splat_part = team > 1 && !bad
            ? (float *)calloc((size_t)(team - 1) * (size_t)(cols > 0 ? cols : 1), sizeof(float))
            : 0;
        atomic_store(&rlx_splat_failed, bad || (team > 1 && !rlx_splat_part));
    }
    rlx_work_sync(team);
    float *mine = tid == 0 ? grad : rlx_splat_part + (int64_t)(tid - 1) * cols;
    rlx_splat_tile *s = atomic_load(&rlx_splat_failed) ? 0
        : (rlx_splat_tile *)malloc(sizeof(rlx_splat_tile));
    if (!s) atomic_store(&rlx_splat_failed, 1);
    for (int64_t t = tid; s && t < tw * th; t += team) {
        const int64_t tx = t % tw, ty = t / tw, *off = rlx_splat_off;
        const int32_t *ids = rlx_splat_ids + off[t];
        rlx_splat_tile_init(s, tx, ty, width, height);
        rlx_splat_tile_forward(rec, ids, off[t + 1] - off[t], s);
        rlx_splat_tile_backward(rec, ids, off[t + 1] - off[t], s, gimg, width, height, tx, ty,
                                bg, mine);
    }
    free(s);
    rlx_work_sync(team);
    if (!atomic_load(&rlx_splat_failed))
        for (int k = 1; k < team; ++k) {
            const float *src = rlx_splat_part + (int64_t)(k - 1) * cols;
            for (int64_t j = r0; j < r1; ++j) grad[j] += src[j];
        }
    rlx_work_sync(team);
    if (tid == 0) {
        free(rlx_splat_off); free(rlx_splat_ids); free(rlx_splat_part);
        rlx_splat_off = 0; rlx_splat_ids = 0; rlx_splat_part = 0;
        if (atomic_load(&rlx_splat_failed))
            for (int64_t j = 0; j < cols; ++j) grad[j] = __builtin_nanf("");
    }
}
#endif
"""
