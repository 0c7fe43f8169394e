"""scripts/device/suite_sweep.py on the CPU: the plan and its resume, the budget, the table, the GPU check, the
manifest's kernel entries, and one shape measured whole in Triton's interpreter with a fake compile pool and a fake
timer (each config's counts read from its IR, its trials, errors, pooling and file); importing the script loads
neither torch nor Triton."""

import dataclasses
from types import SimpleNamespace

import pytest
import torch
from script_module import gpu_stack_after_import, load_script

from rooftune.candidates import Config, Trial
from rooftune.candidates.kernel_counts import CompiledFacts, KernelCounts
from rooftune.candidates.records import ShapeRecords
from rooftune.eval.datasets.suite import SuiteRecords, SuiteShape, finished, read_shape, write_shape
from rooftune.hwprofiles import is_profile_of, load_profile
from rooftune.kernels.harness.measure import SweepSettings
from rooftune.kernels.harness.timing import Timing

ss = load_script("scripts/device/suite_sweep.py")
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


def records(shape: SuiteShape, times=(5.0, 3.0), base: float | None = 6.0) -> SuiteRecords:
    trials = tuple(Trial(Config.make(4, 3, BLOCK_M=2 ** i), t) for i, t in enumerate(times))
    return SuiteRecords(ShapeRecords(shape, trials, baselines_us={"torch": base} if base else {}), (None,) * len(times))


def test_importing_the_script_loads_no_gpu_stack():
    assert gpu_stack_after_import("scripts/device/suite_sweep.py") == (False, False)


def test_the_plan_takes_the_split_in_registry_order_and_leaves_out_what_is_done():
    kernels = {"b": [{"M": 1}, {"M": 2}], "a": [{"M": 3}], "c": [{"M": 4}]}
    split = {"a": "train", "b": "train", "c": "heldout"}
    ids = [(s.kernel, s.id) for s in ss.plan(kernels, split, ("train", "heldout"), None, {("b", "M1")})]
    assert ids == [("b", "M2"), ("a", "M3"), ("c", "M4")]
    assert [s.kernel for s in ss.plan(kernels, split, ("heldout",), None, set())] == ["c"]
    assert [s.id for s in ss.plan(kernels, split, ("train",), {"b"}, set())] == ["M1", "M2"]


def test_a_sweep_writes_each_shape_stops_in_time_and_a_rerun_resumes(tmp_path):
    jobs = [SuiteShape.of("k1", {"M": m}) for m in (1, 2, 3)] + [SuiteShape.of("k2", {"M": 1})]
    now = [0.0]
    took = {"k1": 100.0, "k2": 30.0}

    def measure(shape):
        now[0] += took[shape.kernel]
        return records(shape)

    # 250 s: k1's first shape needs FIRST_SHAPE_S (120), the next ones 100 each: two fit, then k2's first shape
    # needs the longest first shape so far (100) and 50 s are left
    rows = ss.sweep(jobs, measure, tmp_path, 250, clock=lambda: now[0], log=lambda _: None)
    assert [r["status"] for r in rows[:2]] == ["2/2 ok", "2/2 ok"]
    assert all(r["status"].startswith("not started") for r in rows[2:])
    assert finished(tmp_path) == {("k1", "M1"), ("k1", "M2")}
    rest = ss.plan({"k1": [{"M": 1}, {"M": 2}, {"M": 3}], "k2": [{"M": 1}]}, {"k1": "train", "k2": "train"},
                   ("train",), None, finished(tmp_path))
    assert [(s.kernel, s.id) for s in rest] == [("k1", "M3"), ("k2", "M1")]
    rows = ss.sweep(rest, measure, tmp_path, 1000, clock=lambda: now[0], log=lambda _: None)
    assert len(finished(tmp_path)) == 4 and rows[1]["best_us"] == 3.0 and rows[1]["torch_over_best"] == 2.0


def test_the_table_names_every_shape_and_why_one_did_not_start():
    shape = SuiteShape.of("softmax", {"M": 4096, "N": 4096})
    rows = [ss.summary(records(shape).records), ss.summary(records(shape, times=(), base=None).records),
            {"kernel": "argmax", "shape": "M1-N1", "status": "not started: 3 s left, ~40 s needed"}]
    text = ss.table(rows)
    assert "softmax" in text and "3.00" in text and "2.00" in text and "0/0 ok" in text
    assert text.splitlines()[-1].endswith("not started: 3 s left, ~40 s needed")


def test_the_gpu_must_be_the_profiles():
    """The sweep's check is the CLI's (`is_profile_of`)."""
    h100 = load_profile("h100_sxm")
    partition = dataclasses.replace(h100, name="NVIDIA H200 (66 SMs)", meta={"gpu": "NVIDIA H200"})
    assert is_profile_of(h100, "NVIDIA H100 80GB HBM3")
    assert not is_profile_of(h100, "NVIDIA H200")
    assert is_profile_of(partition, "NVIDIA H200")


def test_the_manifest_lists_each_kernel_swept_with_its_split():
    from rooftune.kernels.suite import SUITE, suite_split

    jobs = ss.plan({n: k.shapes for n, k in SUITE.items()}, suite_split(), ("heldout",), {"softmax", "argmax"}, set())
    entries = ss.kernel_entries(SUITE, suite_split(), jobs)
    assert entries == {n: {"split": "heldout", "kind": "memory", "shapes": len(SUITE[n].shapes),
                           "configs": len(SUITE[n].configs)} for n in ("softmax", "argmax")}


FACTS = CompiledFacts(num_warps=4, num_stages=3, regs_per_thread=40, smem_bytes=0)


class FakePool:
    """Compiles nothing: every lowered config gets the same compiled facts, or the error named for its index."""

    workers = 1

    def __init__(self, errors=None):
        self.errors, self.jobs = errors or {}, []

    def compile(self, jobs, timeout_s=None):
        self.jobs += jobs
        return {i: self.errors.get(i, FACTS) for _, i in jobs}

    def stream(self):
        """CompilePool.stream's interface: the jobs added, compiled as one batch by `results`."""
        jobs: list = []
        return SimpleNamespace(started_at=None, add=lambda job, i: jobs.append((job, i)),
                               results=lambda timeout_s=None: self.compile(jobs, timeout_s))


def fake_time_candidates(launchers, *, rounds=7, seed=0, **_):
    """Runs each launcher once (they must work) and times config i at 10 + i µs, the baseline at 40 µs."""
    for launch in launchers.values():
        launch(0)
    out = {}
    for key in launchers:
        us = 40.0 if key == "torch" else 10.0 + key
        out[key] = Timing(us, rounds, 0.0, times_us=(us,) * rounds, clock_mhz_min=1755.0, clock_mhz_max=1980.0)
    return out


def test_one_shape_is_measured_whole_in_the_interpreter(monkeypatch, tmp_path):
    """rmsnorm_fwd at its small shape in fp16: config 3 fails to compile, configs with BLOCK_M 2 launch too few
    programs (the reference check fails), one config is quarantined; the rest are timed, the fastest ten in the
    final passes; every config that compiled has its counts, read from its IR on the call, and the record goes to
    disk and back unchanged."""
    from rooftune.kernels import suite
    from rooftune.kernels.harness import timing
    from rooftune.kernels.suite.record import config_of

    kernel = suite.SUITE["rmsnorm_fwd"]
    def fp16_args(shape, device, dtype=None, seed=0):
        return kernel.make_args(shape, device, torch.float16, seed)

    fp16 = dataclasses.replace(kernel, make_args=fp16_args,
                               grid=lambda a, m: (1,) if m["BLOCK_M"] == 2 else kernel.grid(a, m))
    monkeypatch.setattr(timing, "time_candidates", fake_time_candidates)
    shape = SuiteShape.of(kernel.name, kernel.small_shape)
    quarantined = str(config_of(kernel.configs[5]))
    profile = SimpleNamespace(l2_bytes=1, compute_capability=(9, 0))
    measured = ss.measure_shape(fp16, shape, profile, FakePool({3: "OutOfResources: shared memory"}), SweepSettings(),
                                [quarantined], {"split": "train"}, device="cpu")
    rec = measured.records
    errors = {i: t.error for i, t in enumerate(rec.trials) if not t.ok}
    assert errors[3].startswith("compile: OutOfResources") and errors[5].startswith("quarantined")
    assert {i for i, e in errors.items() if e.startswith("check: reference check failed")} == \
        {i for i, c in enumerate(kernel.configs) if c.kwargs["BLOCK_M"] == 2}
    timed = [(i, t) for i, t in enumerate(rec.trials) if t.ok]
    assert all(t.time_us == 10.0 + i and t.compile_s > 0 for i, t in timed)
    assert [i for i, t in timed if t.retime_us is not None] == [i for i, _ in timed][:10]
    assert rec.baselines_us == {"torch": 40.0} and rec.meta["split"] == "train" and rec.meta["screen_scale"] == 1.0
    assert rec.meta["flops"] == kernel.flops(kernel.small_shape) and rec.meta["clock_mhz_min"] == 1755.0
    assert [str(c) for c in (t.config for t in rec.trials)] == [str(config_of(c)) for c in kernel.configs]
    assert measured.counts[3] is None
    assert all(isinstance(c, KernelCounts) for i, c in enumerate(measured.counts) if i != 3)
    rows, block_n = kernel.small_shape["M"], 128  # next_power_of_2(N = 100)
    for config, counts in zip(kernel.configs, measured.counts):
        if counts is not None:
            block_m = config.kwargs["BLOCK_M"]
            programs = 1 if block_m == 2 else -(-rows // block_m)
            x = next(t for t in counts.tensors if t.name == "x")
            assert counts.programs == programs and counts.compiled == FACTS
            assert x.load_bytes == programs * block_m * block_n * 2  # fp16 tiles, a masked one counted whole
    assert read_shape(write_shape(tmp_path, measured)) == measured


def test_a_measured_shape_round_trips_through_its_file(tmp_path):
    shape = SuiteShape.of("softmax", {"M": 3, "N": 5})
    rec = records(shape)
    assert read_shape(write_shape(tmp_path, rec)) == rec


def test_a_context_loss_is_quarantined_by_config_or_shape():
    from rooftune.kernels.suite import SUITE
    from rooftune.kernels.suite.record import config_of

    kernel = SUITE["splitk_gemm"]
    assert ss.culprit_text(kernel, 4) == str(config_of(kernel.configs[4]))
    assert ss.culprit_text(kernel, "one of 73 candidates in an interleaved round") == "*"


def test_a_real_compile_gives_the_binarys_facts_and_a_wrong_result_is_an_error_row(monkeypatch, tmp_path):
    """Two softmax configs compiled for sm_90 in this process (Triton's bundled ptxas, the pool's in-process path):
    each config's counts carry what the compiler decided; a reference that disagrees makes every row an error, never
    a time, and the counts stay."""
    from rooftune.kernels import suite
    from rooftune.kernels.harness import timing
    from rooftune.kernels.harness.compile_pool import CompilePool
    from rooftune.kernels.introspect.binary import compile_job

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    monkeypatch.setattr(timing, "time_candidates", fake_time_candidates)
    kernel = suite.SUITE["softmax"]
    wrong = dataclasses.replace(kernel, configs=kernel.configs[:2], baseline=None,
                                make_args=lambda s, d, dtype=None, seed=0: kernel.make_args(s, d, torch.float32, seed),
                                reference=lambda args: {n: v + 1 for n, v in kernel.reference(args).items()})
    profile = SimpleNamespace(l2_bytes=1, compute_capability=(9, 0))
    measured = ss.measure_shape(wrong, SuiteShape.of(kernel.name, kernel.small_shape), profile,
                                CompilePool(compile_job, workers=0), SweepSettings(), [], {}, device="cpu")
    assert all(t.error.startswith("check: reference check failed") for t in measured.records.trials)
    assert [c.compiled.num_warps for c in measured.counts] == [c.num_warps for c in kernel.configs[:2]]
    assert all(c.compiled.regs_per_thread > 0 and c.programs > 0 for c in measured.counts)
