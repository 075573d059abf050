"""bench_contention --aa: the one-thread peer timed a second time, as a peer of its own."""

from __future__ import annotations

from benchmarks.bench_contention import AGAIN, PEERS, with_again, with_threads


def test_the_again_peer_runs_the_one_thread_program_with_its_thread_count() -> None:
    calls: list[str] = []
    counts: list[int] = []

    def program() -> str:
        calls.append("run")
        return "out"

    peers = {"rlx team": with_threads(counts.append, 2, program),
             "rlx 1 thread": with_threads(counts.append, 1, program)}
    both = with_again(peers)
    assert list(both) == ["rlx team", "rlx 1 thread", AGAIN]
    assert AGAIN not in PEERS and AGAIN.startswith("rlx")  # never counted as another library
    both[AGAIN].setup()
    assert counts == [1]  # its turns run on one thread, as the peer it repeats
    assert both[AGAIN]() == "out" and calls == ["run"]
    assert both[AGAIN] is not both["rlx 1 thread"]  # its own turns and its own stats
