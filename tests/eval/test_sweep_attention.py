"""The attention sweep: the GEMM sweep's orchestration with the attention kernel and a fake measurer (every
legal config recorded, resume, failures as rows, quarantine), the attention bench on the CPU (Triton
interpreter), and on the GPU end to end."""

import json
from dataclasses import replace

import pytest
from fakes import Killed

from rooftune.candidates import ATTENTION_SPACE, KERNELS, AttentionShape, legal_configs
from rooftune.eval.datasets.format import (
    DatasetError,
    ShapeRecords,
    Trial,
    finished_ids,
    read_dataset,
    read_manifest,
    read_shape,
    shape_files,
    shape_id,
    write_shape,
)
from rooftune.eval.sweeping.quarantine import QUARANTINED, ContextQuarantined, read_quarantine
from rooftune.eval.sweeping.sweep import run_sweep
from rooftune.hwprofiles import load_profile
from rooftune.kernels.harness.context import ContextLost
from rooftune.kernels.harness.measure import ROUTE_UNTIMED

PROFILE = load_profile("h200")
SHAPES = [AttentionShape(1, 2, 64, 64), AttentionShape(2, 8, 1024, 128), AttentionShape(1, 2, 100, 32, causal=False),
          AttentionShape(4, 32, 4096, 128), AttentionShape(1, 4, 777, 64, causal=False, dtype="fp16")]
ILLEGAL = "run failed: AcceleratorError: CUDA error: an illegal memory access was encountered"


class FakeAttention:
    """Compiles all but the 5-stage BLOCK_M=256 configs; times a config from its parameters. Dies (Killed)
    on the `die_at`-th shape; running `culprit` on `victim` kills the fake CUDA context for good."""

    def __init__(self, die_at=None, victim=None, culprit=None):
        self.die_at, self.victim, self.culprit, self.dead = die_at, victim, culprit, False
        self.measured, self.compiled = [], []

    def group_key(self, shape):
        return (shape.dtype, shape.head_dim, shape.causal)

    def compile(self, jobs, timeout_s=None):
        self.compiled.extend((self.group_key(s), c) for s, c in jobs)
        return {c: "OutOfResources" if c["BLOCK_M"] == 128 and c["num_stages"] == 4 else 0.2 for _, c in jobs}

    def measure(self, shape, configs, compiled):
        if self.dead or (shape == self.victim and self.culprit in configs):
            self.dead = True
            raise ContextLost(self.culprit, ILLEGAL)
        if self.die_at is not None and len(self.measured) == self.die_at:
            raise Killed
        self.measured.append(shape)
        rows = tuple(Trial(c, None, f"compile: {compiled[c]}") if isinstance(compiled[c], str)
                     else Trial(c, float(c["BLOCK_M"] + c["BLOCK_N"] + c["ORDER"]), None, compiled[c], 7)
                     for c in configs)
        return ShapeRecords(shape, rows, {"sdpa": 50.0}, {"sdpa_first_us": 51.0})


def _sweep(out, measurer, shapes=SHAPES):
    return run_sweep(shapes, out, measurer, PROFILE, kernel=KERNELS["attention"])


def test_every_legal_config_is_recorded_and_a_resume_loses_nothing(tmp_path):
    with pytest.raises(Killed):
        _sweep(tmp_path, FakeAttention(die_at=2))
    first = {p.name: p.read_bytes() for p in shape_files(tmp_path)}
    assert len(first) == 2 and all(n.endswith(("-causal-bf16.csv.xz", "-full-bf16.csv.xz")) for n in first)
    again = FakeAttention()
    summary = _sweep(tmp_path, again, SHAPES + SHAPES[:1])  # a duplicate entry is swept once
    assert (summary.done, summary.skipped, summary.remaining) == (3, 2, 0)
    assert {f"{shape_id(s)}.csv.xz" for s in again.measured}.isdisjoint(first)
    assert all((tmp_path / "shapes" / name).read_bytes() == data for name, data in first.items())
    assert len(again.compiled) == len(set(again.compiled))  # each config compiled once per group
    for path in shape_files(tmp_path):
        result = read_shape(path)
        space = legal_configs(ATTENTION_SPACE, result.shape, PROFILE).configs
        assert space and [r.config for r in result.trials] == space and all(r.in_space for r in result.trials)
        assert result.meta["legal_configs"] == len(space) and result.meta["baseline_configs"] == 0
        failed = [r for r in result.trials if r.error]
        assert all(r.error == "compile: OutOfResources" and r.time_us is None for r in failed)
        assert len(failed) == sum(c["BLOCK_M"] == 128 and c["num_stages"] == 4 for c in space)
        assert result.baselines_us == {"sdpa": 50.0}
    assert sum(bool(r.error) for p in shape_files(tmp_path) for r in read_shape(p).trials) > 0
    records = read_dataset(tmp_path)
    assert {r.shape for r in records} == set(SHAPES) and len(records) == len(SHAPES)
    assert all(r.candidates is None and r.aliases == {} for r in records)
    manifest = read_manifest(tmp_path)
    assert manifest["kernel"] == "attention" and manifest["space_version"] == ATTENTION_SPACE.version
    assert manifest["shapes_done"] == 5
    third = FakeAttention()
    assert _sweep(tmp_path, third).done == 0 and not third.measured


def test_an_attention_dataset_does_not_take_gemm_shapes_or_mix_with_a_gemm_one(tmp_path):
    from rooftune.candidates import GemmShape

    _sweep(tmp_path, FakeAttention(), SHAPES[:1])
    with pytest.raises(DatasetError, match="kernel: 'attention' there, 'gemm' now"):
        run_sweep([GemmShape(1, 64, 64)], tmp_path, FakeAttention(), PROFILE)


def test_a_config_that_kills_the_context_is_quarantined_and_the_shape_completes_next_run(tmp_path):
    victim = SHAPES[2]
    space = legal_configs(ATTENTION_SPACE, victim, PROFILE).configs
    culprit = space[3]
    with pytest.raises(ContextQuarantined, match="killed the CUDA context"):
        _sweep(tmp_path, FakeAttention(victim=victim, culprit=culprit))
    assert read_quarantine(tmp_path) == {shape_id(victim): {culprit: ILLEGAL}}
    assert shape_id(victim) not in finished_ids(tmp_path)
    again = FakeAttention(victim=victim, culprit=culprit)
    assert _sweep(tmp_path, again).remaining == 0 and not again.dead
    result = read_shape(tmp_path / "shapes" / f"{shape_id(victim)}.csv.xz")
    assert [r.config for r in result.trials] == space
    row = next(r for r in result.trials if r.config == culprit)
    assert row.error == QUARANTINED and row.time_us is None and result.meta["quarantined"] == 1


@pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")  # the interpreter
def test_the_attention_bench_runs_the_kernel_and_sdpa_alike_on_the_cpu():
    import torch

    from rooftune.kernels.harness.measure import attention_measurer

    shape = AttentionShape(1, 2, 40, 16, causal=False, dtype="fp16")
    config, bad = legal_configs(ATTENTION_SPACE, shape, PROFILE).configs[:2]
    with attention_measurer(PROFILE, device="cpu", workers=0) as measurer:
        bench = measurer.bench
        assert bench.bytes_per_set(shape) == 3 * 2 * 2 * 40 * 16 and measurer.baseline == "sdpa"
        assert measurer.group_key(shape) == measurer.group_key(AttentionShape(8, 4, 4000, 16, causal=False,
                                                                              dtype="fp16"))
        compiled = {config: 0.1, bad: "OutOfResources"}
        assert measurer._check(shape, [config, bad], compiled) == {bad: "compile: OutOfResources"}
        launchers, sets, bases, absent = measurer._launchers(shape, [config], {})
        routes = {"sdpa:cudnn", "sdpa:flash", "sdpa:efficient"}
        assert {config, "sdpa"} <= set(launchers) and sets >= 1  # a sweep times every backend that runs
        assert bases[0] == "sdpa" and set(bases) == set(launchers) - {config}
        assert set(launchers) - {config, "sdpa"} | set(absent) == routes and "sdpa:cudnn" in absent  # no cuDNN on a CPU
        for key in set(launchers) - {config, "sdpa"}:
            launchers[key](0)
        inputs = bench.inputs(shape, "cpu", measurer._seed(shape, 100))
        out = bench.output(shape, "cpu")
        bench.launcher(config, shape, [inputs], out)(0)
        expected = bench.baseline(shape, [inputs], out)(0)
        assert torch.allclose(out.float(), expected.float(), atol=2e-3, rtol=2e-2)


def test_the_kernel_comes_from_the_measurer_and_a_mismatch_is_refused(tmp_path):

    class Knows(FakeAttention):
        kernel = KERNELS["attention"]

    run_sweep(SHAPES[:1], tmp_path / "a", Knows(), PROFILE)  # no kernel=: the measurer's, not GEMM's
    assert read_manifest(tmp_path / "a")["kernel"] == "attention"
    with pytest.raises(ValueError, match="kernel 'gemm' given for a measurer of 'attention'"):
        run_sweep(SHAPES[:1], tmp_path / "b", Knows(), PROFILE, kernel=KERNELS["gemm"])


@pytest.mark.gpu
def test_gpu_attention_sweep_end_to_end(tmp_path):
    from rooftune.eval.sweeping.backfill import backfill_attention_routes
    from rooftune.eval.sweeping.sweep import sweep_attention

    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps([{"batch": 1, "heads": 2, "seq": 64, "head_dim": 64},
                                  {"batch": 1, "heads": 2, "seq": 100, "head_dim": 32, "causal": False}]))
    summary = sweep_attention(shapes, tmp_path / "d", PROFILE, workers=4)
    assert summary.done == 2 and summary.remaining == 0
    for path in shape_files(tmp_path / "d"):
        result = read_shape(path)
        space = legal_configs(ATTENTION_SPACE, result.shape, PROFILE).configs
        assert [r.config for r in result.trials] == space
        assert all((r.time_us is None) != (r.error is None) for r in result.trials)
        # the kernel's first GPU run: every legal config compiles (legality holds), passes the
        # reference check and runs; nothing may fail but a compile out of resources
        failed = [r.error for r in result.trials if r.error and "OutOfResources" not in r.error]
        assert not failed, failed[:3]
        assert result.baselines_us["sdpa"] > 0 and result.meta["sdpa_first_us"] > 0
        assert result.meta["repeatability"] and result.meta["space_version"] == ATTENTION_SPACE.version
        # every SDPA backend that runs the shape is timed in the final passes
        assert ROUTE_UNTIMED not in result.meta.get("baseline_errors", {}).values(), result.meta
        assert len(result.baselines_us) + len(result.meta.get("baseline_errors", {})) == 4
    manifest = read_manifest(tmp_path / "d")
    assert manifest["kernel"] == "attention" and manifest["device"]["torch"] and "SDPA" in manifest["timing"]["method"]

    # the routes backfill, given a shape as older sweeps left it, times the routes it lacks near the sweep's
    path = shape_files(tmp_path / "d")[0]
    swept = read_shape(path)
    routes = [k for k in swept.baselines_us if k != "sdpa"]
    assert routes
    write_shape(tmp_path / "d", replace(
        swept, baselines_us={"sdpa": swept.baselines_us["sdpa"]},
        meta={**swept.meta, "baseline_errors": {**swept.meta.get("baseline_errors", {}),
                                                **dict.fromkeys(routes, ROUTE_UNTIMED)}}))
    assert backfill_attention_routes(shapes, tmp_path / "d", PROFILE).done == 1
    filled = read_shape(path)
    for k in routes:
        assert filled.baselines_us[k] == pytest.approx(swept.baselines_us[k], rel=0.25)
