"""Replay a bursty load through the team's compiled judge, without a clock: which share of a
program's calls the judge puts on one thread when another process's bursts land in some calls.

Each of ``--calls`` calls meets a burst with probability ``--burst`` (independently): a team
call takes ``--team`` ms (``--team-burst`` with thread 0 starved, a third of it on its core),
a call on one thread ``--one`` ms (``--one-burst``). The spells and their holds are the C
code's own (``<prefix>_team_judge`` for team calls, ``<prefix>_team_one_call`` for shrunk
ones, rlx_core/targets/cpu/team_runtime.py); only the times are made up. Prints the calls shrunk and
the p50 of all calls per seed (a diagnostic: nothing is written).

    python benchmarks/replay_team_judge.py --burst 0.2 --seeds 3,4,5,6
"""

from __future__ import annotations

import argparse
import ctypes
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

MS = 1_000_000  # ns
STATE = ("left", "until", "next_calls", "next_ns", "shrunk", "worse")


def judge_library() -> tuple[ctypes.CDLL, str]:
    """A compiled two-thread team program (its judge's state is what the replay drives)."""
    import numpy as np

    import rlx_core as rlx
    from rlx_core.targets.cpu.runtime import load_library
    from rlx_core.targets.cpu.threads import set_num_threads

    set_num_threads(2)
    a = np.ones((1024, 1024), np.float32)  # large enough to share out
    exe = rlx.compile(lambda x: rlx.nn.relu(x) * 0.5, a, target="cpu", record=False)
    return load_library(exe.program.info["so_path"]), exe.program.info["entry"].removesuffix("_run")


def replay(lib: ctypes.CDLL, prefix: str, args: argparse.Namespace, seed: int) -> tuple[int, float]:
    """(calls shrunk, p50 ms of all calls) for one seed."""
    judge = getattr(lib, f"{prefix}_team_judge")
    one_call = getattr(lib, f"{prefix}_team_one_call")
    getattr(lib, f"{prefix}_team_reset")()
    rng = random.Random(seed)
    now, left, until, shrunk = 1000 * MS, 0, 0, 0
    ones: list[tuple[float, int]] = []
    walls: list[float] = []
    out = (ctypes.c_longlong * 6)()
    for _ in range(args.calls):
        burst = rng.random() < args.burst
        if left > 0 or now < until:  # the program runs this call on one thread
            left -= left > 0
            wall = args.one_burst if burst else args.one
            now += int(wall * MS)
            one_call((ctypes.c_longlong * 2)(int(wall * MS), now), out)
            until = max(until, dict(zip(STATE, out, strict=True))["until"])
            ones.append((wall, now))
            shrunk += 1
        else:
            wall = args.team_burst if burst else args.team
            cpu = wall / 3 if burst else wall
            fresh = sorted(w for w, t in ones[-5:] if now - t < 1000 * MS)
            one = fresh[len(fresh) // 2] if fresh else 0.0  # rlx_team_median's
            now += int(wall * MS)
            call = (ctypes.c_longlong * 7)(int(wall * MS), 0, int(cpu * MS), 0, 0,
                                           int(one * MS), now)
            if judge(call, out) == 2:
                st = dict(zip(STATE, out, strict=True))
                left, until = st["left"], st["until"]
        walls.append(wall)
    return shrunk, statistics.median(walls)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--burst", type=float, default=0.2, help="share of calls a burst lands in")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--seeds", default="3,4,5,6")
    ap.add_argument("--team", type=float, default=1.3, help="team call, ms (MiniLM b2 s8)")
    ap.add_argument("--team-burst", type=float, default=6.0)
    ap.add_argument("--one", type=float, default=2.1, help="call on one thread, ms")
    ap.add_argument("--one-burst", type=float, default=6.5)
    args = ap.parse_args(argv)
    lib, prefix = judge_library()
    for seed in (int(s) for s in args.seeds.split(",")):
        shrunk, p50 = replay(lib, prefix, args, seed)
        print(f"burst {args.burst:g}, seed {seed}: {shrunk} of {args.calls} calls shrunk, "
              f"p50 {p50:.2f} ms (team {args.team:g}, one thread {args.one:g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
