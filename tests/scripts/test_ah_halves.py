"""The AutoHeuristic halves script: its fit reads the choosing half only and scores the other."""

from types import SimpleNamespace

import pytest
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


def test_by_layout_ranks_configs_by_their_mean_score_per_layout():
    """Two 'nk' inputs where the 32-row tile is best on one and the 128-row on the other, one 'kn' input:
    each layout ranks its configs by the mean of best ÷ time, named with their accumulators a thread."""
    fast_small, fast_large = _records(64), _records(96)
    fast_large = ShapeRecords(fast_large.shape, tuple(Trial(t.config, 20.0 - 4 * i)
                                                      for i, t in enumerate(fast_large.trials)))
    kn = ShapeRecords(GemmShape(128, 512, 512, layout="kn"), _records(128).trials)
    ranked = halves.by_layout([fast_small, fast_large, kn], top=2)
    assert list(ranked) == [("mk", "kn"), ("mk", "nk")]
    # nk: 128 rows scores (10/12 + 1)/2 = 0.917, 32 rows (1 + 12/20)/2 = 0.8, 64 rows (10/11 + 12/16)/2 = 0.83
    assert [c for c, _ in ranked[("mk", "nk")]] == ["128x64x32 w4 s3 (64)", "64x64x32 w4 s3 (32)"]
    assert ranked[("mk", "nk")][0][1] == pytest.approx((10 / 12 + 1) / 2)
    assert ranked[("mk", "kn")][0] == ("32x64x32 w4 s3 (16)", 1.0)
