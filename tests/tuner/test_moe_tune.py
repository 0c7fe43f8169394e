"""`tune moe` on the CPU: each token count's GEMMs through `tune_shape` with a synthetic measurer, the pair pass
of --gemm both, the cache (resumable, no GPU when all is there), vLLM's table file, the CLI."""

import contextlib
import json

import pytest
from typer.testing import CliRunner

from rooftune.candidates import MOE_SPACE, MoeShape, ShapeError, legal_configs
from rooftune.candidates.moe_space import group_twin
from rooftune.eval.scoring.replay import RecordedMeasurer
from rooftune.hwprofiles import load_profile
from rooftune.tuner.cli.app import app
from rooftune.tuner.llm.moe_tables import VLLM_KEYS, read_table
from rooftune.tuner.llm.moe_tune import PAIR_TOP, tune_moe_table

runner = CliRunner()
PROFILE = load_profile("h200")
LAYER = (8, 2, 1024, 512)  # experts, topk, hidden, intermediate: small, so the synthetic records are quick
TOKENS = [1, 16, 256]
BASELINE_US = 50.0


class SyntheticMeasurer:
    """Any shape 'measured' as tests/tuner/conftest.py's synthetic records; torch's time fixed; every batch kept."""

    def __init__(self, synthetic):
        self.synthetic, self.recorded, self.batches = synthetic, {}, []

    def measure(self, shape, configs):
        self.batches.append((shape, list(configs)))
        if shape not in self.recorded:
            self.recorded[shape] = RecordedMeasurer(self.synthetic(shape, PROFILE))
        return self.recorded[shape].measure(shape, configs)

    def baseline_us(self):
        return BASELINE_US

    def measured(self, shape) -> set:
        return {c for s, batch in self.batches if s == shape for c in batch}


@pytest.fixture
def measurer(synthetic):
    return SyntheticMeasurer(synthetic)


def run(measurer, gemm="both", tokens=TOKENS, cache=None, opened=None, budget=20, residual=None, **kw):
    """The table tuned on synthetic records, ranked by the model alone unless `residual` is given (the shipped
    residual is fitted on real timings, which synthetic records are not)."""
    def factory(kernel):
        if opened is not None:
            opened.append(kernel)
        return contextlib.nullcontext(measurer)

    return tune_moe_table(*LAYER, list(tokens), PROFILE, budget, gemm=gemm, measurer_for=factory, cache=cache,
                          residual=residual, **kw)


@pytest.mark.parametrize("gemm", ["gate_up", "down"])
def test_one_gemm_takes_its_own_winners(measurer, gemm):
    tuned = run(measurer, gemm)
    assert [e.tokens for e in tuned.entries] == TOKENS and not [e for e in tuned.entries if e.skipped]
    for e in tuned.entries:
        (name, result), = e.tunes.items()
        assert name == gemm and e.config == result.winner and e.times_us == {gemm: result.time_us}
        assert len(result.trials) <= 20 and e.baseline_us == BASELINE_US and e.pair_cost is None
    assert tuned.file_name == ("E=8,N=512,device_name=NVIDIA_H200.json" if gemm == "gate_up"
                               else "E=8,N=512,device_name=NVIDIA_H200_down.json")


def test_both_serves_each_m_with_the_config_whose_two_times_sum_least(measurer):
    tuned = run(measurer)
    for e in tuned.entries:
        shapes = {g: MoeShape(*LAYER, e.tokens, gemm=g) for g in ("gate_up", "down")}
        assert set(e.tunes) == set(shapes)
        # the table's config runs on each GEMM as its GROUP_SIZE_M twin there, a legal config of that GEMM
        twins = {g: group_twin(s, e.config) for g, s in shapes.items()}
        assert all(twins[g] in legal_configs(MOE_SPACE, s, PROFILE).configs for g, s in shapes.items())
        # its times are the recorded ones, and no config of either GEMM's 3 fastest that runs on both sums less
        records = {g: measurer.recorded[s].records.lookup() for g, s in shapes.items()}
        assert e.times_us == {g: records[g][twins[g]].time_us for g in shapes}
        tops = [t.config for r in e.tunes.values() for t in sorted((t for t in r.trials if t.ok),
                                                                  key=lambda t: t.time_us)[:PAIR_TOP]]
        for c in tops:
            other = {g: group_twin(s, c) for g, s in shapes.items()}
            if all(other[g] in records[g] for g in shapes):
                assert e.time_us <= sum(records[g][other[g]].time_us for g in shapes) + 1e-9
        # each GEMM measures at most PAIR_TOP configs beyond its budget
        for g, s in shapes.items():
            assert len(measurer.measured(s)) <= 20 + PAIR_TOP
            assert len(e.tunes[g].trials) <= 20
        # what one config costs against each GEMM's own winner (below 1 where the other GEMM's config beats it)
        assert e.separate_us == {g: e.tunes[g].time_us for g in shapes}
        assert e.pair_cost == pytest.approx(e.time_us / sum(e.separate_us.values()))
        assert e.baseline_us == 2 * BASELINE_US
    # at 256 tokens a gate_up config beats down's own winner on down, which down's search never measured
    assert tuned.entries[2].pair_cost < 1


def test_a_cached_table_needs_no_measurer_and_a_longer_list_resumes(measurer, synthetic, tmp_path):
    cache = tmp_path / "c.json"
    first = run(measurer, cache=cache, tokens=TOKENS[:2])
    assert first.tuned == 8 and first.cached == 0  # 2 GEMMs × (tune + pair pass) × 2 token counts
    opened = []
    again = run(SyntheticMeasurer(synthetic), cache=cache, tokens=TOKENS[:2], opened=opened)
    assert opened == [] and again.tuned == 0 and again.cached == 8
    assert again.table() == first.table() and [e.times_us for e in again.entries] == [e.times_us for e in first.entries]
    fresh = SyntheticMeasurer(synthetic)
    more = run(fresh, cache=cache, tokens=TOKENS, opened=opened)
    assert opened == ["moe"] and more.tuned == 4 and more.cached == 8
    assert {s.tokens for s, _ in fresh.batches} == {256}
    # --gemm gate_up reuses the same per-GEMM tunes: nothing measured
    opened.clear()
    assert run(SyntheticMeasurer(synthetic), "gate_up", cache=cache, opened=opened).cached == 3 and opened == []


def test_tensor_parallel_shards_name_the_table_and_must_divide(measurer):
    tuned = run(measurer, "gate_up", tokens=[16], tp=2)
    assert tuned.intermediate == 256 and tuned.file_name == "E=8,N=256,device_name=NVIDIA_H200.json"
    assert next(iter(tuned.entries[0].tunes.values())).shape == MoeShape(8, 2, 1024, 256, 16)
    with pytest.raises(ShapeError, match="divide"):
        run(measurer, tp=3)
    with pytest.raises(ShapeError, match="--gemm"):
        run(measurer, gemm="up")


def test_a_token_count_whose_configs_all_fail_says_so(synthetic):
    class Failing(SyntheticMeasurer):
        def measure(self, shape, configs):
            trials = super().measure(shape, configs)
            if shape.tokens == 16:
                from rooftune.candidates import Trial
                return [Trial(t.config, None, error="check: wrong") for t in trials]
            return trials

    tuned = run(Failing(synthetic))
    skipped = [(e.tokens, e.skipped) for e in tuned.entries if e.skipped]
    assert len(skipped) == 1 and skipped[0][0] == 16 and "gate_up: all" in skipped[0][1]
    assert sorted(tuned.table()) == [1, 256]


def test_cli_tune_moe_writes_vllms_table(tmp_path, monkeypatch, measurer):
    from rooftune.hwprofiles import hwprobe
    from rooftune.kernels.harness import live

    monkeypatch.setattr(hwprobe, "require_cuda", lambda: None)
    monkeypatch.setattr(live, "live_measurer", lambda kernel, profile, **kw: contextlib.nullcontext(measurer))
    out, cache = tmp_path / "tables", tmp_path / "c.json"
    args = ["tune", "moe", "--experts", "8", "--topk", "2", "--hidden", "1024", "--intermediate", "1024", "--tp", "2",
            "--batch", "1,16,256", "--budget", "6", "--gpu", "h200", "--cache", str(cache), "--out", str(out)]
    result = runner.invoke(app, args, env={"COLUMNS": "140"})
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "E=8, top-k 2, hidden 1024, N=512 (both) on NVIDIA H200: 12 GEMM tunes measured, 0 from the cache" in text
    assert "one config ×" in text and "wrote" in text and "ranked by the model" in text
    path = out / "E=8,N=512,device_name=NVIDIA_H200.json"
    data = json.loads(path.read_text())  # what vLLM's get_moe_configs reads: M keys as strings, the six keys
    assert list(data) == ["1", "16", "256"] and all(list(v) == list(VLLM_KEYS) for v in data.values())
    assert all(type(x) is int for v in data.values() for x in v.values())
    monkeypatch.setattr(live, "live_measurer", lambda kernel, profile, **kw: pytest.fail("cache hit measured"))
    again = runner.invoke(app, [*args[:-4], "--batch", "1", "--gemm", "both", "--cache", str(cache), "--out", str(out)])
    assert again.exit_code == 0 and "0 GEMM tunes measured, 4 from the cache" in " ".join(again.output.split())
    assert list(read_table(path)) == [1, 16, 256]  # merged with what was there


def test_cli_tune_moe_takes_a_residual_choice(tmp_path, monkeypatch, measurer):
    from rooftune.hwprofiles import hwprobe
    from rooftune.kernels.harness import live

    monkeypatch.setattr(hwprobe, "require_cuda", lambda: None)
    monkeypatch.setattr(live, "live_measurer", lambda kernel, profile, **kw: contextlib.nullcontext(measurer))
    args = ["tune", "moe", "--experts", "8", "--topk", "2", "--hidden", "1024", "--intermediate", "512", "--batch",
            "16", "--gemm", "gate_up", "--budget", "4", "--gpu", "h200", "--cache", "none"]
    result = runner.invoke(app, [*args, "--residual", "none"], env={"COLUMNS": "140"})
    assert result.exit_code == 0, result.output
    assert "ranked by the model alone (--residual none)" in " ".join(result.output.split())
    wrong = runner.invoke(app, [*args, "--residual", str(tmp_path / "missing.json")])
    assert wrong.exit_code == 2 and "missing.json" in " ".join(wrong.output.split())


@pytest.mark.parametrize("args, words", [
    (["--intermediate", "1000", "--tp", "3"], "must be at least 1 and divide the intermediate size 1000"),
    (["--batch", "1,x"], "--batch must be positive integers"),
    (["--gemm", "up"], "--gemm must be one of both, gate_up, down"),
    (["--topk", "9"], "topk (9) must be at most experts (8)"),
    (["--budget", "0"], "must be at least 1"),
])
def test_cli_bad_input_exits_2_before_the_gpu(args, words, monkeypatch):
    from rooftune.kernels.harness import live

    monkeypatch.setattr(live, "live_measurer", lambda *a, **kw: pytest.fail("measured"))
    base = {"--experts": "8", "--topk": "2", "--hidden": "1024", "--intermediate": "1024"}
    base.update(dict(zip(args[::2], args[1::2])))
    result = runner.invoke(app, ["tune", "moe", *[x for kv in base.items() for x in kv], "--gpu", "h200",
                                 "--cache", "none"])
    assert result.exit_code == 2, result.output
    assert words in " ".join(result.output.split())


def test_cli_refuses_a_file_that_is_no_table_before_the_gpu(tmp_path, monkeypatch):
    from rooftune.kernels.harness import live

    monkeypatch.setattr(live, "live_measurer", lambda *a, **kw: pytest.fail("measured"))
    (tmp_path / "E=8,N=1024,device_name=NVIDIA_H200.json").write_text("not json")
    result = runner.invoke(app, ["tune", "moe", "--experts", "8", "--topk", "2", "--hidden", "1024", "--intermediate",
                                 "1024", "--gpu", "h200", "--cache", "none", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "not a vLLM fused-MoE config table" in " ".join(result.output.split())


@pytest.mark.gpu
def test_a_live_table_on_the_gpu(tmp_path):
    """Two token counts of Qwen3-30B-A3B's TP4 layer, tuned live with 6 configs a GEMM, written as vLLM's table."""
    pytest.importorskip("torch")
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from rooftune.tuner.cli.args import live_gpu

    tuned = tune_moe_table(128, 8, 2048, 768, [1, 64], live_gpu(None), 6, tp=4, cache=tmp_path / "c.json")
    assert sorted(tuned.table()) == [1, 64] and all(e.baseline_us for e in tuned.entries)
    assert all(e.time_us > 0 for e in tuned.entries)


def test_a_table_tunes_with_the_shipped_residual_by_default_and_refuses_a_wrong_one(measurer):
    """`residual` reaches every token count's tune: the shipped one by default, "none" by name; a wrong one is
    refused."""
    shipped, alone = run(measurer, gemm="gate_up", residual="shipped"), run(measurer, gemm="gate_up", residual="none")
    assert len(shipped.entries) == len(alone.entries) == len(TOKENS)
    with pytest.raises(ValueError, match='"shipped", "none", None or a Residual'):
        run(measurer, residual="fitted")
