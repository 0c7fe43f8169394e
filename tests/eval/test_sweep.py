"""The sweep's GPU-free orchestration with a fake measurer: resume after a kill, compile grouping,
the time budget, the quarantine of a config that kills the CUDA context, shape-list errors,
repeatability; and the GPU measurer's context probe and compile timeout, with fakes."""

import json

import pytest
from fakes import Killed, as_format_1, steady_records

from rooftune.candidates import GEMM_SPACE, GemmShape, legal_configs
from rooftune.candidates.tutorial import gemm_baseline_extras, tutorial_configs
from rooftune.candidates.shapes import ShapeListError, load_shapes
from rooftune.eval.datasets.format import (
    DatasetError,
    Trial,
    finished_ids,
    read_dataset,
    read_manifest,
    read_shape,
    shape_files,
    shape_id,
)
from rooftune.eval.sweeping.quarantine import QUARANTINED, ContextQuarantined, read_quarantine
from rooftune.eval.scoring.replay import recorded_measure
from rooftune.eval.sweeping.sweep import run_sweep
from rooftune.hwprofiles import load_profile
from rooftune.kernels.harness.context import ContextLost
from rooftune.kernels.harness.measure import repeatability
from rooftune.tuner.evaluation import replay_shape

PROFILE = load_profile("h200")


class FakeMeasurer:
    """Times a config as a deterministic function of its parameters; can die on the n-th shape."""

    def __init__(self, die_at=None, clock=None, shape_s=0.0):
        self.die_at, self.clock, self.shape_s = die_at, clock, shape_s
        self.measured, self.compiled = [], []

    def group_key(self, shape):
        return (shape.layout, shape.n % 16 == 0, shape.k % 16 == 0)

    def compile(self, jobs, timeout_s=None):
        self.compiled.extend((self.group_key(s), c) for s, c in jobs)
        return {c: ("OutOfResources" if c["BLOCK_K"] == 256 and c["num_stages"] == 5 else 0.1)
                for _, c in jobs}

    def measure(self, shape, configs, compiled):
        if self.die_at is not None and len(self.measured) == self.die_at:
            raise Killed
        self.measured.append(shape)
        if self.clock:
            self.clock.t += self.shape_s
        return steady_records(shape, (
            Trial(c, None, f"compile: {compiled[c]}") if isinstance(compiled[c], str)
            else Trial(c, float(c["BLOCK_M"] + c["BLOCK_N"] + c["num_stages"]), None, compiled[c], 7)
            for c in configs), {"cublas": 1.0})


SHAPES = [GemmShape(1, 4096, 4096, "nk"), GemmShape(16, 8, 4096, "nk"), GemmShape(64, 4096, 4096, "nk"),
          GemmShape(128, 768, 768, "kn"), GemmShape(333, 8, 4096, "nk")]


def test_resume_after_a_kill_loses_only_the_shape_in_progress(tmp_path):
    with pytest.raises(Killed):
        run_sweep(SHAPES, tmp_path, FakeMeasurer(die_at=2), PROFILE)
    first = {p.name: p.read_bytes() for p in (tmp_path / "shapes").iterdir()}
    assert len(first) == 2
    again = FakeMeasurer()
    summary = run_sweep(SHAPES, tmp_path, again, PROFILE)
    assert summary.done == 3 and summary.skipped == 2 and summary.remaining == 0
    assert {str(s) for s in again.measured}.isdisjoint({p.split("-")[0] for p in first})
    for name, data in first.items():  # finished shapes untouched
        assert (tmp_path / "shapes" / name).read_bytes() == data
    records = read_dataset(tmp_path)
    assert sorted(str(r.shape) for r in records) == sorted(str(s) for s in SHAPES)
    for r in records:
        space = legal_configs(GEMM_SPACE, r.shape, PROFILE).configs
        assert r.candidate_configs() == space
        assert len(r.trials) == len(space) + len(gemm_baseline_extras(r.shape, space))
        assert len({t.config for t in r.trials}) == len(r.trials)  # no duplicate configs
    third = FakeMeasurer()
    assert run_sweep(SHAPES, tmp_path, third, PROFILE).done == 0 and not third.measured
    manifest = read_manifest(tmp_path)
    assert manifest["shapes_done"] == 5 and manifest["noise"]["shapes"] == 5
    assert manifest["space_version"] == GEMM_SPACE.version


def test_a_resume_skips_shapes_finished_in_either_format(tmp_path):
    """A shape finished as format 1's .csv.gz counts as finished, as one finished as .csv.xz does: a resume measures
    neither again and leaves their files as they are; the manifest then counts both."""
    run_sweep(SHAPES[:2], tmp_path, FakeMeasurer(), PROFILE)
    as_format_1(tmp_path)  # both gzip
    run_sweep(SHAPES[:3], tmp_path, FakeMeasurer(), PROFILE)  # a third, as xz
    files = {p.name: p.read_bytes() for p in (tmp_path / "shapes").iterdir()}
    assert sorted(n.rsplit(".", 1)[1] for n in files) == ["gz", "gz", "xz"]
    assert finished_ids(tmp_path) == {shape_id(s) for s in SHAPES[:3]}
    again = FakeMeasurer()
    summary = run_sweep(SHAPES, tmp_path, again, PROFILE)
    assert (summary.done, summary.skipped) == (2, 3) and again.measured == SHAPES[3:]
    assert all((tmp_path / "shapes" / name).read_bytes() == data for name, data in files.items())
    assert read_manifest(tmp_path)["shapes_done"] == 5 and len(read_dataset(tmp_path)) == 5


def test_each_shape_records_the_triton_that_measured_it_and_another_release_cannot_resume(tmp_path):
    under = {"device": {"gpu": "NVIDIA H200", "triton": "3.9.0"}}
    run_sweep(SHAPES[:2], tmp_path, FakeMeasurer(), PROFILE, manifest=under)
    assert {r.meta["triton"] for r in read_dataset(tmp_path)} == {"3.9.0"}
    again = FakeMeasurer()
    with pytest.raises(DatasetError, match="Triton release: 3.9 there, 3.7 now"):
        run_sweep(SHAPES, tmp_path, again, PROFILE, manifest={"device": {"gpu": "NVIDIA H200", "triton": "3.7.1"}})
    assert not again.measured and len(read_dataset(tmp_path)) == 2


def test_shapes_run_grouped_and_each_config_compiles_once_per_group(tmp_path):
    fake = FakeMeasurer()
    run_sweep(SHAPES + SHAPES[:1], tmp_path, fake, PROFILE)  # a duplicate entry is swept once
    groups = [fake.group_key(s) for s in fake.measured]
    assert groups == sorted(groups, key=groups.index)  # each group contiguous, first-seen order
    assert len(fake.measured) == 5
    assert len(fake.compiled) == len(set(fake.compiled))
    errors = [t for r in read_dataset(tmp_path) for t in r.trials if not t.ok]
    assert errors and all(t.error == "compile: OutOfResources" for t in errors)


def test_tutorial_configs_are_timed_beside_the_space(tmp_path):
    fake = FakeMeasurer()
    run_sweep(SHAPES, tmp_path, fake, PROFILE)
    compiled = {c for _, c in fake.compiled}
    tutorial = tutorial_configs(GEMM_SPACE.names)  # the tutorial loads through pointers: TMA=0
    for path in shape_files(tmp_path):
        result = read_shape(path)
        space = legal_configs(GEMM_SPACE, result.shape, PROFILE).configs
        extras = [r.config for r in result.trials if not r.in_space]
        assert extras == gemm_baseline_extras(result.shape, space) and set(extras) <= compiled
        assert [r.config for r in result.trials if r.in_space] == space
        assert result.meta["legal_configs"] == len(space) and result.meta["baseline_configs"] == len(extras)
    records = {str(r.shape): r for r in read_dataset(tmp_path)}
    # These shapes' rows are TMA-aligned, so the H200 sweeps them through TMA: none of the tutorial's
    # pointer configs is in the space and all 8 are timed beside it. (Where the space holds pointer
    # configs, a tutorial config can be the same kernel as one of them: tests/candidates/test_baselines.py.)
    for r in records.values():
        assert len(r.trials) - len(r.candidate_configs()) == 8
        assert all(c not in r.candidate_configs() for c in tutorial) and not r.aliases
    for r in records.values():  # the tutorial finds all of its 8 configs, and they ran
        trials = [recorded_measure(r)(c) for c in tutorial]
        assert all(t.ok for t in trials), r.shape

    def picks_all_it_is_offered(shape, candidates, measure, budget, profile):
        assert set(candidates) == set(legal_configs(GEMM_SPACE, shape, profile).configs)
        return measure(candidates[:budget])

    for r in records.values():
        score = replay_shape(r, picks_all_it_is_offered, 5, PROFILE).score
        # 16x8x4096 has no legal config in the space (a 16x16 tile is too small for 4 warps): only the
        # tutorial's configs ran there, and a strategy over the space has nothing to pick.
        assert score > 0 if r.candidate_configs() else str(r.shape) == str(SHAPES[1])


ILLEGAL = "run failed: AcceleratorError: CUDA error: an illegal memory access was encountered"


class DeadContext(FakeMeasurer):
    """Running `culprit` on `victim` kills the fake CUDA context: ContextLost then, and on every later
    call of this process (a dead context stays dead)."""

    def __init__(self, victim, culprit):
        super().__init__()
        self.victim, self.culprit, self.dead = victim, culprit, False

    def measure(self, shape, configs, compiled):
        if self.dead or (shape == self.victim and self.culprit in configs):
            self.dead = True
            raise ContextLost(self.culprit, ILLEGAL)
        return super().measure(shape, configs, compiled)


def test_a_config_that_kills_the_context_is_quarantined_and_its_shape_completes_next_run(tmp_path):
    victim = SHAPES[2]
    space = legal_configs(GEMM_SPACE, victim, PROFILE).configs
    culprit = space[5]
    with pytest.raises(ContextQuarantined, match="killed the CUDA context") as stop:
        run_sweep(SHAPES, tmp_path, DeadContext(victim, culprit), PROFILE)
    assert shape_id(victim) in str(stop.value) and str(culprit) in str(stop.value)
    assert read_quarantine(tmp_path) == {shape_id(victim): {culprit: ILLEGAL}}
    assert shape_id(victim) not in finished_ids(tmp_path)
    before = {p.name: p.read_bytes() for p in shape_files(tmp_path)}
    again = DeadContext(victim, culprit)  # the config still kills the context: it must not run
    summary = run_sweep(SHAPES, tmp_path, again, PROFILE)
    assert summary.remaining == 0 and not again.dead and summary.done == len(SHAPES) - len(before)
    rows = {str(r.shape): r for r in map(read_shape, shape_files(tmp_path))}
    result = rows[str(victim)]
    assert [r.config for r in result.trials] == space + gemm_baseline_extras(victim, space)
    row = next(r for r in result.trials if r.config == culprit)
    assert row.error == QUARANTINED and row.time_us is None and row.in_space
    assert result.meta["quarantined"] == 1 and result.meta["legal_configs"] == len(space)
    assert sum(r.error == QUARANTINED for res in rows.values() for r in res.trials) == 1
    assert all(p.read_bytes() == before[p.name] for p in shape_files(tmp_path) if p.name in before)


def test_a_context_lost_under_no_single_config_quarantines_nothing(tmp_path):
    """The baseline, or an interleaved round of many, killed the context: no config can be left out
    next time, so the run stops with ContextLostUnattributed (a rerun would repeat it), not exit-3's
    ContextQuarantined."""
    from rooftune.eval.sweeping.quarantine import ContextLostUnattributed

    victim = SHAPES[2]

    class BaselineKills(DeadContext):
        def measure(self, shape, configs, compiled):
            if shape == self.victim:
                raise ContextLost(self.culprit, ILLEGAL)
            return FakeMeasurer.measure(self, shape, configs, compiled)

    with pytest.raises(ContextLostUnattributed, match="nothing is quarantined") as stop:
        run_sweep(SHAPES, tmp_path, BaselineKills(victim, "cublas"), PROFILE)
    assert shape_id(victim) in str(stop.value) and read_quarantine(tmp_path) == {}


def test_the_gpu_check_stops_at_the_config_that_killed_the_context(monkeypatch):
    from rooftune.kernels.harness import check, context
    from rooftune.kernels.harness.measure import gemm_measurer

    shape = SHAPES[2]
    configs = legal_configs(GEMM_SPACE, shape, PROFILE).configs[:4]
    ran, dead = [], []

    def fake_check(config, *args):  # configs[0] is wrong but harmless; configs[1] faults
        ran.append(config)
        if config == configs[1]:
            dead.append(config)
        return {configs[0]: "reference check failed: rel err 1 > 0.01", configs[1]: ILLEGAL}.get(config)

    monkeypatch.setattr(check, "check_gemm", fake_check)
    monkeypatch.setattr(context, "context_error", lambda device="cuda": "AcceleratorError: illegal" if dead else None)
    measurer = gemm_measurer(PROFILE, device="cpu", workers=0)
    compiled = {c: 0.1 for c in configs}
    with pytest.raises(ContextLost) as lost:
        measurer._check(shape, configs, compiled)
    assert lost.value.culprit == configs[1] and lost.value.reason == ILLEGAL and ran == configs[:2]
    dead.clear()
    ran.clear()
    errors = measurer._check(shape, [configs[0], *configs[2:]], compiled)
    assert errors == {configs[0]: "check: reference check failed: rel err 1 > 0.01"} and len(ran) == 3


def test_the_gpu_measurer_keeps_one_pool_and_bounds_each_batch(monkeypatch):
    from rooftune.kernels.harness.measure import gemm_measurer

    class FakePool:
        workers, closed, timeouts = 16, False, []

        def compile(self, jobs, timeout_s=None):
            self.timeouts.append(timeout_s)
            return {c: 0.1 for _, c in jobs}

        def close(self, kill=False):
            self.closed = True

    with gemm_measurer(PROFILE, device="cpu") as measurer:
        measurer.pool = pool = FakePool()
        jobs = [(SHAPES[0], c) for c in legal_configs(GEMM_SPACE, SHAPES[0], PROFILE).configs[:32]]
        measurer.compile(jobs)
        measurer.compile(jobs, timeout_s=30.0)  # the sweep's budget is sooner
    assert pool.timeouts == [60.0 + 2.0 * 32 / 16, 30.0] and pool.closed


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_time_budget_stops_before_a_shape_that_would_not_finish(tmp_path):
    clock = Clock()
    fake = FakeMeasurer(clock=clock, shape_s=100.0)
    summary = run_sweep(SHAPES, tmp_path, fake, PROFILE, max_minutes=5, now=clock,
                        first_shape_s=100.0, compile_s_per_config=0.0)
    # 100 s per shape, estimated at 125 s: shapes start at 0, 100 and 200 s; the 4th would end ~425 s
    assert summary.done == 2 and summary.stopped_early and summary.remaining == 3
    assert len(finished_ids(tmp_path)) == 2
    assert clock.t <= 300



class BatchClock:
    """Shapes named by (group, index); compiling a batch costs `start_s` plus `per_config_s` per config
    of the fake clock (a pool starting up, then the compiles), measuring a shape `shape_s`."""

    def __init__(self, clock, start_s, per_config_s, shape_s):
        self.clock, self.start_s, self.per_config_s, self.shape_s = clock, start_s, per_config_s, shape_s
        self.batches, self.measured, self.timeouts = [], [], []

    def group_key(self, shape):
        return shape[0]

    def compile(self, jobs, timeout_s=None):
        self.batches.append(len(jobs))
        self.timeouts.append(timeout_s)
        self.clock.t += self.start_s + self.per_config_s * len(jobs)
        return {c: 0.1 for _, c in jobs}

    def work(self, shape, compiled):
        self.measured.append(shape)
        self.clock.t += self.shape_s


def _run(configs: dict, fake, clock, max_minutes, **kw):
    from rooftune.eval.sweeping.sweep import SilentReporter, run_shapes

    return run_shapes(list(configs), configs.__getitem__, fake, fake.work, started=clock.t,
                      max_minutes=max_minutes, lookahead=kw.get("lookahead", 8), reporter=SilentReporter(),
                      now=clock, first_shape_s=10.0, compile_s_per_config=kw.get("compile_s_per_config", 0.05))


def test_time_budget_counts_the_lookahead_compiles_and_shrinks_the_batch_to_fit():
    # A decode shape (100 configs) before a prefill shape of its group (2000 more): the first batch
    # would compile all 2100 (105 s) though the shape itself needs 5 s of them.
    clock = Clock()
    fake = BatchClock(clock, start_s=0.0, per_config_s=0.05, shape_s=10.0)
    configs = {("a", 0): list(range(100)), ("a", 1): list(range(2100))}
    assert _run(configs, fake, clock, max_minutes=1.0) == (1, True)
    assert fake.batches == [100] and clock.t == 15.0
    assert fake.timeouts == [60.0]  # a batch may take at most the budget's time left


def test_time_budget_rate_is_not_set_by_one_small_batch():
    # Group a compiles 1000 configs, then 4 more (5 s of pool start-up each batch); group b's 1000
    # configs take 25 s, not 4 x 1.27 s per config.
    clock = Clock()
    fake = BatchClock(clock, start_s=5.0, per_config_s=0.02, shape_s=10.0)
    configs = {("a", 0): list(range(1000)), ("a", 1): list(range(1004)), ("b", 0): list(range(1000))}
    assert _run(configs, fake, clock, max_minutes=100 / 60, lookahead=0) == (3, False)
    assert fake.batches == [1000, 4, 1000] and clock.t <= 100

def test_time_budget_scales_the_next_shape_by_its_cost():
    # Three shapes of 10, 10 and 60 s, each taking 1 s per unit of cost: after the first two (20 s of a 60 s budget)
    # the mean (10 s × 1.25) would start the 60-s shape; its cost says it cannot finish.
    from rooftune.eval.sweeping.sweep import COST_MARGIN, SilentReporter, run_shapes, shape_estimate_s

    clock = Clock()
    seconds = {("a", 0): 10.0, ("a", 1): 10.0, ("a", 2): 60.0}

    class Fake(BatchClock):
        def work(self, shape, compiled):
            self.measured.append(shape)
            self.clock.t += seconds[shape]

    fake = Fake(clock, start_s=0.0, per_config_s=0.0, shape_s=None)
    done = run_shapes(list(seconds), lambda s: [1], fake, fake.work, started=clock.t, max_minutes=1.0, lookahead=0,
                      reporter=SilentReporter(), now=clock, first_shape_s=10.0, compile_s_per_config=0.0,
                      cost=seconds.__getitem__)
    assert done == (2, True) and clock.t == 20.0
    # without costs, the mean; before any shape, the first shape's guess
    assert shape_estimate_s([10.0, 30.0], [], None, 5.0) == 25.0 and shape_estimate_s([], [], 3.0, 5.0) == 5.0
    assert shape_estimate_s([10.0, 30.0], [1.0, 3.0], 2.0, 5.0) == COST_MARGIN * 20.0


def test_time_budget_passes_over_a_costly_shape_for_cheaper_ones_that_fit():
    # 10, 60, 10 and 10 s in a 60 s budget: after the first, the 60-s shape cannot finish (90 s with the margin);
    # the two 10-s shapes after it still fit, and the sweep says shapes were left.
    from rooftune.eval.sweeping.sweep import SilentReporter, run_shapes

    clock = Clock()
    seconds = {("a", 0): 10.0, ("a", 1): 60.0, ("a", 2): 10.0, ("a", 3): 10.0}

    class Fake(BatchClock):
        def work(self, shape, compiled):
            self.measured.append(shape)
            self.clock.t += seconds[shape]

    def run(fake, cost):
        return run_shapes(list(seconds), lambda s: [1], fake, fake.work, started=clock.t, max_minutes=1.0,
                          lookahead=0, reporter=SilentReporter(), now=clock, first_shape_s=10.0,
                          compile_s_per_config=0.0, cost=cost)

    fake = Fake(clock, start_s=0.0, per_config_s=0.0, shape_s=None)
    assert run(fake, seconds.__getitem__) == (3, True)
    assert fake.measured == [("a", 0), ("a", 2), ("a", 3)] and clock.t == 30.0
    # without costs every shape's estimate is the mean: the sweep stops at the first that does not fit
    clock.t = 0.0
    seconds[("a", 0)] = 50.0
    fake = Fake(clock, start_s=0.0, per_config_s=0.0, shape_s=None)
    assert run(fake, None) == (1, True) and fake.measured == [("a", 0)]


def test_load_shapes_reads_and_rejects(tmp_path):
    good = tmp_path / "good.json"
    good.write_text(json.dumps([{"m": 1, "n": 2, "k": 3}, {"m": 4, "n": 5, "k": 6, "layout": "nk", "why": "x"}]))
    assert load_shapes(good) == [GemmShape(1, 2, 3), GemmShape(4, 5, 6, "nk")]
    cases = {"[]": "non-empty JSON list", "{": "not valid JSON", '[{"m": 1, "n": 2}]': "entry 0",
             '[{"m": 1, "n": 2, "k": 0}]': "k must be >= 1", '[{"m": 1, "n": 2, "k": 3, "layout": "x"}]': "layout"}
    for text, message in cases.items():
        bad = tmp_path / "bad.json"
        bad.write_text(text)
        with pytest.raises(ShapeListError, match=message):
            load_shapes(bad)
    with pytest.raises(ShapeListError, match="no such file"):
        load_shapes(tmp_path / "absent.json")


def test_repeatability_of_two_passes():
    first = {"a": 100.0, "b": 110.0, "c": 150.0}
    same = repeatability(first, dict(first))
    assert same["abs_median"] == 0 and same["ratio_p90"] == 0 and same["best_within_1pct"]
    drift = repeatability(first, {k: v * 1.1 for k, v in first.items()})  # uniform drift: ratios agree
    assert drift["abs_median"] == pytest.approx(0.1) and drift["ratio_median"] == pytest.approx(0)
    swap = repeatability(first, {"a": 112.0, "b": 100.0, "c": 150.0})
    assert not swap["best_within_1pct"]
    assert repeatability({"a": 1.0}, {"a": 1.0}) == {}


@pytest.mark.gpu
def test_gpu_sweep_end_to_end(tmp_path):
    from rooftune.eval.sweeping.sweep import sweep_gemm

    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps([{"m": 16, "n": 256, "k": 256, "layout": "nk"}, {"m": 64, "n": 256, "k": 512}]))
    summary = sweep_gemm(shapes, tmp_path / "d", PROFILE, workers=8)
    assert summary.done == 2
    for r in read_dataset(tmp_path / "d"):
        assert r.best_us and r.baselines_us["cublas"] > 0
        assert r.meta["repeatability"] and len(r.meta["retime_us"]) == 10
    assert read_manifest(tmp_path / "d")["device"]["torch"]


def test_a_sweep_part_starts_its_compile_workers_before_cuda_and_measures_with_them(tmp_path, monkeypatch):
    # The worker's compile pool (offline for the GPU's capability: kernels/harness/compile_pool.py gpu_pool) starts before
    # torch and the CUDA context load in the worker, and the measurer compiles with that same pool.
    import contextlib

    from rooftune.eval.sweeping import sweep
    from rooftune.hwprofiles import hwprobe
    from rooftune.kernels.harness import compile_pool as compile_module
    from rooftune.kernels.harness.compile_pool import CompilePool

    order, seen = [], {}

    def fake_gpu_pool(module, workers=None):
        order.append(("pool", module, workers))
        return CompilePool(lambda *a: 0.0, workers=0)

    def fake_measurer(kernel, profile, settings, **kwargs):
        seen.update(kwargs)
        return contextlib.nullcontext("measurer")

    def fake_run_sweep(shapes, out, measurer, profile, **kwargs):
        order.append(("sweep", measurer, kwargs["device"]))
        return "summary"

    monkeypatch.setattr(compile_module, "gpu_pool", fake_gpu_pool)
    monkeypatch.setattr(hwprobe, "require_cuda", lambda: order.append(("cuda",)))
    monkeypatch.setattr(hwprobe, "sm_partition", lambda sms: contextlib.nullcontext())
    monkeypatch.setattr(hwprobe, "device_label", lambda: "gpu 0: fake")
    monkeypatch.setattr(sweep, "describe_device", lambda settings, sms, baseline: {"sms": sms})
    monkeypatch.setattr(sweep, "kernel_measurer", fake_measurer)
    monkeypatch.setattr(sweep, "run_sweep", fake_run_sweep)
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps([{"m": 16, "n": 256, "k": 256}]))
    result = sweep._sweep_part("gemm", [GemmShape(16, 256, 256)], None, shapes_path=shapes, listed=1, out=tmp_path / "d",
                               profile=PROFILE, sms=None, max_minutes=None, workers=6, settings=sweep.SweepSettings())
    assert result == "summary"
    assert order == [("pool", "rooftune.kernels.gemm", 6), ("cuda",), ("sweep", "measurer", "gpu 0: fake")]
    assert isinstance(seen["pool"], CompilePool) and seen["all_baselines"] is True
