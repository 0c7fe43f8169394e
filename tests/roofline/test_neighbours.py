"""The neighbour vote: it moves the zero-trial pick where the training shapes near a new one know better, its table
round-trips beside its residual and is validated on load, and cross-validation's vote is the one `tune` ranks by."""

import json
from dataclasses import asdict, replace

import numpy as np
import pytest

from rooftune.candidates import GEMM_SPACE, GemmShape, configs_to_columns, legal_configs
from rooftune.hwprofiles import load_profile
from rooftune.roofline import predict
from rooftune.roofline.fit import FitShape, make_residual, prepare
from rooftune.roofline.neighbours import (
    Neighbour,
    NeighbourTable,
    VoteSettings,
    combine,
    misses,
    neighbours_file,
    top_regrets,
)
from rooftune.roofline.residual import (
    ResidualError,
    feature_names,
    ranking_digest,
    read_residual,
    write_residual,
)
from rooftune.tuner.search.strategies import zero_trial_pick

PROFILE = load_profile("h200")
# A near the new shape B; the model alone picks a 4-warp config on B, where (as on A) 8 warps run 0.7x.
A, B = GemmShape(1024, 1024, 1024), GemmShape(1024, 1024, 2048)


def measured(shape):
    """Every legal config 'measured' at the model's time, 8-warp configs 0.7x: a quirk the model does not know."""
    configs = list(legal_configs(GEMM_SPACE, shape, PROFILE).configs)
    bd = predict(shape, configs_to_columns(configs), PROFILE)
    return configs, bd.time_us * np.array([0.7 if c.num_warps == 8 else 1.0 for c in configs]), np.asarray(bd.fits)


def plain_residual(vote: VoteSettings | None = None, coefficients=None):
    coefficients = coefficients or {n: 0.0 for n in feature_names("gemm")}
    return make_residual("gemm", PROFILE, coefficients, {}, {"vote": None if vote is None else asdict(vote)})


def with_table(residual, shapes, vote: VoteSettings):
    entries = tuple(Neighbour(s, top_regrets(*measured(s))) for s in shapes)
    table = NeighbourTable("gemm", PROFILE.name, PROFILE.sm_count, ranking_digest(residual), vote, entries,
                           {"data": "synthetic"})
    return replace(residual, neighbours=table, fit={**residual.fit, "vote": asdict(vote)})


def test_the_vote_moves_the_pick_where_the_neighbours_know_better():
    vote = VoteSettings(k=1, w_pick=1.0, w_search=1.0)
    alone, voted = plain_residual(), with_table(plain_residual(vote), [A], vote)
    configs, times, _ = measured(B)
    time_of = dict(zip(configs, times))
    before, after = zero_trial_pick(B, configs, PROFILE, alone), zero_trial_pick(B, configs, PROFILE, voted)
    assert before.num_warps == 4 and after.num_warps == 8
    assert time_of[after] < 0.8 * time_of[before]
    # a weight of 0 in the pick leaves it as the residual alone ranks
    silent = with_table(plain_residual(VoteSettings(1, 0.0, 1.0)), [A], VoteSettings(1, 0.0, 1.0))
    assert zero_trial_pick(B, configs, PROFILE, silent) == before


def test_a_miss_is_measured_against_the_neighbours_top_and_bounded_below_it():
    c = measured(A)[0][:4]
    n = Neighbour(A, {c[0]: 0.0, c[1]: 0.2})  # bound 0.2
    predicted = np.array([0.1, 0.05, 0.5, np.nan])
    # listed: regret - predicted; unlisted: max(bound - predicted, 0); not launchable there: not known
    np.testing.assert_allclose(misses(n, c, predicted), [-0.1, 0.15, 0.0, np.nan])
    assert misses(n, [c[2]], np.array([0.05]))[0] == pytest.approx(0.15)
    np.testing.assert_allclose(combine(np.array([[1.0, np.nan, np.nan], [3.0, 2.0, np.nan]])), [2.0, 2.0, 2.0])


def test_a_training_shape_is_left_out_of_its_own_vote():
    vote = VoteSettings(k=1, w_pick=1.0, w_search=1.0)
    voted = with_table(plain_residual(vote), [A, B], vote)
    assert [n.shape for n in voted.neighbours.nearest_to(B, PROFILE)] == [B]
    assert [n.shape for n in voted.without_neighbour(B).neighbours.nearest_to(B, PROFILE)] == [A]
    assert voted.without_neighbour(GemmShape(64, 64, 64)).neighbours.neighbours == voted.neighbours.neighbours


def test_cross_validations_vote_is_the_one_tune_ranks_by():
    """tuner/fitting.py computes a held-back shape's vote from the prepared features; `tune` through the residual's
    table, the model run live on each neighbour. The two agree, for any coefficients."""
    from rooftune.tuner.fitting import Fitted, fold_votes

    shapes = [A, GemmShape(2048, 1024, 1024), B]
    data = prepare([FitShape(s, tuple(measured(s)[0]), measured(s)[1]) for s in shapes], PROFILE)
    coefficients = {name: 0.01 * (i % 7 - 3) for i, name in enumerate(feature_names("gemm"))}
    votes = fold_votes(data, [([2], Fitted(coefficients, {}))], 2, PROFILE)
    residual = with_table(plain_residual(VoteSettings(2), coefficients), shapes[:2], VoteSettings(2))
    np.testing.assert_allclose(votes[2], residual.vote(B, list(data[2].source.configs), PROFILE), rtol=1e-9,
                               atol=1e-12)


def test_the_table_round_trips_beside_its_residual(tmp_path):
    vote = VoteSettings(k=2, w_pick=0.5, w_search=0.25)
    residual = with_table(plain_residual(vote), [A, GemmShape(2048, 1024, 1024)], vote)
    path = tmp_path / "gemm-test.json"
    write_residual(residual, path)
    assert neighbours_file(path).is_file() and neighbours_file(path).stat().st_size < 20_000
    back = read_residual(path)
    assert back.neighbours.settings == vote and back.neighbours.neighbours == residual.neighbours.neighbours
    configs = measured(B)[0]
    np.testing.assert_allclose(back.vote(B, configs, PROFILE), residual.vote(B, configs, PROFILE))


def _written(tmp_path):
    vote = VoteSettings(k=1, w_pick=0.5, w_search=0.5)
    path = tmp_path / "gemm-test.json"
    write_residual(with_table(plain_residual(vote), [A], vote), path)
    return path, neighbours_file(path), json.loads(neighbours_file(path).read_text())


def _first_regret(d, value):
    d["shapes"][0]["regret"][0] = value


def _shape(d, value):
    d["shapes"][0]["shape"] = value


@pytest.mark.parametrize("change, message", [
    (lambda d: d.update(format="x"), "not a rooftune neighbour table"),
    (lambda d: d.update(kernel="moe"), "a table for kernel 'moe'"),
    (lambda d: d["settings"].update(k=0), "k = 0 must be a whole number >= 1"),
    (lambda d: d["settings"].update(w_pick=-1.0), "must be a finite number >= 0"),
    (lambda d: d["settings"].pop("w_search"), "exactly k, w_pick and w_search"),
    (lambda d: d.update(params=d["params"][1:]), "space's parameters"),
    (lambda d: d["configs"][0].pop(), "must be 11 whole numbers"),
    (lambda d: d["configs"][0].__setitem__(0, 48), "BLOCK_M=48 is not in the gemm space"),
    (lambda d: d.update(shapes=[]), "non-empty 'shapes'"),
    (lambda d: _first_regret(d, [0, -0.5]), "not [a config row's index, a regret"),
    (lambda d: _first_regret(d, [10 ** 6, 0.0]), "not [a config row's index, a regret"),
    (lambda d: _shape(d, {"m": 0, "n": 8, "k": 8}), "not a shape"),
    (lambda d: _shape(d, {"batch": 1, "heads": 8, "seq": 64, "head_dim": 64}), "a shape of attention, in a table of gemm"),
    (lambda d: d["shapes"][0].update(regret=[[i, r + 0.1] for i, r in d["shapes"][0]["regret"]]), "best config's, 0"),
    (lambda d: d.update(residual="0" * 12), "fitted beside another residual"),
    (lambda d: d["settings"].update(k=3), "vote settings"),
    (lambda d: d.update(profile="NVIDIA A100"), "beside a residual of gemm on NVIDIA H200"),
    (lambda d: d.update(sm_count=0), "its 'sm_count'"),
])
def test_a_damaged_table_is_refused_on_load(tmp_path, change, message):
    path, table_path, data = _written(tmp_path)
    change(data)
    table_path.write_text(json.dumps(data))
    with pytest.raises(ResidualError, match="refit|beside a residual") as info:
        read_residual(path)
    assert message in str(info.value)


def test_a_missing_table_is_an_error_and_a_stale_one_is_not_read(tmp_path):
    path, table_path, _ = _written(tmp_path)
    table_path.unlink()
    with pytest.raises(ResidualError, match="its table .* is missing"):
        read_residual(path)
    _written(tmp_path)
    write_residual(plain_residual(), path)  # refitted without a vote: the old table beside it is not read
    assert read_residual(path).neighbours is None


def test_the_vote_applies_only_to_the_spaces_configs_on_its_own_gpu():
    from rooftune.candidates import Config
    from rooftune.hwprofiles.hwprobe import partition_profile

    vote = VoteSettings(k=1, w_pick=1.0, w_search=1.0)
    voted = with_table(plain_residual(vote), [A], vote)
    configs = measured(B)[0]
    assert np.abs(voted.vote(B, configs, PROFILE)).max() > 0
    # an SM partition of the GPU (same name, fewer SMs) and a user's configs without the space's parameters: none
    assert not np.any(voted.vote(B, configs, partition_profile(PROFILE, 66)))
    assert not np.any(voted.vote(B, [Config.make(4, 3, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=8)], PROFILE))
    assert not np.any(voted.vote(B, configs, load_profile("h200-sm66")))
