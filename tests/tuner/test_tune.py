"""`tune` on the CPU: one function for live and replay, the budget, the confirm pass, the cache, the CLI."""

import json

import pytest
from typer.testing import CliRunner

from rooftune.candidates import GEMM_SPACE, legal_configs, parse_gemm_shape
from rooftune.hwprofiles import load_profile
from rooftune.tuner import cache, live_tune, tune
from rooftune.tuner.cli.app import app
from rooftune.tuner.evaluation import replay_shape
from rooftune.tuner.search.strategies import model_order, rooftune_strategy, zero_trial_pick

runner = CliRunner()
PROFILE = load_profile("h200")
SHAPE = parse_gemm_shape("512x512x512")


@pytest.fixture
def records(synthetic):
    return synthetic(SHAPE, PROFILE)


def test_tune_and_eval_run_the_same_code(records, counting):
    """`rooftune eval` scores exactly what `tune` picks with the recorded measurer."""
    strategy = rooftune_strategy(None)
    result = tune.tune(SHAPE, counting(records), strategy, 10, profile=PROFILE)
    score = replay_shape(records, strategy, 10, PROFILE)
    assert [t.config for t in score.trials] == [result.winner]
    assert score.score == pytest.approx(records.best_candidate_us / result.time_us)


def test_budget_counts_distinct_configs_and_confirm_retimes_the_top(records, counting):
    m = counting(records)
    result = tune.tune(SHAPE, m, rooftune_strategy(None), 7, profile=PROFILE)
    measured = [c for batch in m.batches[:-1] for c in batch]
    assert len(measured) == len(set(measured)) == 7 == len(result.trials)
    confirm = m.batches[-1]  # the fastest few again, side by side
    fastest = sorted((t for t in result.trials if t.ok), key=lambda t: t.time_us)[:tune.CONFIRM_TOP]
    assert confirm == [t.config for t in fastest] and result.winner == fastest[0].config


def test_trials_carry_the_strategys_prediction(records, counting):
    result = tune.tune(SHAPE, counting(records), rooftune_strategy(None), 5, profile=PROFILE)
    assert all(t.predicted_us is not None and t.predicted_us > 0 for t in result.trials)
    plain = tune.tune(SHAPE, counting(records), model_order, 3, profile=PROFILE)
    assert all(t.predicted_us is None for t in plain.trials)  # model_order does not annotate


def test_budget_one_is_the_zero_trial_pick(records, counting):
    result = tune.tune(SHAPE, counting(records), rooftune_strategy(None), 1, profile=PROFILE)
    configs = legal_configs(GEMM_SPACE, SHAPE, PROFILE).configs
    assert result.winner == zero_trial_pick(SHAPE, configs, PROFILE, None)


def test_a_residuals_pick_correction_chooses_the_first_trial_only(records, counting):
    from rooftune.roofline.fit import make_residual
    from rooftune.tuner.search.strategies import corrected_prior

    configs = legal_configs(GEMM_SPACE, SHAPE, PROFILE).configs
    # Ranked alone the search would start with 8 warps; the pick's change rules them out.
    residual = make_residual("gemm", PROFILE, {"warps8": -1.0}, {}, {}, pick={"warps8": 2.0})
    pick = zero_trial_pick(SHAPE, configs, PROFILE, residual)
    ranked, prior = corrected_prior(SHAPE, configs, PROFILE, residual)
    assert pick.num_warps == 4 and ranked[int(prior.argmin())].num_warps == 8
    assert tune.tune(SHAPE, counting(records), rooftune_strategy(residual), 1, profile=PROFILE).winner == pick
    five = tune.tune(SHAPE, counting(records), rooftune_strategy(residual), 5, profile=PROFILE)
    assert five.trials[0].config == pick and five.trials[1].config == ranked[int(prior.argmin())]


def test_a_strategy_over_budget_is_refused(records, counting):
    def greedy(shape, candidates, measure, budget, profile):
        return measure(candidates[: budget + 1])

    with pytest.raises(ValueError, match="budget of 3"):
        tune.tune(SHAPE, counting(records), greedy, 3, profile=PROFILE)


def test_all_failing_is_a_clear_error(counting, synthetic):
    configs = legal_configs(GEMM_SPACE, SHAPE, PROFILE).configs
    failing = synthetic(SHAPE, PROFILE, failing=set(configs))
    with pytest.raises(tune.TuneError, match="all 3 measured configs failed"):
        tune.tune(SHAPE, counting(failing), model_order, 3, profile=PROFILE)


def test_failed_trials_are_kept_and_never_win(records, counting, synthetic):
    configs = legal_configs(GEMM_SPACE, SHAPE, PROFILE).configs
    first = zero_trial_pick(SHAPE, configs, PROFILE, None)
    rec = synthetic(SHAPE, PROFILE, failing={first})
    result = tune.tune(SHAPE, counting(rec), rooftune_strategy(None), 5, profile=PROFILE)
    assert result.trials[0].config == first and not result.trials[0].ok and result.winner != first


def test_tune_gemm_cache_hit_skips_the_measurer(tmp_path, records, counting):
    path = tmp_path / "tune.json"
    m = counting(records)
    first = live_tune.tune_gemm(SHAPE, PROFILE, budget=4, measurer=m, cache=path, residual=None)
    hit = live_tune.tune_gemm(SHAPE, PROFILE, budget=4, measurer=None, cache=path, residual=None)  # a miss needs a GPU
    assert hit.cached and hit.winner == first.winner and hit.trials == first.trials
    other = counting(records)
    live_tune.tune_gemm(SHAPE, PROFILE, budget=3, measurer=other, cache=path, residual=None)
    assert other.batches, "a changed budget must miss"
    data = json.loads(path.read_text())
    assert len(data["entries"]) == 2 and not list(tmp_path.glob("*.tmp"))
    old = {k.replace(GEMM_SPACE.version, "gemm-older"): v for k, v in data["entries"].items()}
    path.write_text(json.dumps({**data, "entries": old}))
    again = counting(records)
    live_tune.tune_gemm(SHAPE, PROFILE, budget=4, measurer=again, cache=path, residual=None)
    assert again.batches, "entries of another space version do not match"


def test_result_round_trips_through_json(records, counting):
    result = tune.tune(SHAPE, counting(records), rooftune_strategy(None), 6, profile=PROFILE)
    back = cache.result_from_dict(json.loads(json.dumps(cache.result_to_dict(result))))
    assert back == result


def test_corrupt_cache_names_the_file(tmp_path, records, counting):
    path = tmp_path / "tune.json"
    path.write_text("{not json")
    with pytest.raises(cache.TuneCacheError, match="tune.json"):
        live_tune.tune_gemm(SHAPE, PROFILE, budget=2, measurer=counting(records), cache=path)
    path.write_text(json.dumps({"something": "else"}))
    with pytest.raises(cache.TuneCacheError, match="not a rooftune tune cache"):
        live_tune.tune_gemm(SHAPE, PROFILE, budget=2, measurer=counting(records), cache=path)


def test_cli_json_with_a_recorded_measurer(tmp_path, monkeypatch, records, counting, live_from):
    from rooftune.kernels.harness import live

    live_from(counting(records))
    out, cache_file = tmp_path / "r.json", tmp_path / "c.json"
    args = ["tune", "gemm", "--shape", "512x512x512", "--budget", "4", "--json", str(out), "--cache", str(cache_file)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    data = json.loads(out.read_text())
    assert "winner" in text and f"{data['time_us']:.2f} µs" in text and "cuBLAS 10.00 µs" in text
    assert data["baseline_us"] == 10.0 and len(data["trials"]) == 4 and not data["cached"]
    assert set(data["phases_s"]) >= {"startup_s", "compile_s", "measure_s", "confirm_s", "total_s"}
    monkeypatch.setattr(live, "live_measurer", lambda kernel, profile, **kw: pytest.fail("cache hit measured"))
    result = runner.invoke(app, args)
    assert result.exit_code == 0 and "from the cache" in " ".join(result.output.split()), result.output
    assert json.loads(out.read_text())["cached"]


def test_tune_attention_runs_the_same_path(synthetic, counting):
    """Attention is registered: tune_shape tunes it through the same search (no attention residual yet)."""
    from rooftune.candidates import parse_attention_shape

    shape = parse_attention_shape("2x16x1024x128x4")
    records = synthetic(shape, PROFILE)
    result = live_tune.tune_shape(shape, PROFILE, budget=6, measurer=counting(records))
    assert result.kernel == "attention" and len(result.trials) == 6
    assert result.time_us == min(t.time_us for t in result.trials if t.ok)
    assert cache.result_from_dict(json.loads(json.dumps(cache.result_to_dict(result)))) == result


@pytest.mark.gpu
def test_tune_attention_on_the_gpu():
    from rooftune.candidates import parse_attention_shape

    result = live_tune.tune_shape(parse_attention_shape("2x8x1024x64"), PROFILE, budget=5)
    assert len(result.trials) == 5 and result.time_us > 0 and result.baseline_us and result.baseline_us > 0


@pytest.mark.gpu
def test_tune_gemm_on_the_gpu():
    result = live_tune.tune_gemm(SHAPE, PROFILE, budget=5)
    assert len(result.trials) == 5 and result.time_us > 0 and result.baseline_us and result.baseline_us > 0
    assert result.winner in [t.config for t in result.trials if t.ok]


def test_tune_help_does_not_import_torch():
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-X", "importtime", "-m", "rooftune.tuner.cli.app", "tune", "gemm", "--help"],
                         capture_output=True, text=True, check=True)
    assert "--budget" in run.stdout and "--cache" in run.stdout
    imported = {line.rsplit("|", 1)[-1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")}
    assert not {"torch", "triton"} & imported


def test_cli_tune_defaults_to_the_per_user_cache(tmp_path, monkeypatch, records, counting, live_from):
    live_from(counting(records), baseline_us=None)
    default = tmp_path / "user" / "tune.json"
    monkeypatch.setenv("ROOFTUNE_CACHE", str(default))
    args = ["tune", "gemm", "--shape", "512x512x512", "--budget", "3"]
    assert runner.invoke(app, args).exit_code == 0 and default.exists()
    assert "from the cache" in " ".join(runner.invoke(app, args).output.split())
    fresh = runner.invoke(app, args + ["--cache", "none"])
    assert fresh.exit_code == 0 and "from the cache" not in " ".join(fresh.output.split())


def test_a_cache_path_that_is_not_a_regular_file_is_refused_not_read_forever(tmp_path):
    with pytest.raises(cache.TuneCacheError, match="not a regular file"):
        cache.TuneCache(tmp_path).read()  # a folder; /dev/full (endless zeros) is refused the same way


def test_cli_tune_takes_a_residual_file_or_none(tmp_path, records, counting, live_from):
    """A new GPU's residual (`rooftune fit --out FILE`) or none: `tune --residual`, said in the result."""
    from rooftune.roofline.releases import shipped_residual_path

    live_from(counting(records))
    gemm_residual = shipped_residual_path("gemm", PROFILE, "3.6")
    for choice, note in (("none", "the model alone (--residual none)"), (str(gemm_residual), f"the residual {gemm_residual}")):
        out = tmp_path / "r.json"
        result = runner.invoke(app, ["tune", "gemm", "--shape", "512x512x512", "--budget", "3", "--json", str(out),
                                     "--cache", "none", "--residual", choice])
        assert result.exit_code == 0, result.output
        assert json.loads(out.read_text())["residual_note"] == note
    attention_residual = shipped_residual_path("attention", PROFILE, "3.6")
    result = runner.invoke(app, ["tune", "gemm", "--shape", "512x512x512", "--cache", "none",
                                 "--residual", str(attention_residual)])
    assert result.exit_code == 2 and "a residual for attention, not gemm" in " ".join(result.output.split())


def test_residual_none_by_name_is_the_model_alone_and_a_wrong_value_is_refused(records, counting):
    by_name = live_tune.tune_gemm(SHAPE, PROFILE, budget=4, measurer=counting(records), residual="none")
    assert by_name.winner == live_tune.tune_gemm(SHAPE, PROFILE, budget=4, measurer=counting(records), residual=None).winner
    with pytest.raises(ValueError, match='"shipped", "none", None or a Residual'):
        live_tune.tune_gemm(SHAPE, PROFILE, budget=4, measurer=counting(records), residual="fitted")
