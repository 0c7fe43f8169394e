"""No tune cache entry is trusted (issue 57): one that fails any check is ignored with one warning naming the file
and the key, never served and never a traceback, and tuned again where tuning is on; the committed cache passes."""

import json
import math
import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rooftune.candidates import parse_gemm_shape
from rooftune.hwprofiles import load_profile
from rooftune.tuner import cache, live_tune
from rooftune.tuner.cli.app import app
from rooftune.tuner.pytorch.autotune import stored_choice

runner = CliRunner()
REPO = Path(__file__).parents[2]
PROFILE = load_profile("h200")
SHAPE = parse_gemm_shape("1024x2560x2048")
OTHER = parse_gemm_shape("7x2560x2048")


@pytest.fixture
def stored(tmp_path, synthetic, counting):
    """(cache path, key, the entry a tune stored under it)."""
    path = tmp_path / "tune.json"
    live_tune.tune_gemm(SHAPE, PROFILE, budget=4, measurer=counting(synthetic(SHAPE, PROFILE)), cache=path,
                        residual=None)
    (key, entry), = json.loads(path.read_text())["entries"].items()
    return path, key, entry


def _other_shape(entry, synthetic, counting, tmp_path):
    """The entry a tune of 7x2560x2048 stores: what `other shape` puts under 1024x2560x2048's key."""
    path = tmp_path / "other.json"
    live_tune.tune_gemm(OTHER, PROFILE, budget=4, measurer=counting(synthetic(OTHER, PROFILE)), cache=path,
                        residual=None)
    (_, other), = json.loads(path.read_text())["entries"].items()
    return other


def _winner_with(entry, **params):
    """The entry's winner with `params` changed."""
    text = entry["winner"]
    for name, value in params.items():
        text = ",".join(f"{name}={value}" if part.startswith(f"{name}=") else part for part in text.split(","))
    return text


def _without(entry, name):
    return ",".join(part for part in entry["winner"].split(",") if not part.startswith(f"{name}="))


# Each: (what, entry -> the damaged entry, words the warning says). The cases first.
DAMAGE = [
    ("a winner outside the space", lambda e: {**e, "winner": _winner_with(e, BLOCK_M=17)}, "BLOCK_M=17"),
    ("a winner missing a parameter", lambda e: {**e, "winner": _without(e, "BLOCK_K")}, "lacks BLOCK_K"),
    ("time NaN", lambda e: {**e, "time_us": math.nan}, "time_us = nan"),
    ("time negative", lambda e: {**e, "time_us": -2.5}, "time_us = -2.5"),
    ("time zero", lambda e: {**e, "time_us": 0}, "time_us = 0"),
    ("time 1e-308", lambda e: {**e, "time_us": 1e-308}, "time_us = 1e-308"),
    ("time a string", lambda e: {**e, "time_us": "fast"}, "time_us = 'fast'"),
    ("time true", lambda e: {**e, "time_us": True}, "time_us = True"),
    ("a negative baseline", lambda e: {**e, "baseline_us": -1.0}, "baseline_us = -1.0"),
    ("a baseline of zero", lambda e: {**e, "baseline_us": 0.0}, "baseline_us = 0.0"),
    ("an entry that is a list", lambda e: [e], "must be a JSON object, got list"),
    ("an entry that is a number", lambda e: 3, "got int"),
    ("an entry that is null", lambda e: None, "got NoneType"),
    ("another shape's tune", "other", "holds a tune of 7x2560x2048"),
    ("another space's tune", lambda e: {**e, "space_version": "gemm-000000000000"}, "over space gemm-000000000000"),
    ("a shape that is no shape", lambda e: {**e, "shape": {**e["shape"], "m": -3}}, "m must be >= 1"),
    ("a shape that is a list", lambda e: {**e, "shape": [1, 2, 3]}, "shape must be a JSON object"),
    ("an unknown kernel", lambda e: {**e, "kernel": "conv"}, "unknown kernel 'conv'"),
    ("a kernel that is not text", lambda e: {**e, "kernel": 3}, "kernel must be text"),
    ("no trials", lambda e: {**e, "trials": []}, "trials must be a non-empty list"),
    ("trials that are text", lambda e: {**e, "trials": "many"}, "trials must be a non-empty list"),
    ("a trial with a time and an error", lambda e: {**e, "trials": [{**e["trials"][0], "error": "boom"}]},
     "exactly one of time_us and error"),
    ("a trial with a NaN time", lambda e: {**e, "trials": [{**e["trials"][0], "time_us": math.nan}]},
     "trial 1's time_us = nan"),
    ("a trial with an unknown field", lambda e: {**e, "trials": [{**e["trials"][0], "speed": 1}]}, "speed"),
    ("a winner none of the trials ran",
     lambda e: {**e, "trials": [t for t in e["trials"] if t["config"] != e["winner"]]}, "none of its trials"),
    ("a winner that is not text", lambda e: {**e, "winner": {"BLOCK_M": 64}}, "winner must be a config string"),
    ("a missing field", lambda e: {k: v for k, v in e.items() if k != "time_us"}, "missing field(s) time_us"),
    ("an unknown field", lambda e: {**e, "tflops": 1e9}, "unknown field(s) tflops"),
    ("a strategy that is not text", lambda e: {**e, "strategy": None}, "strategy must be text"),
    ("phases that are not numbers", lambda e: {**e, "phases_s": {"total_s": "long"}}, "phases_s['total_s']"),
]


@pytest.mark.parametrize("what,damage,words", DAMAGE, ids=[d[0] for d in DAMAGE])
def test_a_damaged_entry_is_ignored_with_one_warning_and_tuned_again(stored, synthetic, counting, tmp_path,
                                                                      what, damage, words):
    path, key, entry = stored
    bad = _other_shape(entry, synthetic, counting, tmp_path) if damage == "other" else damage(entry)
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "entries": {key: bad}}))
    with pytest.warns(cache.CacheEntryWarning) as caught:
        assert cache.TuneCache(path).get(key) is None
    assert len(caught) == 1
    message = str(caught[0].message)
    assert str(path) in message and repr(key) in message and "ignored" in message and words in message, message
    # tuning on: the entry is tuned again and the new result replaces it
    measurer = counting(synthetic(SHAPE, PROFILE))
    with pytest.warns(cache.CacheEntryWarning):
        result = live_tune.tune_gemm(SHAPE, PROFILE, budget=4, measurer=measurer, cache=path, residual=None)
    assert measurer.batches and not result.cached
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cache.TuneCache(path).get(key).winner == result.winner


def test_a_good_entry_is_served_without_a_word(stored):
    path, key, entry = stored
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hit = cache.TuneCache(path).get(key)
    assert hit.cached and str(hit.winner) == entry["winner"]


def test_every_entry_of_the_committed_model_cache_passes_its_check():
    data = json.loads((REPO / "datasets/h200/models/tune.json").read_text())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        results = [cache.keyed_result(key, entry) for key, entry in data["entries"].items()]
    assert len(results) == len(data["entries"]) > 40


def test_the_cli_warns_of_a_damaged_entry_and_tunes_again(stored, monkeypatch, synthetic, counting, live_from):
    path, key, entry = stored
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "entries": {key: {**entry, "winner": _winner_with(entry, BLOCK_M=17)}}}))
    live_from(counting(synthetic(SHAPE, PROFILE)), baseline_us=None)
    lines = []
    monkeypatch.setattr(warnings, "showwarning", lambda message, *_, **__: lines.append(str(message)))
    result = runner.invoke(app, ["tune", "gemm", "--shape", "1024x2560x2048", "--budget", "4", "--cache", str(path),
                                 "--residual", "none", "--gpu", "h200"])
    assert result.exit_code == 0, result.output
    assert "from the cache" not in result.output and "BLOCK_M=17" in " ".join(lines)
    assert "BLOCK_M=17" not in json.loads(path.read_text())["entries"][key]["winner"]


def test_a_bad_autotune_entry_is_refused_by_its_check():
    candidates = ["BLOCK_SIZE_M: 64, num_warps: 4", "BLOCK_SIZE_M: 128, num_warps: 8"]
    assert stored_choice({"config": candidates[1], "time_ms": {candidates[1]: 0.02}}, candidates) == candidates[1]
    for bad, words in [([], "JSON object"), ({"config": candidates[0]}, "time_ms"),
                       ({"config": "other", "time_ms": {}}, "none of the kernel.s configs"),
                       ({"config": candidates[0], "time_ms": {candidates[0]: -1}}, "not a finite, positive time"),
                       ({"config": candidates[0], "time_ms": {candidates[0]: "x"}}, "not a finite, positive time")]:
        with pytest.raises(ValueError, match=words):
            stored_choice(bad, candidates)


def test_a_bad_autotune_entry_is_ignored_with_a_warning(tmp_path):
    store = cache.CacheFile(tmp_path / "autotune.json", "rooftune-autotune-cache-1", "autotune")
    store.put_entry("k", {"config": "gone", "time_ms": {}})
    with pytest.warns(cache.CacheEntryWarning, match=r"autotune.json: autotune cache entry 'k' ignored.*gone"):
        assert store.entry("k", lambda key, e: stored_choice(e, ["a"])) is None
