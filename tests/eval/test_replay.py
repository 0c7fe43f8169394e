"""Replay evaluation and metrics on small fixtures with known answers."""

import math

import numpy as np
import pytest

from rooftune.candidates import Config, GemmShape, Trial
from rooftune.candidates.records import ShapeRecords
from rooftune.eval.scoring.metrics import spearman, summarize
from rooftune.eval.scoring.replay import NOT_RECORDED, RecordedMeasurer, recorded_measure
from rooftune.hwprofiles import load_profile
from rooftune.tuner.evaluation import evaluate, replay, replay_shape
from rooftune.tuner.search.methods import gemm_eval_methods
from rooftune.tuner.search.strategies import (
    best_trial,
    model_order,
    random_order,
    tutorial,
    tutorial_configs,
)

H200 = load_profile("h200")


def c(bm, bn, bk, w=4, s=3, gm=8):
    return Config.make(w, s, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=gm, SPLIT_K=1)


def fixture():
    shape = GemmShape(4096, 4096, 4096)
    trials = (Trial(c(128, 256, 64, w=8), 200.0), Trial(c(128, 128, 64), 250.0), Trial(c(16, 16, 32), 2000.0),
              Trial(c(256, 256, 128, s=5), None, error="OutOfResources"))
    return ShapeRecords(shape, trials)


def fixed_order(configs):
    def strategy(shape, candidates, measure, budget, profile):
        return measure(configs[:budget])
    return strategy


def batch(records):
    """A strategy's measure(configs) over one shape's records."""
    return lambda configs: RecordedMeasurer(records).measure(records.shape, configs)


def test_score_is_best_over_pick():
    r = fixture()
    assert replay_shape(r, fixed_order([c(128, 128, 64)]), 1, H200).score == pytest.approx(200 / 250)
    assert replay_shape(r, fixed_order([c(16, 16, 32), c(128, 256, 64, w=8)]), 2, H200).score == 1.0
    assert replay_shape(r, fixed_order([c(16, 16, 32), c(128, 256, 64, w=8)]), 1, H200).score == pytest.approx(0.1)
    # a failed or unrecorded config counts as tried: nothing successful scores 0
    assert replay_shape(r, fixed_order([c(256, 256, 128, s=5), c(64, 64, 64)]), 2, H200).score == 0.0


def test_measure_reports_unrecorded_as_failed():
    trial = recorded_measure(fixture())(c(64, 64, 64))
    assert not trial.ok and trial.error == NOT_RECORDED


def test_model_order_skips_configs_that_cannot_launch_and_finds_the_best():
    r = fixture()
    trials = model_order(r.shape, [t.config for t in r.trials], batch(r), 4, H200)
    assert c(256, 256, 128, s=5) not in [t.config for t in trials]  # 2·256·128·5·2 B of smem > limit
    assert trials[0].config == c(128, 256, 64, w=8)
    assert best_trial(trials).time_us == 200.0


def test_random_order_is_seeded_and_within_budget():
    r = fixture()
    cands = [t.config for t in r.trials]
    a = random_order(3)(r.shape, cands, batch(r), 2, H200)
    b = random_order(3)(r.shape, cands, batch(r), 2, H200)
    assert [t.config for t in a] == [t.config for t in b] and len(a) == 2


def test_tutorial_measures_its_own_configs():
    r = fixture()
    trials = tutorial(r.shape, [], batch(r), 8, H200)
    assert [t.config for t in trials] == tutorial_configs()
    assert best_trial(trials).time_us == 200.0  # 128x256x64 w8 s3 GROUP_M=8 is the tutorial's first


def test_metrics():
    s = summarize([1.0] * 9 + [0.5])
    assert s["mean"] == pytest.approx(0.95) and s["worst_decile_mean"] == 0.5
    assert s["p10"] == pytest.approx(np.percentile([1.0] * 9 + [0.5], 10))
    assert spearman([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert math.isnan(spearman([1, 1], [1, 2]))


def test_evaluate_gemm_summary():
    summary = evaluate([fixture()], 1, H200, gemm_eval_methods([fixture()], seeds=range(4)))
    assert summary["n_shapes"] == 1 and summary["budget"] == 1
    assert summary["methods"]["model"]["mean"] == 1.0
    assert "tutorial" not in summary["methods"]  # the fixture recorded 1 of its 8 configs
    assert 0.0 <= summary["methods"]["random"]["mean"] <= 1.0
    assert summary["spearman"] == pytest.approx(1.0)  # 128x256 < 128x128 < 16x16 in both
    assert len(replay([fixture()], model_order, 3, H200)) == 1


def test_tutorial_method_when_its_configs_were_recorded():
    shape = GemmShape(4096, 4096, 4096)
    times = [300.0 + 10 * i for i in range(len(tutorial_configs()))]
    trials = tuple(Trial(cfg, t) for cfg, t in zip(tutorial_configs(), times)) + (Trial(c(256, 128, 64, w=8), 150.0),)
    records = [ShapeRecords(shape, trials)]
    summary = evaluate(records, 8, H200, gemm_eval_methods(records, seeds=range(2)))
    assert summary["methods"]["tutorial"]["mean"] == pytest.approx(150.0 / 300.0)


def test_strategies_choose_from_candidates_while_measure_finds_every_recorded_config():
    # One tile row (M = 100 < BLOCK_M = 128): the tutorial's GROUP_M=8 config is its GROUP_M=1 twin.
    shape = GemmShape(100, 4096, 4096)
    twin = c(128, 256, 64, w=8, gm=1)
    outside = c(64, 32, 32, w=2, s=5)  # num_warps=2: a tutorial config outside the space
    trials = (Trial(twin, 200.0), Trial(c(128, 128, 64, gm=1), 250.0), Trial(outside, 180.0))
    r = ShapeRecords(shape, trials, candidates=(twin, c(128, 128, 64, gm=1)),
                     aliases={c(128, 256, 64, w=8): twin})
    offered = []

    def first_two(shape, candidates, measure, budget, profile):
        offered.extend(candidates)
        return measure(candidates[:budget])

    score = replay_shape(r, first_two, 2, H200)
    assert offered == [twin, c(128, 128, 64, gm=1)]
    assert score.score == pytest.approx(1.0)  # the reference is the best config of the space
    tutorial_score = replay_shape(r, tutorial, 8, H200)
    assert tutorial_score.score == pytest.approx(200.0 / 180.0)  # a config outside the space beat it
    assert r.best_candidate_us == 200.0 and r.best_us == 180.0
    measure = recorded_measure(r)
    assert measure(outside).time_us == 180.0
    aliased = measure(c(128, 256, 64, w=8))
    assert aliased.time_us == 200.0 and aliased.config == c(128, 256, 64, w=8)
    assert best_trial(tutorial(shape, [], batch(r), 8, H200)).time_us == 180.0
