"""The AutoHeuristic halves script: its fit reads the choosing half only and scores the other."""

from types import SimpleNamespace

from script_module import load_script

from rooftune.candidates import Config, GemmShape, Trial
from rooftune.candidates.records import ShapeRecords
from rooftune.hwprofiles import load_profile

halves = load_script("scripts/ah_halves.py")


def _records(m):
    configs = [Config.make(4, 3, BLOCK_M=bm, BLOCK_N=64, BLOCK_K=32, GROUP_M=8, SPLIT_K=1) for bm in (32, 64, 128)]
    return ShapeRecords(GemmShape(m, 512, 512, layout="nk"), tuple(Trial(c, 10.0 + i) for i, c in enumerate(configs)))


def test_fit_reads_the_choosing_half_only_and_scores_the_other(monkeypatch, tmp_path, capsys):
    records = [_records(m) for m in range(64, 64 + 40)]
    assert {halves.half(r) for r in records} == {0, 1}
    seen, scored = [], []

    def fake_fit(kernel, shapes, profile, label):
        seen.extend(s.shape for s in shapes)
        return SimpleNamespace(residual=None, cv={1: {"mean": 1.0, "worst_decile_mean": 1.0}})

    def fake_replay(recs, strategy, budget, profile):
        scored.extend(r.shape for r in recs)
        return [SimpleNamespace(score=1.0) for _ in recs]

    monkeypatch.setattr(halves, "fit_kernel", fake_fit)
    monkeypatch.setattr(halves, "replay", fake_replay)
    monkeypatch.setattr(halves, "write_residual", lambda residual, path: path.write_text("{}"))
    halves.fit_half("h100", load_profile("h100_sxm"), records, tmp_path)
    choosing = {r.shape for r in records if halves.half(r) == 0}
    assert set(seen) == choosing and len(seen) == len(choosing)
    assert set(scored) == {r.shape for r in records} - choosing  # the scoring half, never fitted on
    assert (tmp_path / "gemm-h100-choosing-half.json").is_file() and "scoring half" in capsys.readouterr().out
