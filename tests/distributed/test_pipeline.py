"""Pipeline parallelism: schedules, stage splits and their errors (one process), and MLP
training on 2 and 4 ranks with 1F1B and GPipe over 4 micro-batches against single-process
training, then micro-batched inference against the single-process forward pass."""

from __future__ import annotations

import re

import pytest

from rlx_core.distributed import PipelineError, ideal_bubble, schedule, split_layers
from tests.distributed.launch import run_ranks


def _text(acts):
    return " ".join(f"{k}{i}" for k, i in acts)


def test_schedules() -> None:
    assert _text(schedule("gpipe", 0, 2, 3)) == "F0 F1 F2 B0 B1 B2"
    assert _text(schedule("1f1b", 0, 3, 4)) == "F0 F1 F2 B0 F3 B1 B2 B3"
    assert _text(schedule("1f1b", 1, 3, 4)) == "F0 F1 B0 F2 B1 F3 B2 B3"
    assert _text(schedule("1f1b", 2, 3, 4)) == "F0 B0 F1 B1 F2 B2 F3 B3"
    # every micro-batch goes forward once and backward once, forward first
    for stage in range(4):
        acts = schedule("1f1b", stage, 4, 6)
        assert sorted(acts) == sorted([("F", i) for i in range(6)] + [("B", i) for i in range(6)])
        assert all(acts.index(("F", i)) < acts.index(("B", i)) for i in range(6))
    assert ideal_bubble(2, 4) == pytest.approx(0.2)


def test_stage_splits() -> None:
    assert split_layers([1, 1, 1, 1, 1], 2, by="block") == [range(0, 2), range(2, 5)]
    # by cost: the heavy first layer gets a stage of its own
    assert split_layers([8, 1, 1, 1, 1, 1], 2, by="cost") == [range(0, 1), range(1, 6)]
    assert split_layers([1, 2, 3, 4], 3) == [range(0, 2), range(2, 3), range(3, 4)]


@pytest.mark.parametrize("call, words", [
    (lambda: schedule("zigzag", 0, 2, 4), "unknown pipeline schedule 'zigzag'"),
    (lambda: split_layers([1, 1], 3), "2 layer(s) cannot fill 3 pipeline stages"),
    (lambda: split_layers([1, 1], 2, by="size"), "unknown stage split 'size'"),
])
def test_bad_pipelines_are_typed_errors(call, words) -> None:
    with pytest.raises(PipelineError, match=re.escape(words)) as err:
        call()
    assert err.value.code == "RLX-N008" and err.value.hint


@pytest.mark.parametrize("kind", ["1f1b", "gpipe"])
def test_mlp_training_on_two_stages_equals_one_process(kind: str, tmp_path, monkeypatch) -> None:
    run = tmp_path / "run.json"  # the runtime writes the measured timeline here (rank 0)
    done = run_ranks(2, "pipeline.py", kind, env={"RLX_DIST_TIMELINE": str(run)})
    assert done.returncode == 0, done.stdout + done.stderr
    for rank in (0, 1):
        assert f"rank {rank}/2: PP=2 {kind} over 4 micro-batches" in done.stdout
    assert "rank 1/2: PP=2 inference over 4 micro-batches: max |dlogits|" in done.stdout
    if kind == "1f1b":
        assert "schedule F0 F1 B0 F2 B1 F3 B2 B3;" in done.stdout  # stage 0's warm-up
    print(done.stdout)
    _check_measured_timeline(run, kind, monkeypatch)


def _check_measured_timeline(run, kind: str, monkeypatch) -> None:
    """The file a real run wrote: every rank's spans of the last step, and the explorer's
    ``%%rlx --ranks 2 --timeline`` view showing it next to the static timeline."""
    from rlx_core.distributed.timeline import read_timeline
    from rlx_explorer import magics

    record = read_timeline(run)
    assert (record["schedule"], record["stages"], record["micro"], record["step"]) == (
        kind, 2, 4, 10)
    assert record["bubble_ideal"] == pytest.approx(0.2)
    assert 0.0 <= record["bubble_measured"] < 1.0
    for rank in (0, 1):
        mine = [e for e in record["events"] if e["rank"] == rank]
        assert sorted((e["kind"], e["micro"]) for e in mine) == sorted(
            [("F", i) for i in range(4)] + [("B", i) for i in range(4)])
        assert all(0.0 <= e["start"] <= e["end"] for e in mine)
    if kind == "1f1b":  # stage 0 runs its actions in the schedule's order
        order = [(e["kind"], e["micro"]) for e in record["events"] if e["rank"] == 0]
        assert order == schedule("1f1b", 0, 2, 4)
    shown = []
    monkeypatch.setattr(magics, "_show", shown.append)
    cell = ("import numpy as np\nfrom rlx_core.models.mlp import init_mlp, mlp_logits\n"
            "P = init_mlp((12, 32, 16, 5), seed=3)\n"
            "def model(x):\n    return mlp_logits(P, x)\n"
            "def example_inputs():\n    return (np.ones((4, 12), np.float32),)\n")
    assert magics.run_cell(f"--ranks 2 --micro 4 --schedule {kind} --timeline {run}", cell,
                           {}) == []
    page = shown[-1].data
    assert "<b>static</b> pipeline" in page and "<b>measured</b> run: 2 stages" in page
    assert f"bubble measured {record['bubble_measured']:.3f}" in page
    assert "ideal (p-1)/(m+p-1) = 0.200" in page and page.count("<svg") == 2


@pytest.mark.slow
def test_mlp_training_on_four_stages_equals_one_process() -> None:
    # PP=4, a layer per stage: the middle stages both receive and send, forward and back
    done = run_ranks(4, "pipeline.py", "1f1b")
    assert done.returncode == 0, done.stdout + done.stderr
    for rank in range(4):
        assert f"rank {rank}/4: PP=4 1f1b over 4 micro-batches" in done.stdout
    assert "rank 0/4: PP=4 1f1b over 4 micro-batches, stage ['fc1']" in done.stdout
    assert "schedule F0 F1 F2 F3 B0 B1 B2 B3;" in done.stdout  # stage 0: 3 warm-ups, then 1F1B
    assert "rank 3/4: PP=4 inference over 4 micro-batches: max |dlogits|" in done.stdout
    print(done.stdout)


@pytest.mark.slow
def test_tensor_and_pipeline_parallel_combined_on_four_ranks() -> None:
    # TP=2 x PP=2: each stage a Megatron pair over its TP group, 1F1B between the stages
    done = run_ranks(4, "tp_pp.py", timeout_s=600)
    assert done.returncode == 0, done.stdout + done.stderr
    for rank in range(4):
        stage, shard = divmod(rank, 2)
        assert (f"rank {rank}/4: TP=2 x PP=2 (stage {stage}, shard {shard}) 1f1b over 4 "
                "micro-batches vs 1 process after 10 steps") in done.stdout
    print(done.stdout)
