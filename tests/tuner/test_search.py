"""The search on the CPU: rounds, the budget, the prefix property, the Gaussian process's belief."""

import math

import numpy as np
import pytest

from rooftune.candidates import GEMM_SPACE, Config, Trial, legal_configs, parse_gemm_shape
from rooftune.hwprofiles import load_profile
from rooftune.tuner.search.gp import Belief, SearchSettings, config_embedding, next_round, search
from rooftune.tuner.search.strategies import corrected_prior

PROFILE = load_profile("h200")
SHAPE = parse_gemm_shape("1024x1024x4096")


@pytest.fixture
def problem(synthetic):
    records = synthetic(SHAPE, PROFILE)
    configs, prior = corrected_prior(SHAPE, legal_configs(GEMM_SPACE, SHAPE, PROFILE).configs, PROFILE, None)
    table = records.lookup()
    batches = []

    def measure(batch):
        batches.append(list(batch))
        return [table[c] for c in batch]

    return configs, prior, measure, batches


def test_rounds_stay_within_budget_and_never_repeat(problem):
    configs, prior, measure, batches = problem
    s = SearchSettings(first_round=4, round_size=3)
    trials = search(configs, prior, measure, 11, s)
    assert len(trials) == 11 and len({t.config for t in trials}) == 11
    assert [len(b) for b in batches] == [4, 3, 3, 1]
    assert trials[0].config == configs[int(np.argmin(prior))]  # the corrected model's best comes first


def test_a_smaller_budget_is_a_prefix_of_a_larger_one(problem):
    configs, prior, measure, _ = problem
    s = SearchSettings(first_round=4, round_size=4)
    long = [t.config for t in search(configs, prior, measure, 20, s)]
    for budget in (1, 3, 5, 9, 13):
        assert [t.config for t in search(configs, prior, measure, budget, s)] == long[:budget]


def test_a_given_first_goes_first_and_keeps_the_prefix_property(problem):
    configs, prior, measure, batches = problem
    s = SearchSettings(first_round=4, round_size=4)
    plain = [t.config for t in search(configs, prior, measure, 4, s)]
    first = int(np.argsort(prior)[50])  # a config the prior alone would not measure first
    long = [t.config for t in search(configs, prior, measure, 20, s, first=first)]
    assert long[:4] == [configs[first]] + plain[:3]  # then the round's own choices, in their order
    for budget in (1, 3, 5, 9, 13):
        assert [t.config for t in search(configs, prior, measure, budget, s, first=first)] == long[:budget]
    best = int(np.argmin(prior))  # the prior's own best as `first`: the search as without it
    assert [t.config for t in search(configs, prior, measure, 12, s, first=best)] == \
        [t.config for t in search(configs, prior, measure, 12, s)]


def test_search_is_deterministic_and_handles_failures(problem):
    configs, prior, measure, _ = problem
    failing = set(configs[i] for i in np.argsort(prior)[:2])

    def flaky(batch):
        return [Trial(c, None, error="check: wrong") if c in failing else t for c, t in zip(batch, measure(batch))]

    a = search(configs, prior, flaky, 12, SearchSettings())
    b = search(configs, prior, flaky, 12, SearchSettings())
    assert a == b and sum(not t.ok for t in a) == 2 and len(a) == 12


def test_a_prior_that_buries_the_best_still_ends_near_it(problem):
    """The prior is made to rank the true best far beyond the budget (a +0.3 log-time error on it):
    20 trials still end within 2% of the best, through its measured neighbourhood."""
    configs, prior, measure, _ = problem
    times = np.array([measure([c])[0].time_us for c in configs])
    best = int(np.argmin(times))
    wrong = prior.copy()
    wrong[best] += 0.3
    assert (wrong < wrong[best]).sum() > 100  # the premise: far outside 20 trials
    trials = search(configs, wrong, measure, 20, SearchSettings())
    assert configs[best] not in [t.config for t in trials]
    assert min(t.time_us for t in trials if t.ok) <= times[best] * 1.02


def test_belief_posterior_interpolates_and_shrinks_variance():
    z = np.array([[0.0], [1.0], [10.0]])
    s = SearchSettings(prior_sd=0.2, length_scale=1.0, offset_sd=0.0, noise_sd=1e-3)
    b = Belief(np.zeros(3), z, s)
    m0, sd0 = b.posterior()
    assert np.allclose(m0, 0) and np.allclose(sd0, 0.2)
    b.add(0, math.log(2.0))
    m, sd = b.posterior()
    assert m[0] == pytest.approx(math.log(2.0), abs=1e-3) and sd[0] < 0.01
    assert 0 < m[1] < m[0] and abs(m[2]) < 1e-6  # a neighbour moves with it, a distant config does not
    assert sd[1] < 0.2 and sd[2] == pytest.approx(0.2)


def test_a_round_spreads_away_from_its_first_pick():
    """Two configs the prior cannot tell apart and one distant: with κ > 0 the round's second pick is
    the distant config, not the twin (its variance shrank with the first pick)."""
    z = np.array([[0.0], [0.01], [5.0]])
    b = Belief(np.array([0.0, 0.0, 0.05]), z, SearchSettings(prior_sd=0.1, length_scale=1.0, offset_sd=0.0))
    assert next_round(b, 2, kappa=2.0) == [0, 2]


def test_settings_round_trip_and_embedding_columns():
    s = SearchSettings(first_round=6, kappa=1.5)
    assert SearchSettings.from_dict(s.to_dict()) == s
    assert SearchSettings.from_dict({"kappa": 3, "unknown": 1}).kappa == 3.0
    cfgs = legal_configs(GEMM_SPACE, SHAPE, PROFILE).configs[:3]
    assert config_embedding(cfgs).shape == (3, 11)
    # a composite tile sits at its width (BLOCK_N + BLOCK_N2) along the tile-columns axis, flagged apart
    wide = cfgs[0].kernel_params() | {"BLOCK_N": 128, "BLOCK_N2": 32}
    row = config_embedding([Config.make(cfgs[0].num_warps, cfgs[0].num_stages, **wide)])[0]
    assert row[1] == np.log2(160) and row[10] == 1.0 and config_embedding(cfgs)[:, 10].tolist() == [0.0] * 3


@pytest.mark.parametrize("budget", [1, 8, 20])
def test_a_live_measurer_gets_the_first_round_before_anything_is_measured(problem, budget):
    configs, prior, measure, batches = problem
    asked = []

    def live(batch):
        asked.append(("measure", len(batch)))
        return measure(batch)

    live.prefetch = lambda ahead: asked.append(("prefetch", list(ahead)))
    search(configs, prior, live, budget, SearchSettings())
    kind, ahead = asked[0]
    assert kind == "prefetch" and ahead[:len(batches[0])] == batches[0]  # compiling while CUDA starts
    if budget <= len(batches[0]):
        assert ahead == batches[0]  # nothing beyond what will be measured
    else:
        assert len(ahead) > len(batches[0])  # and the prior's best, which later rounds mostly draw from


def test_moe_configs_take_the_gemm_coordinates_and_group_sizes_stay_apart():
    """vLLM's names: BLOCK_SIZE_M/N/K sit where BLOCK_M/N/K do; GROUP_SIZE_M 1, 16, 32, 64 at log2 / 4 (0, 1,
    1.25, 1.5): grouping on is one unit from off, as the GEMM's GROUP_M, and the sizes are neighbours, not one point."""
    moe = [Config.make(8, 4, BLOCK_SIZE_M=128, BLOCK_SIZE_N=256, BLOCK_SIZE_K=64, GROUP_SIZE_M=g) for g in (1, 16, 32, 64)]
    gemm = Config.make(8, 4, BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=1)
    z = config_embedding(moe)
    assert np.array_equal(z[0], config_embedding([gemm])[0])
    assert z[:, 6].tolist() == [0.0, 1.0, 1.25, 1.5]
