"""The timing harness: scheduling, pruning, medians and clock repeats with a fake timer; CUDA on a GPU."""

import random
import statistics

import pytest

from rooftune.kernels.harness.timing import (
    ClockSample,
    clock_moved,
    input_sets_needed,
    launches_per_replay,
    round_budget,
    run_rounds,
    summarize,
)


class FakeReplay:
    """True times per key with multiplicative noise; records every round's order."""

    def __init__(self, true_us, noise=0.0, clocks=None, seed=1):
        self.true_us, self.noise, self.rng = true_us, noise, random.Random(seed)
        self.orders, self.clocks = [], list(clocks or [])

    def __call__(self, order):
        self.orders.append(list(order))
        times = {k: self.true_us[k] * (1 + self.rng.uniform(-self.noise, self.noise)) for k in order}
        mhz = self.clocks.pop(0) if self.clocks else (1980.0, 1980.0)
        return times, [ClockSample(m, 0) for m in mhz]


def test_round_budget_prunes_slow_and_shortens_middle():
    assert round_budget(1.0, 7, 3.0, 1.3, 3) == 7
    assert round_budget(1.29, 7, 3.0, 1.3, 3) == 7
    assert round_budget(1.3, 7, 3.0, 1.3, 3) == 3
    assert round_budget(3.0, 7, 3.0, 1.3, 3) == 1
    assert round_budget(2.0, 7, 3.0, None, 3) == 7
    assert round_budget(10.0, 7, float("inf"), None, 3) == 7


def test_run_rounds_medians_and_pruning():
    true = {"best": 10.0, "near": 11.0, "mid": 20.0, "slow": 35.0, "awful": 100.0}
    fake = FakeReplay(true, noise=0.01)
    timed = run_rounds(list(true), fake, rounds=7)
    assert [timed[k].rounds for k in true] == [7, 7, 3, 1, 1]
    assert len(fake.orders) == 7
    for k, t in timed.items():
        assert t.median_us == pytest.approx(true[k], rel=0.011)
        assert t.median_us == statistics.median(t.times_us)
        assert t.clock_mhz_min == t.clock_mhz_max == 1980.0
    assert timed["best"].spread < 0.03 and timed["awful"].spread == 0.0


def test_a_baseline_is_timed_but_does_not_set_the_pruning_pace():
    # cuBLAS 2x faster than every config: as the pace it would cut them all to mid_rounds.
    true = {"cublas": 5.0, "best": 10.0, "near": 11.0, "mid": 14.0, "slow": 31.0}
    paced_by_all = run_rounds(list(true), FakeReplay(true), rounds=7)
    assert [paced_by_all[k].rounds for k in true] == [7, 3, 3, 3, 1]
    timed = run_rounds(list(true), FakeReplay(true), rounds=7, baseline_keys=("cublas",))
    assert [timed[k].rounds for k in true] == [7, 7, 7, 3, 1]
    assert timed["cublas"].median_us == 5.0
    slow_baseline = {"cublas": 40.0, "best": 10.0}  # pruned like any candidate against the configs
    assert run_rounds(list(slow_baseline), FakeReplay(slow_baseline), baseline_keys={"cublas"})["cublas"].rounds == 1
    alone = {"cublas": 5.0}  # nothing else has a time: the baseline paces itself
    assert run_rounds(["cublas"], FakeReplay(alone), baseline_keys={"cublas"})["cublas"].rounds == 7


def test_a_capture_that_kills_the_context_names_its_launcher(monkeypatch):
    from rooftune.kernels.harness import timing
    from rooftune.kernels.harness.context import ContextLost

    def faults(i):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(timing, "context_error", lambda device="cuda": "AcceleratorError: illegal memory access")
    with pytest.raises(ContextLost) as lost:
        timing.time_candidates({"bad": faults, "next": lambda i: None}, clock=lambda: ClockSample(None))
    assert lost.value.culprit == "bad" and "illegal memory access" in lost.value.reason


def test_a_graph_that_fails_its_warm_up_replay_is_named(monkeypatch):
    """Each warm-up replay is synchronized on its own: a failing graph becomes an error Timing and leaves
    the pass, or, when it killed the CUDA context, a ContextLost that names it."""
    import torch

    from rooftune.kernels.harness import timing
    from rooftune.kernels.harness.context import ContextLost

    class Graph:
        def __init__(self, error=None):
            self.error, self.replays = error, 0

        def replay(self):
            self.replays += 1
            if self.error:
                raise RuntimeError(self.error)

    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(timing, "context_error", lambda device="cuda": None)
    graphs = {"a": Graph(), "bad": Graph("CUDA error: misaligned address"), "c": Graph()}
    failed = timing._warm_up(graphs, ["c", "bad", "a"])
    assert list(graphs) == ["a", "c"] and [g.replays for g in graphs.values()] == [1, 1]
    assert failed["bad"].median_us is None and "misaligned address" in failed["bad"].error

    monkeypatch.setattr(timing, "context_error", lambda device="cuda": "AcceleratorError: illegal memory access")
    graphs = {"a": Graph(), "killer": Graph("CUDA error: an illegal memory access"), "c": Graph()}
    with pytest.raises(ContextLost) as lost:
        timing._warm_up(graphs, ["a", "killer", "c"])
    assert lost.value.culprit == "killer" and graphs["c"].replays == 0


def test_every_round_is_a_fresh_shuffle_of_the_survivors():
    true = {i: 10.0 + 0.01 * i for i in range(30)}
    fake = FakeReplay(true)
    run_rounds(list(true), fake, rounds=7, rng=random.Random(5))
    assert all(sorted(o) == list(range(30)) for o in fake.orders)
    assert len({tuple(o) for o in fake.orders}) == 7


def test_a_round_with_a_moving_clock_is_repeated_and_capped():
    true = {"a": 10.0, "b": 12.0}
    # round 1 moves (1980 -> 1500), its repeat is steady; later rounds steady
    fake = FakeReplay(true, clocks=[(1980.0, 1500.0), (1965.0, 1980.0)])
    timed = run_rounds(list(true), fake, rounds=3, clock_tolerance=0.05)
    assert len(fake.orders) == 4 and timed["a"].repeats == 1 and timed["a"].rounds == 3
    # a clock that always moves: at most max_repeats extra runs per round, then the round counts
    always = FakeReplay(true, clocks=[(1980.0, 1400.0)] * 100)
    timed = run_rounds(list(true), always, rounds=2, max_repeats=2)
    assert len(always.orders) == 6 and timed["a"].rounds == 2
    assert timed["a"].clock_mhz_min == 1400.0


def test_clock_helpers_tolerate_missing_readings():
    assert not clock_moved([ClockSample(None), ClockSample(None)], 0.01)
    assert not clock_moved([ClockSample(1980.0)], 0.01)
    assert clock_moved([ClockSample(1980.0), ClockSample(None), ClockSample(1800.0)], 0.05)
    t = summarize([5.0, 6.0, 7.0], [ClockSample(None, None)])
    assert t.median_us == 6.0 and t.clock_mhz_min is None and t.throttle_reasons is None
    t = summarize([5.0], [ClockSample(1900.0, 4), ClockSample(1950.0, 1)])
    assert t.throttle_reasons == 5 and t.clock_mhz_max == 1950.0


def test_input_sets_and_launch_counts():
    l2 = 60 << 20
    assert input_sets_needed(32 << 20, l2) == 6        # 3 × 60 MiB over 32 MiB sets
    assert input_sets_needed(4 << 30, l2) == 1
    assert input_sets_needed(1000, l2) == 64            # capped
    assert input_sets_needed(3 << 30, l2, max_total_bytes=4 << 30) == 1
    assert launches_per_replay(5.0, 0.5) == 100
    assert launches_per_replay(2000.0, 0.5) == 1
    assert launches_per_replay(0.01, 0.5) == 1000


@pytest.mark.gpu
def test_time_candidates_on_gpu_orders_matmuls_by_size():
    import torch

    from rooftune.kernels.harness.timing import time_candidates

    sizes = {"small": 1024, "large": 4096}
    mats = {k: [(torch.randn(s, s, device="cuda", dtype=torch.bfloat16),) * 2 for _ in range(2)]
            for k, s in sizes.items()}
    outs = {k: torch.empty(s, s, device="cuda", dtype=torch.bfloat16) for k, s in sizes.items()}
    launchers = {k: (lambda i, k=k: torch.mm(*mats[k][i % 2], out=outs[k])) for k in sizes}
    launchers["broken"] = lambda i: (_ for _ in ()).throw(RuntimeError("no"))
    timed = time_candidates(launchers, rounds=5)
    assert timed["broken"].error and timed["broken"].median_us is None
    assert timed["small"].median_us < timed["large"].median_us
    assert timed["small"].launches > timed["large"].launches >= 1
