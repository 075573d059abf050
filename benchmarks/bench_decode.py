"""Token-by-token greedy decoding of a GPT-2 decoder at batch 1: rlx against PyTorch.

The model is HuggingFace's ``GPT2LMHeadModel`` built from a ``GPT2Config`` with seeded random
weights (nothing is downloaded), at two sizes:

- ``small``: 4 layers, 256 wide, 4 heads, a 4,096-token vocabulary (host work per step
  matters: ~4 M parameters);
- ``gpt2``: GPT-2 small, 12 layers, 768 wide, 12 heads, 50,257 tokens (124 M parameters).

Every peer decodes with the SAME fixed-size KV cache scheme: one key and one value array per
layer, passed in and returned by every step, each holding ``N_CTX`` = 128 positions; the new
key/value row is written IN PLACE at the step's position and attention masks the positions
after it, so every step has identical shapes. Peers, in one process on the same weights:

- ``rlx``: ``rlx_core.models.gpt2.GPT2Decoder``, each step one ``@rlx.jit`` call that hits
  the specialization cache (the run checks: one compile for all steps); the step writes the
  row with a select (``where(slot == pos, new, cache)``) into the donated cache arrays
  (``jit(donate=...)``: each is returned as the same array);
- ``torch``: the same step written in PyTorch (``TorchStep`` below: HuggingFace's own layer
  modules, the row written by ``index_copy_`` as HuggingFace's StaticCache does,
  ``F.scaled_dot_product_attention`` with the mask), eager, under inference_mode;
- ``torch.compile``: that step through ``torch.compile`` (inductor, default mode);
- ``hf-dynamic`` (for reference, not a goal peer): HuggingFace's own forward with its growing
  ``past_key_values`` cache (DynamicCache), the way ``model.generate`` decodes.

A generation is 64 steps from a one-token prompt (64 new tokens). Before timing, each peer's
64 steps of logits are checked against HuggingFace's full forward pass over the same ids
(max abs difference <= 1e-4); a peer over it is reported and not timed. Peers are timed in
turns that rotate (one untimed generation first, then ``--block`` timed generations each), and
every step is timed on its own: the per-token figure is the median step, input tensors and the
greedy argmax included, as each library's generation loop does them.

    python benchmarks/bench_decode.py                    # both sizes, writes results/decode-*
    python benchmarks/bench_decode.py --clock thread     # thread CPU time (a loaded machine)
    python benchmarks/bench_decode.py --quick            # small only, few runs, nothing written

Goals (issue 22, Trident's setting): per token on ``small`` rlx >= 1.5x torch eager and
>= 1.7x torch.compile; on ``gpt2`` ahead of both.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import (  # noqa: E402
    Stats,
    command_text,
    finish_run,
    markdown_table,
    save_run,
    say,
    stamp,
    start_run,
)

N_CTX = 128
NEW_TOKENS = 64
PROMPT = (0,)
TOLERANCE = 1e-4
GOALS = {"small": {"torch": 1.5, "torch.compile": 1.7}, "gpt2": {"torch": 1.0, "torch.compile": 1.0}}


@dataclass(frozen=True)
class Size:
    name: str
    n_layer: int
    n_embd: int
    n_head: int
    vocab_size: int


SIZES = {"small": Size("small", 4, 256, 4, 4096), "gpt2": Size("gpt2", 12, 768, 12, 50257)}


def hf_model(size: Size) -> Any:
    """A GPT2LMHeadModel with seeded random weights (HuggingFace's own init, std 0.02)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=size.n_layer, n_embd=size.n_embd, n_head=size.n_head,
                     vocab_size=size.vocab_size, n_positions=1024, bos_token_id=0,
                     eos_token_id=0, attn_implementation="sdpa")
    return GPT2LMHeadModel(cfg).eval()


def torch_step(torch: Any, model: Any, n_ctx: int) -> Any:
    """The rlx step's fixed-cache scheme in PyTorch, on HuggingFace's layer modules."""
    fn = torch.nn.functional
    tr = model.transformer
    c, nh = model.config.n_embd, model.config.n_head
    dh = c // nh

    class TorchStep(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tr = tr
            self.register_buffer("slots", torch.arange(n_ctx).view(1, n_ctx), persistent=False)

        def forward(self, tok: Any, pos: Any, *caches: Any) -> tuple[Any, ...]:
            x = self.tr.wte(tok) + self.tr.wpe(pos)  # (1, C)
            visible = (self.slots <= pos.view(1, 1)).view(1, 1, 1, n_ctx)
            for i, blk in enumerate(self.tr.h):
                q, k, v = blk.attn.c_attn(blk.ln_1(x)).split(c, dim=-1)
                q, k, v = (t.view(1, nh, 1, dh) for t in (q, k, v))
                # the row written in place, as HuggingFace's StaticCache does (index_copy_)
                kc = caches[2 * i].index_copy_(2, pos, k)
                vc = caches[2 * i + 1].index_copy_(2, pos, v)
                ctx = fn.scaled_dot_product_attention(q, kc, vc, attn_mask=visible)
                x = x + blk.attn.c_proj(ctx.reshape(1, c))
                x = x + blk.mlp(blk.ln_2(x))
            logits = fn.linear(self.tr.ln_f(x), self.tr.wte.weight)
            return (logits, *caches)

    return TorchStep().eval()


Step = Callable[[int, int], Any]  # (token, position) -> logits (1, vocab) as numpy


def generate(step: Step, reset: Callable[[], None], clock: Callable[[], float],
             times: list[float] | None = None, logits: list[Any] | None = None) -> list[int]:
    """One generation: the prompt, then NEW_TOKENS greedy tokens; each step timed by ``clock``."""
    reset()
    ids = list(PROMPT)
    for p in range(len(PROMPT) + NEW_TOKENS - 1):
        t0 = clock()
        out = step(ids[p], p)
        nxt = int(out.argmax())
        if times is not None:
            times.append(clock() - t0)
        if logits is not None:
            logits.append(out)
        if p + 1 >= len(PROMPT):
            ids.append(nxt)
    return ids


def rlx_peer(dec: Any) -> tuple[Step, Callable[[], None]]:
    import numpy as np

    state: dict[str, Any] = {}

    def reset() -> None:
        state["kv"] = dec.empty_cache()

    def step(tok: int, pos: int) -> Any:
        logits, *state["kv"] = dec.step(np.array([tok], np.int32), np.array([pos], np.int32),
                                        *state["kv"])
        return logits

    return step, reset


def torch_peer(torch: Any, module: Any, shape: tuple[int, ...],
               layers: int) -> tuple[Step, Callable[[], None]]:
    state: dict[str, Any] = {}

    def reset() -> None:
        state["kv"] = [torch.zeros(shape) for _ in range(2 * layers)]

    def step(tok: int, pos: int) -> Any:
        with torch.inference_mode():
            logits, *state["kv"] = module(torch.tensor([tok]), torch.tensor([pos]),
                                          *state["kv"])
        return logits.numpy()

    return step, reset


def hf_dynamic_peer(torch: Any, model: Any) -> tuple[Step, Callable[[], None]]:
    state: dict[str, Any] = {}

    def reset() -> None:
        state["past"] = None

    def step(tok: int, pos: int) -> Any:
        with torch.inference_mode():
            out = model(input_ids=torch.tensor([[tok]]), past_key_values=state["past"],
                        use_cache=True)
        state["past"] = out.past_key_values
        return out.logits[0].numpy()

    return step, reset


def hit_overhead_s(n_args: int, shape: tuple[int, ...], clock: Callable[[], float]) -> float:
    """Median time of a ``@rlx.jit`` cache hit with the step's arguments (two (1,) i32 and
    ``n_args`` f32 caches) and almost no work (``tok + pos``): the host part of a step (guard
    checks, reading every argument, allocating an output, the call)."""
    import numpy as np

    import rlx_core as rlx

    @rlx.jit
    def same_args(tok: Any, pos: Any, *caches: Any) -> Any:
        return tok + pos

    args = [np.zeros(1, np.int32), np.ones(1, np.int32)] + \
        [np.zeros(shape, np.float32) for _ in range(n_args)]
    for _ in range(10):
        same_args(*args)
    times = []
    for _ in range(2000):
        t0 = clock()
        same_args(*args)
        times.append(clock() - t0)
    return Stats.of(times).p50


def per_token_work(size: Size) -> tuple[float, float]:
    """(GFLOP, GB) of one step: its matmuls (the layers' and the tied LM head's, attention over
    the N_CTX cache slots) and the f32 weights + KV caches it must read (the embedding rows
    aside, but the whole ``wte`` as LM head)."""
    c, n, v = size.n_embd, size.n_layer, size.vocab_size
    params = n * 12 * c * c + v * c
    flop = 2 * params + n * 2 * 2 * N_CTX * c
    cache = 2 * n * N_CTX * c
    return flop * 1e-9, (params + 2 * cache) * 4e-9  # caches read, and written out again


def working_set_bandwidth(threads: int, gbytes: float) -> float:
    """GB/s of ``threads`` threads reading a buffer of ``gbytes`` once, measured now: the best
    of 20 passes up to 64 MB (on a busy machine most passes of a 20-MB buffer still run
    unpreempted), 3 beyond. The floor takes the larger of it and the stored memory bandwidth
    (peaks.gbps: a larger buffer is read from memory, and a lower figure than the store's is
    a busy or slowed machine's); this run's floor takes it as measured."""
    from rlx_core.targets.cpu.peaks import read_bandwidth

    mbytes = max(1, math.ceil(gbytes * 1e3 / 1.048576))
    return read_bandwidth(threads, mbytes=mbytes, rounds=20 if mbytes <= 64 else 3)


def run_size(size: Size, args: Any, torch: Any, clock: Callable[[], float],
             peaks: Any) -> dict[str, Any]:
    import numpy as np

    from benchmarks.peak import floor_fields, floor_text, fraction_text
    from rlx_core.models.gpt2 import DecoderConfig, GPT2Decoder, weights_from_torch

    model = hf_model(size)
    cfg = DecoderConfig.from_hf(model.config, n_ctx=N_CTX)
    dec = GPT2Decoder(cfg, weights_from_torch(model), target="cpu")
    module = torch_step(torch, model, N_CTX)
    compiled = torch.compile(module)
    peers: dict[str, tuple[Step, Callable[[], None]]] = {
        "rlx": rlx_peer(dec),
        "torch": torch_peer(torch, module, cfg.cache_shape, cfg.n_layer),
        "torch.compile": torch_peer(torch, compiled, cfg.cache_shape, cfg.n_layer),
        "hf-dynamic": hf_dynamic_peer(torch, model),
    }
    # first generation of each: compiles (timed once, wall clock) and the logits to check
    first_s, errors, ids_of = {}, {}, {}
    for name, (step, reset) in peers.items():
        got: list[Any] = []
        t0 = time.perf_counter()
        ids = generate(step, reset, clock, logits=got)
        first_s[name] = round(time.perf_counter() - t0, 2)
        with torch.inference_mode():
            want = model(torch.tensor([ids[:-1]])).logits[0].numpy()
        errors[name] = float(np.max(np.abs(np.concatenate(got, 0) - want)))
        ids_of[name] = ids
    bad = {n: e for n, e in errors.items() if not e <= TOLERANCE}
    compiles = {"misses": dec.step.misses, "hits": dec.step.hits,
                "specializations": len(dec.step.specializations)}
    if compiles["misses"] != 1:
        bad["rlx-compiles"] = compiles["misses"]
    say(f"{size.name}: first generation (compiles) {first_s} s; max |logits - HF| {errors}; "
        f"rlx step {compiles}")
    timed = [n for n in peers if n not in bad]
    times: dict[str, list[float]] = {n: [] for n in timed}
    gen_s: dict[str, list[float]] = {n: [] for n in timed}
    # GPT-2 small streams ~0.5 GB of weights per token: a generation takes seconds, not ms
    count = args.generations if size.name == "small" else args.large_generations
    turns = max(1, math.ceil(count / args.block))
    for r in range(turns):
        order = timed[r % len(timed):] + timed[:r % len(timed)]
        for name in order:
            step, reset = peers[name]
            if size.name == "small":  # settle: this peer's caches and pools warm
                generate(step, reset, clock)
            for _ in range(args.block):
                g0 = clock()
                generate(step, reset, clock, times[name])
                gen_s[name].append(clock() - g0)
    stats = {n: Stats.of(t) for n, t in times.items()}
    gen = {n: Stats.of(t) for n, t in gen_s.items()}
    p50 = {n: s.p50 for n, s in stats.items()}
    ratios = {peer: round(p50[peer] / p50["rlx"], 3) for peer in ("torch", "torch.compile",
                                                                  "hf-dynamic")
              if peer in p50 and "rlx" in p50}
    goals = {peer: {"want": want, "got": ratios.get(peer),
                    "met": ratios.get(peer) is not None and ratios[peer] >= want}
             for peer, want in GOALS[size.name].items()}
    gflop, gbytes = per_token_work(size)
    row: dict[str, Any] = {
        "size": size.name, "layers": size.n_layer, "width": size.n_embd, "heads": size.n_head,
        "vocab": size.vocab_size, "n_ctx": N_CTX, "new_tokens": NEW_TOKENS,
        "first_generation_s": first_s, "max_abs_diff_vs_hf": errors, "over_tolerance": bad,
        "same_ids_as_rlx": {n: ids_of[n] == ids_of["rlx"] for n in ids_of},
        "timed_generations": turns * args.block,
        "rlx_step_cache": compiles, "per_token_s": stats, "generation_s": gen,
        "rlx_speedup": ratios, "goals": goals, "gflop_per_token": round(gflop, 4),
        "gbytes_per_token": round(gbytes, 4)}
    if "rlx" in p50:
        # the bytes stream from wherever a buffer of their size lives: the small model's
        # ~19 MB from the last-level cache where it fits (the probe behind peaks.gbps, 8x the
        # L3 a thread, reads memory: a floor above a step that never leaves the cache)
        now_gbs = working_set_bandwidth(args.threads, gbytes)
        row["working_set_gbs"] = round(max(peaks.kept.gbps, now_gbs), 1)
        row["working_set_gbs_this_run"] = round(now_gbs, 1)
        row.update(floor_fields(gflop, peaks.kept.gflops, p50["rlx"], gbytes,
                                row["working_set_gbs"], peaks.now.gflops, now_gbs))
        row["rlx_hit_overhead_s"] = hit_overhead_s(2 * cfg.n_layer, cfg.cache_shape, clock)
        row["rlx_host_share"] = round(row["rlx_hit_overhead_s"] / p50["rlx"], 4)
    say(f"{size.name}: per token " + "  ".join(f"{n} {v * 1e3:.3f} ms" for n, v in p50.items())
        + "  | rlx speedup " + "  ".join(f"vs {n} {v:.2f}x" for n, v in ratios.items())
        + (f"  | floor {floor_text(row, digits=3)} ms (rlx {row['rlx_over_floor']:.2f}x, "
           f"{row['rlx_over_run_floor']:.2f}x this run's; {fraction_text(row)} of the stored "
           f"(this run's) FMA peak)" if "floor_s" in row else "")
        + (f"  | rlx host part {row['rlx_hit_overhead_s'] * 1e6:.1f} us"
           if "rlx_hit_overhead_s" in row else "")
        + (f"  | EXCLUDED {bad}" if bad else "  | all within 1e-4"))
    return row


def markdown(data: dict[str, Any], args: Any, argv: list[str] | None = None) -> str:
    from benchmarks.peak import floor_text

    clock = "thread CPU time" if args.clock == "thread" else "wall time"
    headers = ["model", "rlx ms/token", "torch ms/token", "torch.compile ms/token",
               "hf-dynamic ms/token", "rlx vs torch", "rlx vs torch.compile",
               "goal", "floor ms", "rlx / floor (this run's)", "rlx host part", "max |diff| vs HF", "rlx compiles"]
    rows = []
    for r in data["results"]:
        s = r["per_token_s"]

        def ms(n: str, s: dict[str, Any] = s) -> str:
            return f"{s[n].p50 * 1e3:.3f}" if n in s else "excluded"

        goal = "; ".join(f"{p} >= {g['want']}x: {'met' if g['met'] else 'MISSED'}"
                         for p, g in r["goals"].items())
        rows.append([f"{r['size']} ({r['layers']}L, {r['width']}, {r['heads']}h, "
                     f"vocab {r['vocab']})", ms("rlx"), ms("torch"), ms("torch.compile"),
                     ms("hf-dynamic"),
                     f"{r['rlx_speedup'].get('torch', 0):.2f}x",
                     f"{r['rlx_speedup'].get('torch.compile', 0):.2f}x", goal,
                     floor_text(r, digits=3) if "floor_s" in r else "-",
                     f"{r['rlx_over_floor']:.2f}x ({r['rlx_over_run_floor']:.2f}x)"
                     if "floor_s" in r else "-",
                     f"{r['rlx_hit_overhead_s'] * 1e6:.1f} us ({r['rlx_host_share']:.1%})"
                     if "rlx_hit_overhead_s" in r else "-",
                     f"{max(r['max_abs_diff_vs_hf'].values()):.1e}",
                     f"{r['rlx_step_cache']['misses']} for "
                     f"{r['rlx_step_cache']['misses'] + r['rlx_step_cache']['hits']} steps"])
    bw = ", ".join(f"{r['working_set_gbs']} GB/s on {r['size']}" for r in data["results"]
                   if "working_set_gbs" in r) or "-"
    gens = ", ".join(f"{r['timed_generations']} on {r['size']}" for r in data["results"])
    cmd = command_text("benchmarks/bench_decode.py", argv)
    return (f"# GPT-2 decoding, batch 1, {NEW_TOKENS} tokens, fixed {N_CTX}-slot KV cache\n\n"
            f"{stamp(data['machine'])}. {data['threads']['threads']} thread(s) per peer. "
            f"Per-token figure: the median of every step's {clock} (timed generations of "
            f"{NEW_TOKENS} steps per peer: {gens}; in rotating turns of {args.block}, each "
            f"turn on the small model after one untimed generation; input tensors and the "
            f"greedy argmax included) (`{cmd}`). "
            f"Peers: torch and torch.compile run the same fixed-cache step as rlx (the new "
            f"row written in place: rlx's select into the donated cache, torch's index_copy_; "
            f"masked attention over all {N_CTX} slots); hf-dynamic is HuggingFace's own "
            f"forward with its growing past_key_values, for reference. *floor*: the larger of "
            f"a step's matmul FLOPs at the measured FMA peak ({data['fma_peak_gflops']} "
            f"GFLOP/s) and its f32 weights + KV caches read once at the read bandwidth "
            f"measured on a buffer of their size ({bw}; in the last-level cache where it fits, "
            f"memory's is {data['read_bandwidth_gbs']} GB/s); *rlx / floor*: against it, and "
            f"in brackets against this run's own peaks ({data['peak_run']}). Logits of every "
            f"peer checked against HuggingFace's full forward pass (<= {TOLERANCE:g}) before "
            f"timing. *rlx host part*: a `@rlx.jit` hit with the step's arguments and no work (`tok + pos`), and its "
            f"share of the rlx step.\n\n"
            + markdown_table(headers, rows))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="small,gpt2", help="comma list of " + ", ".join(SIZES))
    ap.add_argument("--generations", type=int, default=10,
                    help="timed generations of 64 steps per peer, small model (default 10)")
    ap.add_argument("--large-generations", type=int, default=4,
                    help="the same for GPT-2 small (default 4)")
    ap.add_argument("--block", type=int, default=2, help="generations per peer per turn")
    ap.add_argument("--threads", type=int, default=1,
                    help="threads for every peer (default 1: batch-1 decoding on a shared "
                         "2-core machine; --clock thread needs 1)")
    ap.add_argument("--clock", choices=("wall", "thread"), default="wall",
                    help="per-step wall time, or the calling thread's CPU time (with one "
                         "thread: time slices other processes take do not count)")
    ap.add_argument("--quick", action="store_true", help="small only, 2 generations, no files")
    ap.add_argument("--no-write", action="store_true", help="print only, write no results files")
    args = ap.parse_args(argv)
    if args.clock == "thread" and args.threads != 1:
        ap.error("--clock thread measures the calling thread only: use --threads 1")
    if args.quick:
        args.sizes, args.generations = "small", 2
    run = start_run(args.threads)
    torch = run.torch
    import numpy as np
    import transformers

    from benchmarks.peak import bench_peaks

    clock = time.thread_time if args.clock == "thread" else time.perf_counter
    peaks = bench_peaks(args.threads)
    # start_run printed the placement: this line leaves it out
    say(f"{stamp(run.machine, placement=False)}; {args.threads} thread(s), {args.clock} clock; "
        f"peaks: {peaks.summary()}")
    results = [run_size(SIZES[s], args, torch, clock, peaks) for s in args.sizes.split(",")]
    data = {"benchmark": "decode", "machine": finish_run(run), "threads": run.limits,
            "clock": args.clock,
            "n_ctx": N_CTX, "new_tokens": NEW_TOKENS, "prompt": list(PROMPT),
            "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                         "numpy": np.__version__},
            "fma_peak_gflops": round(peaks.kept.gflops, 1),
            "read_bandwidth_gbs": round(peaks.kept.gbps, 1), "peaks": peaks.to_json(),
            "peak_run": peaks.summary(), "results": results}
    md = markdown(data, args, argv)
    say(md)
    if not (args.quick or args.no_write):
        js, mdp = save_run("decode", args.clock, data, md, args.threads)
        say(f"wrote {js} and {mdp}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
