"""`rooftune eval`: every method replayed through `tune` (the code `rooftune tune` runs) with each shape's
recorded measurer, and scored against the exhaustive best."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from rooftune.candidates import SearchSpace, configs_to_columns, illegal_mask, kernel_of
from rooftune.candidates.records import ShapeRecords
from rooftune.eval.scoring.metrics import summarize, versus_library
from rooftune.eval.scoring.replay import RecordedMeasurer, ShapeScore, model_spearman, score_trials
from rooftune.hwprofiles import HardwareProfile
from rooftune.tuner.routing import LOW, untuned_choice
from rooftune.tuner.tune import TuneError, tune


@dataclass(frozen=True)
class LiveOffer:
    """Records cut to what a live tune on the replay's GPU would offer (`offered_as_live`)."""

    records: list[ShapeRecords]
    not_legal: int      # recorded candidates the profile's legality leaves out, over all shapes
    shapes_cut: int     # shapes that lost any


def offered_as_live(records: list[ShapeRecords], space: SearchSpace, profile: HardwareProfile) -> LiveOffer:
    """Each shape's candidates cut to those `space`'s legality allows for it on `profile`, where the records were
    swept in that space (their meta's `space_version`; others, such as another kernel's logs, are kept whole):
    `rooftune tune` there offers only those. A dataset swept under another profile's legality (a corrected SM
    count) then replays what a live tune would try, and is scored against the best of that. Configs the profile
    makes legal that have no record cannot be offered: `rooftune sweep gemm --backfill-legal` times them."""
    kept, not_legal, shapes_cut = [], 0, 0
    for r in records:
        recorded = r.candidate_configs()
        if r.meta.get("space_version") != space.version or not recorded:
            kept.append(r)
            continue
        illegal, _ = illegal_mask(space, r.shape, configs_to_columns(recorded), profile)
        if illegal.any():
            not_legal += int(illegal.sum())
            shapes_cut += 1
            r = replace(r, candidates=tuple(c for c, out in zip(recorded, illegal) if not out))
        kept.append(r)
    return LiveOffer(kept, not_legal, shapes_cut)


class NothingToScoreError(ValueError):
    """Recorded data with no shape a method could be scored on: every cell of the table would be 'none'."""


def check_scorable(offer: LiveOffer, source: str, profile: HardwareProfile) -> None:
    """NothingToScoreError where no shape of `offer` has a successful recorded config among its candidates,
    saying why: the profile's legality left none (data of another GPU), the data record none of the space's
    configs (only a library's or unknown choices), or every recorded config failed."""
    if any(r.best_candidate_us is not None for r in offer.records):
        return
    shapes = len(offer.records)
    offered = sum(len(r.candidate_configs()) for r in offer.records)
    if offered == 0 and offer.not_legal:
        why = (f"none of its {offer.not_legal} recorded configs is legal on {profile.name} (recorded on another "
               f"GPU? --gpu names the one it was)")
    elif offered == 0:
        why = "it records no config of the space (only a library's or choices rooftune does not model)"
    else:
        why = f"every one of its {offered} recorded configs of the space failed"
    raise NothingToScoreError(f"{source}: nothing to score on {profile.name}: {shapes} shape(s), none with a "
                              f"successful config: {why}")


def replay_shape(records: ShapeRecords, strategy, budget: int, profile: HardwareProfile) -> ShapeScore:
    """One shape tuned from its records: `tune` with the recorded measurer, choosing among the records'
    candidates (the space); the pick's recorded time scores it (0 when every trial failed)."""
    try:
        result = tune(records.shape, RecordedMeasurer(records), strategy, budget, profile=profile,
                      candidates=records.candidate_configs())
    except TuneError:
        return ShapeScore(records, (), 0.0)
    return score_trials(records, [t for t in result.trials if t.config == result.winner])


def replay(records: list[ShapeRecords], strategy, budget: int, profile: HardwareProfile) -> list[ShapeScore]:
    """Replay `strategy` on every shape whose space has at least one successful recorded config."""
    return [replay_shape(r, strategy, budget, profile) for r in records if r.best_candidate_us is not None]


def budget_cap(records: list[ShapeRecords]) -> int | None:
    """The most configs a strategy can measure on any of `records`: the largest candidate count among
    them (the space's size); None without records. A larger budget measures nothing more, only slower."""
    return max((len(r.candidate_configs()) for r in records), default=None)


def evaluate(records: list[ShapeRecords], budget: int, profile: HardwareProfile, methods: dict) -> dict:
    """Per method, mean / p10 / worst-decile mean of the per-shape scores, and the model's mean Spearman,
    over the shapes whose space has a successful recorded config (`left_out`: how many have none).

    `methods` maps a name to a strategy, or to a list of strategies (random seeds): each run is
    summarized on its own and the summaries averaged (so the tail is a run's tail, not the tail of
    per-shape averages); `runs` says how many. `scores`: per method, each run's per-shape scores (in
    the records' order), for pictures."""
    scored = [r for r in records if r.best_candidate_us is not None]
    left_out, records = len(records) - len(scored), scored
    summary, scores = {}, {}
    for name, strategies in methods.items():
        runs = strategies if isinstance(strategies, (list, tuple)) else [strategies]
        scores[name] = [[s.score for s in replay(records, strategy, budget, profile)] for strategy in runs]
        per_run = [summarize(run) for run in scores[name]]
        summary[name] = {k: float(np.mean([p[k] for p in per_run])) for k in per_run[0]} if records else summarize([])
        summary[name]["runs"] = len(runs)
    return {"n_shapes": len(records), "left_out": left_out, "budget": budget, "methods": summary,
            "spearman": model_spearman(records, profile), "scores": scores}


def op_versus_library(records: list[ShapeRecords], profile: HardwareProfile, residual, route,
                      tuned_scores=None) -> dict:
    """The op-vs-library figure (eval/scoring/metrics.py `versus_library`: library µs ÷ op µs per shape) over the
    `records` with a recorded library time. `untuned`: the op's untuned path, the library's time where `route`
    sends it there (None: no route, the library always), else the zero-trial pick's recorded time (`failed`: shapes
    whose pick has no successful record, left out). `pick`: the zero-trial pick always ($ROOFTUNE_KERNEL_ONLY=1, or
    the untuned op before any route). `tuned`, given `tuned_scores` (the `rooftune` method's score per
    shape, in the records' order, as `evaluate` returns them): the faster of the library and the tune's pick, as a
    tuned op routes to whichever its tune timed faster."""
    out = {}
    with_library = [(i, r) for i, r in enumerate(records) if kernel_of(r.shape).baseline in r.baselines_us]
    for path, kernel_only in (("untuned", False), ("pick", True)):
        ratios, failed = [], 0
        for _, r in with_library:
            library_us = r.baselines_us[kernel_of(r.shape).baseline]
            choice = untuned_choice(r.shape, r.candidate_configs(), profile, residual, route, kernel_only)
            trial = None if choice is None or choice.library else r.lookup().get(choice.pick)
            if choice is not None and choice.library:
                ratios.append(1.0)
            elif trial is not None and trial.ok:
                ratios.append(library_us / trial.time_us)
            else:
                failed += 1
        out[path] = {**versus_library(ratios, LOW), "failed": failed}
    if tuned_scores is not None:
        tuned = []
        for i, r in with_library:
            library_us, score = r.baselines_us[kernel_of(r.shape).baseline], tuned_scores[i]
            tuned.append(library_us / min(library_us, r.best_candidate_us / score) if score > 0 else 1.0)
        out["tuned"] = versus_library(tuned, LOW)
    return out
