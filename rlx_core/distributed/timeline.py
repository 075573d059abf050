"""A pipeline run's measured timeline, written by the runtime for the explorer.

    RLX_DIST_TIMELINE=run.json rlx run --ranks 2 train.py     # PipelineStep writes it
    %%rlx --ranks 2 --timeline run.json                         # shown next to the static one

After each step a ``PipelineStep`` (with ``timeline=`` or ``$RLX_DIST_TIMELINE``) gathers every
rank's timed actions onto rank 0, which rewrites the file: the last step's spans per rank
(seconds from the step's start; a barrier aligns the ranks' starts), each rank's measured
idle fraction and step time, and the ideal (p-1)/(m+p-1). One gather of a few floats per
action per step, with the deadline like every collective.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

TIMELINE_ENV = "RLX_DIST_TIMELINE"
FORMAT = "rlx-pipeline-timeline/1"


def timeline_path(path: str | os.PathLike[str] | None) -> Path | None:
    """``path``, else ``$RLX_DIST_TIMELINE``, else None (nothing is written)."""
    chosen = path if path is not None else os.environ.get(TIMELINE_ENV)
    return Path(chosen) if chosen else None


def gather_timeline(step: Any) -> dict[str, Any] | None:
    """Every rank's spans of ``step``'s last step (a collective: every rank calls it); the
    record on rank 0, None on the others."""
    import numpy as np

    from rlx_core.distributed.pipeline import ideal_bubble

    comm = step.comm
    mine = np.array([[0.0 if e.kind == "F" else 1.0, e.micro, e.start, e.end]
                     for e in step.timeline] + [[-1.0, -1.0, step.step_time, step.bubble()]],
                    dtype=np.float64)
    every = comm.all_gather(mine)  # same action count on every rank: 2 x micro, + the summary
    if comm.rank != 0:
        return None
    events, per_rank = [], []
    for rank in range(comm.size):
        *acts, (_, _, step_s, bubble) = every[rank].tolist()
        events += [{"rank": rank, "kind": "F" if k == 0.0 else "B", "micro": int(i),
                    "start": start, "end": end} for k, i, start, end in acts]
        per_rank.append({"rank": rank, "step_s": step_s, "bubble": bubble})
    return {"format": FORMAT, "schedule": step.kind, "stages": step.stages,
            "micro": step.micro, "step": step.steps,
            "events": events, "ranks": per_rank,
            "bubble_measured": sum(r["bubble"] for r in per_rank) / len(per_rank),
            "bubble_ideal": ideal_bubble(step.stages, step.micro)}


def write_timeline(step: Any, path: Path) -> None:
    """Gather ``step``'s last timeline and write it to ``path`` on rank 0 (atomically)."""
    record = gather_timeline(step)
    if record is None:
        return
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(record, indent=1) + "\n")
    tmp.replace(path)


def read_timeline(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A timeline file written by ``write_timeline`` (ValueError if it is not one)."""
    record = json.loads(Path(path).read_text())
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise ValueError(f"{path} is not an rlx pipeline timeline ({FORMAT})")
    return record
