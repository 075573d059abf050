"""The BLAS behind native f32/f64 matmul: OpenBLAS from the ``scipy-openblas32`` wheel.

The wheel ships ``libscipy_openblas.so`` and its ``cblas.h``; every CBLAS symbol carries the
``scipy_`` prefix (``scipy_cblas_sgemm``), and ``blasint`` is 32-bit. Set ``RLX_NO_BLAS=1`` to
render generated loop kernels instead (the fallback is also used when the wheel is missing).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from rlx_core.ir import dtypes as dt
from rlx_core.targets.c_common.kernels import KernelEnv
from rlx_core.targets.c_common.loops import Writer
from rlx_core.targets.c_common.matmul import BlockEpilogue, GemmSpec, Strides
from rlx_core.targets.cpu import gemv, sgemm
from rlx_core.targets.cpu.bias_store import BiasStore
from rlx_core.targets.cpu.env import env_flag
from rlx_core.targets.cpu.tile_epilogue import TileEpilogue
from rlx_core.targets.cpu.update_store import UpdateStore

BLAS_INT_MAX = 2**31 - 1  # the 32-bit blasint of scipy-openblas32


@dataclass(frozen=True)
class BlasInfo:
    """Where the BLAS is and how its symbols are spelled."""

    name: str
    version: str
    include_dir: str
    lib_dir: str
    library: str  # link name: -l<library>
    symbol_prefix: str  # "scipy_" -> scipy_cblas_sgemm

    def describe(self) -> str:
        return f"{self.name} {self.version}"


@cache
def _probe() -> tuple[BlasInfo | None, str]:
    try:
        import scipy_openblas32 as sob  # a wheel of the library and headers, no Python deps
    except ImportError:
        return None, "the scipy-openblas32 package is not installed (pip install scipy-openblas32)"
    inc, lib = sob.get_include_dir(), sob.get_lib_dir()
    if not (Path(inc) / "cblas.h").is_file():
        return None, f"scipy-openblas32 has no cblas.h in {inc}"
    name = sob.get_library()
    if not any(p.name.startswith(f"lib{name}") for p in Path(lib).iterdir()):
        return None, f"scipy-openblas32 has no lib{name} in {lib}"
    version = getattr(sob, "__version__", "unknown")
    return BlasInfo("scipy-openblas32", version, inc, lib, name, "scipy_"), ""


def find_blas() -> tuple[BlasInfo | None, str]:
    """(BlasInfo, "") when the BLAS can be used, else (None, why not)."""
    if env_flag("RLX_NO_BLAS", False):
        return None, "disabled by RLX_NO_BLAS"
    return _probe()


def blas_takes(spec: GemmSpec) -> bool:
    """BLAS runs float and double GEMMs whose sizes fit its 32-bit integers. (OpenBLAS also
    needs a unit stride per operand, which emit_gemm checks: rlx's own kernel reads any.)"""
    return spec.dtype in (dt.f32, dt.f64) and max(spec.m, spec.n, spec.k) <= BLAS_INT_MAX


def _blas_layout(s: Strides) -> tuple[str, int] | None:
    """(CBLAS transpose flag, leading dimension) of an operand, None without a unit stride."""
    if s.col == 1:
        return "CblasNoTrans", s.row
    if s.row == 1:
        return "CblasTrans", s.col
    return None


# below this many multiply-adds a team GEMM runs on one thread (_alone); inside the team
# call the threads are already running and a split costs only the wait at the barrier
# after the kernel: the MLP step's three GEMMs of 164K multiply-adds (128 x 128 x 10 and its
# two gradients) split at 2 threads made the step 0.408 instead of 0.434 ms (one process, 15
# alternating turns)
TEAM_GEMM_MIN = 1 << 16


def emit_gemm(w: Writer, env: KernelEnv, spec: GemmSpec, blas: BlasInfo,
              own_sgemm: bool = False, epilogue: BlockEpilogue | None = None,
              packed: str | None = None, counter: str = "") -> str | None:
    """Batched ``?gemm`` calls: C[b] = op(A[b]) op(B[b]) (alpha 1, beta 0).

    With ``own_sgemm`` an f32 GEMM at least ``sgemm.MIN_N`` columns wide calls rlx's own
    AVX-512 or AVX2 kernel (sgemm.py) instead of OpenBLAS; the work split is the same. ``packed``
    (own kernel, one batch) is the C expression of op(B) prepacked in its panel layout
    (prepack.py): the GEMM then reads the panels and packs nothing.

    OpenBLAS itself runs on one thread (see renderer.extra_functions); large GEMMs are split
    over the program's team instead (_team_gemm: by batch, row blocks or column chunks of C),
    so one thread pool serves every kernel. Two pools (OpenMP loops and OpenBLAS's own
    pthreads) on a shared 2-core machine made each pool's waiting workers hold the cores the
    other needed: MiniLM at 2 threads ran several times slower than at 1 on a loaded machine.
    In team mode an ``epilogue`` is written inside each thread's share (see _team_gemm).
    Returns the impl label, or None (nothing written) when OpenBLAS would have to take an
    operand without a unit stride: the generated kernel runs it instead. ``counter`` is the C
    expression of this kernel call's claim counter (team_runtime.rlx_team_claim), passed in as an
    extra argument when the GEMM shares out claimed chunks.
    """
    s = "s" if spec.dtype == dt.f32 else "d"
    one, zero = ("1.0f", "0.0f") if s == "s" else ("1.0", "0.0")
    fn = f"{blas.symbol_prefix}cblas_{s}gemm"
    m, n, k = spec.m, spec.n, spec.k
    a_b, b_b = spec.a_at("bb"), spec.b_at("bb")
    c_b = f"{spec.c} + bb * {m * n}"
    own = own_sgemm and sgemm.takes(spec.dtype, n)
    la, lb = _blas_layout(spec.sa), _blas_layout(spec.sb)
    if not own and (la is None or lb is None):
        return None  # OpenBLAS needs a unit stride per operand: the generated kernel reads any

    label = f"blas-{s}gemm"
    tile: TileEpilogue | UpdateStore | BiasStore | None = None

    def call(rows: str, a: str, c: str, tile_at: tuple[str, str] | None = None) -> None:
        (ta, lda), (tb, ldb) = la, lb
        w.line(f"{fn}(CblasRowMajor, {ta}, {tb}, {rows}, {n}, {k}, {one}, {a}, {lda}, {b_b}, "
               f"{ldb}, {zero}, {c}, {n});")

    one_row = own and gemv.takes(m, spec.batch, bool(packed))  # a GEMV (gemv.py)
    if own:
        label = gemv.IMPL if one_row else sgemm.IMPL
        # element (i, p) of op(A) is A[i*rm + p*rk]; (p, j) of op(B) is B[p*brk + j*brn]
        rm, rk = spec.sa.row, spec.sa.col
        brk, brn = spec.sb.row, spec.sb.col  # (p, j) of op(B) at B[p * brk + j * brn]

        def call(rows: str, a: str, c: str,  # noqa: F811 - the same role, own kernel
                 cols: tuple[str, str] = ("0", str(n)),
                 tile_at: tuple[str, str] | None = None) -> None:
            n0, n1 = cols
            # with a tile epilogue or an update store (tile_at: the call's batch and first
            # row of C) the kernel finishes each tile itself
            epi = tile.args(w, *tile_at, c) if tile and tile_at else ""
            fn = ("rlx_gemv" if one_row else "rlx_sgemm") + ("_packed" if packed else "")
            b_args = f"{packed}" if packed else f"{b_b}, {brk}, {brn}"
            w.line(f"{fn}{tile.suffix if epi else ''}({rows}, {n}, {k}, {a}, {rm}, {rk}, "
                   f"{b_args}, {c}, {n}, {n0}, {n1}{epi});")

    if env.sync:
        tiles = (own, bool(packed))
        if epilogue and epilogue.norm is not None and (
                _claims_columns(spec, None, tiles) or _splits_columns(spec, None, tiles)):
            # a GEMM of few rows is shared out in column chunks (COLUMN_ROWS), so the
            # kernel's row norm follows a barrier there (matmul.emit_matmul): in whole-row
            # chunks (16 rows each, every one streaming all of B) MiniLM took 8.3 ms at
            # batch 1 and 1.7 ms at 2 x 8 tokens in bench_minilm (FIFO, load ~12; 7.0 and 1.3
            # in the file before); with this, b1 is level with the norm in a kernel of its
            # own (7.92 vs 7.88 ms p50, both builds in one process, alternating, FIFO)
            epilogue.norm = None
        if epilogue and not epilogue.fits("batch", "rows"):
            epilogue = None  # the kernel writes it after a barrier
        from rlx_core.targets.cpu.team import CLAIM

        if counter:  # the kernel's claim counters (team.claimed hands the chunks out)
            env.extra_args.append((CLAIM, counter))
        # a claimed column chunk's block epilogue reads a 64-column chunk still in L1/L2:
        # tiles there gained nothing (MiniLM at batch 1: 8.09 vs 8.02 ms of GEMMs)
        # an update W - c * dot (an SGD step's) is stored from the tiles (update_store.py)
        if not _claims_columns(spec, epilogue, tiles) and own and \
                not _gemv_columns(spec, epilogue, tiles) and \
                (tile := (not one_row and (UpdateStore.make(env, spec, epilogue)
                                           or BiasStore.make(env, spec, epilogue)))
                 or TileEpilogue.make(env, spec, epilogue)):
            epilogue = _Tiled(epilogue, tile)
        _team_gemm(w, spec, call, a_b, c_b, epilogue, tiles=tiles)
        return label
    if env.rows is not None:  # a row run's block (cpu/row_split.py): its rows of C, serial
        r0, r1 = env.rows
        w.open("")
        w.line("const int64_t bb = 0;")
        call(f"(int)({r1} - {r0})", f"{a_b} + ({r0}) * {spec.sa.row}", f"{c_b} + ({r0}) * {n}")
        w.close()
        return label
    # a serial kernel (no OpenMP, or a one-chunk kernel of a team program): the calling thread
    w.open(f"for (int64_t bb = 0; bb < {spec.batch}; ++bb)")
    call(str(m), a_b, c_b)
    w.close()
    return label


# the own kernel's epilogue tiles: NC columns (sgemm's column block, a multiple of its panels)
# by about TILE_ROWS rows, 192 KB of C that is still in L2 when the epilogue reads it back;
# only GEMMs whose C exceeds TILE_MIN_BYTES are tiled (smaller blocks stay in L2 anyway:
# MiniLM's 768 KB FFN output at batch 1 ran no faster tiled, at batch 32 (25 MB) 5% faster
# end to end)
TILE_COLS = 256
TILE_ROWS = 192
TILE_MIN_BYTES = 1 << 20


def _row_block(w: Writer, spec: GemmSpec, call, a_b: str, c_b: str, thread: str, parts: str,
               epilogue: BlockEpilogue | None = None,
               tiles: tuple[bool, bool] = (False, False)) -> None:
    """Block ``thread`` of ``parts`` blocks of rows of C (a claimed chunk's), a multiple of
    16 rows (the micro-kernels' row tile; with an epilogue over several row dimensions, of its
    ``row_unit`` as well), and of op(A): rows of A, or columns of a transposed A.

    ``tiles`` is (does ``call`` run the own kernel, which takes a column range ``cols``; is its
    B prepacked). With the own kernel and an epilogue that narrows by columns too, the block
    is computed in tiles (TILE_COLS columns; TILE_ROWS-ish rows when B is prepacked, so
    re-reading B per row tile costs no packing) and each tile's epilogue follows at once,
    while the tile is in L2: written after a whole block it read C back from memory (a
    thread's block of MiniLM's FFN at batch 32 is 12 MB)."""
    m, n = spec.m, spec.n
    unit = math.lcm(16, epilogue.row_unit) if epilogue else 16
    w.line(f"const int64_t per = (({m} + {parts} - 1) / {parts} + {unit - 1}) / {unit} * {unit};")
    w.line(f"const int64_t r0 = {thread} * per, rows = {m} - r0 < per ? {m} - r0 : per;")
    w.open("if (rows > 0)")
    own, packed = tiles
    big = m * n * spec.dtype.bits // 8 > TILE_MIN_BYTES
    if not (epilogue and own and big and epilogue.fits("cols") and n > TILE_COLS) or \
            isinstance(epilogue, _Tiled):
        a_off = f"r0 * {spec.sa.row}"
        call("(int)rows", f"{a_b} + {a_off}", f"{c_b} + r0 * {n}", tile_at=("bb", "r0"))
        if epilogue:
            epilogue.emit(w, {"batch": ("bb", "bb + 1"), "rows": ("r0", "r0 + rows")})
        w.close()
        return
    tile = -(-TILE_ROWS // unit) * unit if packed else None
    if tile:
        w.open(f"for (int64_t rb = r0; rb < r0 + rows; rb += {tile})")
        w.line(f"const int64_t rn = r0 + rows - rb < {tile} ? r0 + rows - rb : {tile};")
    else:
        w.open("")  # one row tile: the thread's block
        w.line("const int64_t rb = r0, rn = rows;")
    w.open(f"for (int64_t jc = 0; jc < {n}; jc += {TILE_COLS})")
    w.line(f"const int64_t je = {n} - jc < {TILE_COLS} ? {n} : jc + {TILE_COLS};")
    a_off = f"rb * {spec.sa.row}"
    call("(int)rn", f"{a_b} + {a_off}", f"{c_b} + rb * {n}", ("jc", "je"))
    epilogue.emit(w, {"batch": ("bb", "bb + 1"), "rows": ("rb", "rb + rn"), "cols": ("jc", "je")})
    w.close()
    w.close()
    w.close()


class _Tiled:
    """A block epilogue that the own kernel runs tile by tile (tile_epilogue.py): the GEMM
    calls finish C themselves, so nothing is written after them."""

    def __init__(self, block: BlockEpilogue, tile: TileEpilogue | UpdateStore | BiasStore):
        self.block, self.row_unit, self.tile = block, block.row_unit, tile

    def fits(self, *axes: str) -> bool:
        return self.block.fits(*axes)

    def emit(self, w: Writer, narrow: dict[str, tuple[str, str]]) -> None:
        pass


def work_of(spec: GemmSpec) -> int:
    """Multiply-adds of the GEMM."""
    return spec.batch * spec.m * spec.n * spec.k


def _alone(spec: GemmSpec) -> bool:
    """Does a team GEMM run on thread 0 alone (too small to split)? Below TEAM_GEMM_MIN, and
    one batch of fewer than 16 rows (the row split's unit), unless columns share it out
    (_splits_columns, _gemv_columns, _claims_columns: tested before this in _team_gemm)."""
    return work_of(spec) < TEAM_GEMM_MIN or (spec.batch == 1 and spec.m < 16)


def _team_gemm(w: Writer, spec: GemmSpec, call, a_b: str, c_b: str,
               epilogue: BlockEpilogue | None, tiles: tuple[bool, bool] = (False, False)) -> None:
    """Team mode (rlx_core/targets/cpu/team.py): every thread of the team call runs this block,
    claiming chunks of the GEMM (a ``team.CHUNKS`` loop) until none is left.

    The chunks: column chunks for a GEMM of few rows (_column_chunks: on prepacked B, or when
    B is packed in the call, so each chunk packs only its columns); blocks of rows x TILE_COLS
    columns for a larger one on prepacked B (_block_chunks); else blocks of rows of C (a
    multiple of 16 rows, the micro-kernels' tile) in every batch (_row_chunks); a small GEMM
    is one chunk. The ``epilogue``, when it can be narrowed to a chunk, follows the GEMM
    call inside the chunk, so no barrier separates them; the caller passes only an epilogue
    that fits batches and rows (emit_gemm; any other the kernel writes after a barrier). A
    chunk's rows or columns are computed as in the static split (same blocking and order per
    element of C), so the result does not depend on who ran which chunk.
    """
    from rlx_core.targets.cpu.team import CHUNKS, GEMM_BLOCK_HEAD

    m = spec.m
    w.open(GEMM_BLOCK_HEAD)
    if isinstance(epilogue, _Tiled):  # the tile function's context, a local of each thread
        epilogue.tile.declare(w)
    if _splits_columns(spec, epilogue, tiles):
        _column_chunks(w, spec, call, a_b, c_b, epilogue, _share_width(spec.n))
    elif _gemv_columns(spec, epilogue, tiles):
        _column_chunks(w, spec, call, a_b, c_b, epilogue, gemv.chunk_width(spec.n))
    elif _claims_columns(spec, epilogue, tiles):
        _column_chunks(w, spec, call, a_b, c_b, epilogue, _claim_width(spec))
    elif _alone(spec):
        w.open(f"{CHUNKS} for (int64_t ch = 0; ch < 1; ++ch)")
        w.open(f"for (int64_t bb = 0; bb < {spec.batch}; ++bb)")
        call(str(m), a_b, c_b, tile_at=("bb", "0"))
        if epilogue:
            epilogue.emit(w, {"batch": ("bb", "bb + 1")})
        w.close()
        w.close()
    elif _claims_blocks(spec, epilogue, tiles):
        _block_chunks(w, spec, call, a_b, c_b, epilogue, tiles)
    else:
        _row_chunks(w, spec, call, a_b, c_b, epilogue, tiles)
    w.close()


# row chunks per batch of a team GEMM split by rows: about ROW_CHUNKS on prepacked B (no
# packing per chunk) while chunks keep >= 16 rows; a GEMM that packs B in the call packs all
# of B in every chunk, so it gets one chunk per rows_per_pack() rows (2 at least, ROW_CHUNKS
# at most: packing B costs ~1/rows_per_pack() of the multiply per chunk)
ROW_CHUNKS = 16
ROWS_PER_PACK = 256
# AVX-512 multiplies twice as fast per packed float, so packing costs twice the share: twice
# the rows per chunk. The 784-512-512-10 step at batch 1024 on 2 threads (Emerald Rapids,
# RLX_CPU_PROFILE, FIFO, two runs each): its forward GEMMs (1024 rows, W^T packed per call)
# 2056-2058 instead of 2108-2181 us and 1325-1332 instead of 1368-1394, the step 9458-9463
# instead of 9556-9762 us; 784-128-10/1024's forward 504-506 instead of 518-521 us
ROWS_PER_PACK_AVX512 = 512


def rows_per_pack() -> int:
    """Rows per claimed chunk of a team GEMM that packs B in the call, for this ISA path."""
    from rlx_core.targets.cpu.isa import detect

    return ROWS_PER_PACK_AVX512 if detect().family == "avx512" else ROWS_PER_PACK


def row_chunks(spec: GemmSpec, packed: bool, unit: int = 16) -> int:
    """Chunks of rows per batch a team GEMM is claimed in (see ROW_CHUNKS)."""
    if packed:
        want = ROW_CHUNKS // spec.batch
    else:
        want = min(ROW_CHUNKS, spec.m // rows_per_pack(), ROW_CHUNKS // spec.batch)
        want = max(want, 2 if spec.batch == 1 else 1)
    return max(1, min(want, -(-spec.m // unit)))


def _row_chunks(w: Writer, spec: GemmSpec, call, a_b: str, c_b: str,
                epilogue: BlockEpilogue | None, tiles: tuple[bool, bool]) -> None:
    """Chunks of (batch, block of rows), claimed; row blocks as _row_block's."""
    from rlx_core.targets.cpu.team import CHUNKS

    unit = math.lcm(16, epilogue.row_unit) if epilogue else 16
    parts = row_chunks(spec, tiles[1], unit)
    w.open(f"{CHUNKS} for (int64_t ch = 0; ch < {spec.batch * parts}; ++ch)")
    w.line(f"const int64_t bb = ch / {parts};")
    if parts == 1:
        call(str(spec.m), a_b, c_b, tile_at=("bb", "0"))
        if epilogue:
            epilogue.emit(w, {"batch": ("bb", "bb + 1")})
    else:
        w.open("")
        _row_block(w, spec, call, a_b, c_b, f"(ch % {parts})", str(parts), epilogue, tiles)
        w.close()
    w.close()


def _claims_blocks(spec: GemmSpec, epilogue: BlockEpilogue | None,
                   tiles: tuple[bool, bool]) -> bool:
    """Is the team GEMM claimed in blocks of rows x TILE_COLS columns (_block_chunks)?

    For a large GEMM of the own kernel on prepacked B wider than one column block. Split by
    rows alone its chunks were few and long: MiniLM at batch 8 x 128 (its (batch, seq, d)
    epilogue takes whole sequences, 128 rows) got 8 chunks of 1024 x 1536 x 384, 4 ms each,
    so a thread waited up to one chunk at every GEMM's end. The own kernel computes and packs
    A per TILE_COLS block of columns anyway (the tiled loop of _row_block), so a block of
    columns costs no extra packing, and its bits do not depend on the split."""
    own, packed = tiles
    return (own and packed and spec.batch == 1 and spec.n > TILE_COLS
            and (epilogue is None or epilogue.fits("cols")) and not _alone(spec))


def _block_chunks(w: Writer, spec: GemmSpec, call, a_b: str, c_b: str,
                  epilogue: BlockEpilogue | None, tiles: tuple[bool, bool]) -> None:
    """Claimed chunks of (column block, row block): the row blocks as _row_chunks's (a
    multiple of 16 rows and of the epilogue's row unit), the column blocks TILE_COLS wide
    (the last one narrower), column block by column block, so the narrow last ones come
    last and both threads read the same panels of B meanwhile. Each chunk's epilogue follows
    it (in the kernel's tiles with a tile epilogue), row tiles of about TILE_ROWS rows."""
    from rlx_core.targets.cpu.team import CHUNKS

    m, n = spec.m, spec.n
    unit = math.lcm(16, epilogue.row_unit) if epilogue else 16
    parts = row_chunks(spec, True, unit)
    per = -(-m // parts)
    per = -(-per // unit) * unit
    parts = -(-m // per)  # row blocks that hold rows
    groups = -(-n // TILE_COLS)
    tile = -(-TILE_ROWS // unit) * unit
    w.line("const int64_t bb = 0;")
    w.line("(void)bb;")
    w.open(f"{CHUNKS} for (int64_t ch = 0; ch < {groups * parts}; ++ch)")
    w.line(f"const int64_t jc = ch / {parts} * {TILE_COLS}, "
           f"je = {n} - jc < {TILE_COLS} ? {n} : jc + {TILE_COLS};")
    w.line(f"const int64_t r0 = ch % {parts} * {per}, rows = {m} - r0 < {per} ? {m} - r0 : {per};")
    w.open(f"for (int64_t rb = r0; rb < r0 + rows; rb += {tile})")
    w.line(f"const int64_t rn = r0 + rows - rb < {tile} ? r0 + rows - rb : {tile};")
    call("(int)rn", f"{a_b} + rb * {spec.sa.row}", f"{c_b} + rb * {n}", ("jc", "je"),
         tile_at=("bb", "rb"))
    if epilogue:
        epilogue.emit(w, {"rows": ("rb", "rb + rn"), "cols": ("jc", "je")})
    w.close()
    w.close()


# a GEMM of at most COLUMN_ROWS rows with prepacked B is shared out as chunks of COLUMN_CHUNK
# columns that threads claim one at a time (team_runtime.rlx_team_take), not as one block of rows
# each: a thread the VM stalls then holds up one chunk instead of half the GEMM. Side by side
# in one process (2 threads, 3000 calls each, MiniLM's batch-1 shapes 128 x 384 x 384,
# 128 x 384 x 1536 and 128 x 1536 x 384) the median call was 5-18% faster. Larger GEMMs keep
# the row split (and its tiled epilogues), as do unpacked B (a training step's weights: a
# column split packs B per chunk, and ran 5% slower inside the MLP step)
# What claiming costs (Emerald Rapids, 2 threads, C harness, prepacked 64-column chunks):
# when the same chunks go to the same thread every call, each core's L2 keeps its share of
# B between calls: 128 x 384 x 1536 ran at 444-465 GFLOP/s, 128 x 1536 x 384 at 440-446;
# with chunks handed to either thread at random, 383-386 and 332. Claims from one counter
# fall between those, and MLAS's static split sits near the top (bench_gemm --threads 2:
# rlx prepacked 0.90-0.96x MLAS at 128 rows). The claims now start each thread on its own
# half of the chunks, the same every call (team_runtime.rlx_team_take); in bench_gemm --threads 2
# (FIFO, load 7-12) that measured level with the one counter, both within noise of MLAS
# (prepacked 128-row shapes 434-446 against 436-442 GFLOP/s; MLAS 406-452): the benchmark's
# back-to-back calls of one GEMM did not show the harness's gap.
# TEAM_GEMM_MIN re-measured on Emerald Rapids (2 threads, RLX_CPU_PROFILE, FIFO): raised to
# 1 << 18, so the MLP step's GEMMs of 164K multiply-adds ran on thread 0 alone, the forward
# 128 x 128 x 10 took 6.7-8.5 us instead of 2.6 and the step's kernels 146-148 instead of
# 142 us: split, they stay faster.
COLUMN_ROWS = 256
COLUMN_CHUNK = 64  # a multiple of both kernels' panels (16 and 32 columns)
# A wide GEMM of fewer than 16 rows is claimed in chunks of WIDE_CHUNK columns: its 64-column
# chunks take a few us each (MiniLM's FFN1 at one sentence of 8 tokens, 8 x 384 x 1536: 24
# chunks). Fewer, longer chunks helped most when the host put the two vCPUs on different L3s
# (a 310 ns round trip between them instead of 55). Not through the claims themselves: a
# claim's compare-and-swap costs ~6 ns on average (C harness, both placements), and giving
# each thread's share a cache line of its own was level (team_runtime.py's take, the "claimlines"
# A/B of Dec 7); what each chunk start costs beyond it was not isolated.
# MiniLM b1 s8 (2 threads, Zen 4, both builds in one process, alternating turns, FIFO, both
# build orders, four runs): 0.978-0.985x the call's p50 with the vCPUs apart, 0.983-0.997x
# together; 256 columns (six chunks) 0.993 / 0.998; same bits (a chunk is computed as in the
# one-thread call). Only from 8 chunks of it, so two threads still balance their shares.
WIDE_CHUNK = 128
# and a deep one (K >= 1024) that is not wide in chunks of DEEP_CHUNK: MiniLM's FFN2 at one
# sentence, 8 x 1536 x 384, has six 64-column chunks of ~13 us each at the FMA peak, and
# whoever finishes first waits up to one of them before the LayerNorm that follows. 32 columns: 0.990-0.997x the
# call's p50 in five runs (both build orders, both placements; same bits)
DEEP_CHUNK = 32


def _claim_width(spec: GemmSpec) -> int:
    """Columns per claimed chunk of a GEMM shared out in column chunks (_claims_columns): a
    multiple of both kernels' panels."""
    wide = spec.m < 16 and spec.n >= 8 * WIDE_CHUNK and spec.n % (2 * WIDE_CHUNK) == 0
    if wide:
        return WIDE_CHUNK
    return DEEP_CHUNK if spec.m < 16 and spec.k >= 1024 else COLUMN_CHUNK


def _claims_columns(spec: GemmSpec, epilogue: BlockEpilogue | None,
                    tiles: tuple[bool, bool]) -> bool:
    """Is the team GEMM shared out as claimed column chunks (see COLUMN_ROWS)?

    Also for one of 2-15 rows (over gemv.MAX_ROWS, or with RLX_NO_GEMV), which the row split
    would leave to thread 0 alone (_alone): such a GEMM streams its whole weight for few
    multiply-adds, so two threads read it nearly twice as fast. MiniLM at one sentence of 8
    tokens (2 threads of a Zen 4, both builds twice in one process, alternating turns, FIFO,
    load 4.4-4.8): 2.04 -> 1.18 ms a call (p50), its GEMMs 1.83-1.89 -> 0.95-1.13 ms of thread
    0's CPU time (profile_minilm). A chunk's m rows are the kernel's edge tiles, computed as
    in the one-thread call (same K slices and order), so the bits do not depend on the
    split."""
    own, packed = tiles
    return (own and packed and spec.batch == 1 and spec.m <= COLUMN_ROWS
            and spec.n >= 2 * COLUMN_CHUNK and (epilogue is None or epilogue.fits("cols"))
            and work_of(spec) >= TEAM_GEMM_MIN)


def _gemv_columns(spec: GemmSpec, epilogue: BlockEpilogue | None,
                  tiles: tuple[bool, bool]) -> bool:
    """Is the team GEMM a GEMV (gemv.py) shared out as claimed chunks of gemv.CHUNK columns?
    The row split leaves a GEMM of fewer than 16 rows to one thread (_alone); a decoding
    step's linears have one row and up to 50,257 columns."""
    own, packed = tiles
    return (own and gemv.takes(spec.m, spec.batch, packed) and work_of(spec) >= TEAM_GEMM_MIN
            and spec.n >= 2 * sgemm.NR and (epilogue is None or epilogue.fits("cols")))


def _splits_columns(spec: GemmSpec, epilogue: BlockEpilogue | None,
                    tiles: tuple[bool, bool]) -> bool:
    """Is the GEMM claimed in chunks of whole panels of columns (_column_chunks), not rows?

    For an own-kernel GEMM of at most COLUMN_ROWS rows whose op(B) is packed in the call
    (neither prepacked nor read in place, see sgemm.reads_b_in_place): a thread then packs
    only its own columns of B, where with rows each packs all of it. Inside the MLP step on a
    2-core Zen 3 VM, kernels timed side by side in one process (RLX_CPU_PROFILE), the forward
    x @ W1^T (128 x 784 x 128) took 165 instead of 190 us and 128 x 512 x 512 571 instead
    of 622; a B read in place (dW1 = g^T x) ran faster split by rows (181 vs 192 us). A GEMM
    of fewer than 16 rows, which the row split leaves to one thread, is split by columns
    however B is read: the 784-512-512-10 step's 10 x 512 x 128 weight gradient took
    23.6 us on one thread (C harness)."""
    own, packed = tiles
    if not (own and not packed and spec.batch == 1 and spec.n >= 2 * sgemm.NR
            and (epilogue is None or epilogue.fits("cols")) and work_of(spec) >= TEAM_GEMM_MIN):
        return False
    if spec.m < 16:
        return True  # too few rows to split (a 10-class weight gradient): columns, not alone
    return spec.m <= COLUMN_ROWS and not sgemm.reads_b_in_place(spec.sb, spec.m, spec.k)


def _share_width(n: int) -> int:
    """Columns per claimed chunk of a GEMM packing B in the call: whole panels of either
    kernel (32 columns), about 8 chunks (each packs its own columns of B)."""
    per = -(-n // 8)
    return max(32, -(-per // 32) * 32)


def _column_chunks(w: Writer, spec: GemmSpec, call, a_b: str, c_b: str,
                   epilogue: BlockEpilogue | None, width: int) -> None:
    """Claimed chunks of ``width`` columns (whole panels); each chunk's epilogue follows it."""
    from rlx_core.targets.cpu.team import CHUNKS

    n, chunks = spec.n, -(-spec.n // width)
    w.line("const int64_t bb = 0;")
    w.line("(void)bb;")
    w.open(f"{CHUNKS} for (int64_t ch = 0; ch < {chunks}; ++ch)")
    w.line(f"const int64_t j0 = ch * {width}, j1 = j0 + {width} < {n} ? j0 + {width} : {n};")
    call(str(spec.m), a_b, c_b, ("j0", "j1"), tile_at=("0", "0"))
    if epilogue:
        epilogue.emit(w, {"cols": ("j0", "j1")})
    w.close()
