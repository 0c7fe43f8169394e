"""The untuned route applied: which an untuned op runs, the kernel's zero-trial pick or the library's op, by the
shipped route (roofline/route.py; fitted by tuner/route_fit.py); the library's op where no shipped route applies."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from rooftune.candidates import Config
from rooftune.hwprofiles import HardwareProfile
from rooftune.roofline.releases import route_release
from rooftune.roofline.route import Route, load_route, route_features
from rooftune.tuner.cache import residual_digest
from rooftune.tuner.search.strategies import corrected_terms

# A routed op below this fraction of the library's speed on a shape is a loss the route must avoid.
LOW = 0.97


def zero_trial(shape, candidates: list[Config], profile: HardwareProfile, residual) -> tuple[Config, float] | None:
    """The zero-trial pick (tuner/search/strategies.py `zero_trial_pick`) and the model's µs for it; None where no
    candidate can launch."""
    configs, log_model, correction = corrected_terms(shape, candidates, profile, residual, for_pick=True)
    if not configs:
        return None
    i = int(np.argmin(log_model + correction))
    return configs[i], float(np.exp(log_model[i]))


@dataclass(frozen=True)
class UntunedChoice:
    """What an untuned op runs: the zero-trial `pick`, or the library's op (`library`), the route's predicted
    log(library µs / pick µs) (`gain`, None without a route) and a line saying why."""

    pick: Config
    library: bool
    gain: float | None
    why: str


def route_choice(spec, profile: HardwareProfile, residual, triton: str | None,
                 space_version: str | None = None) -> tuple[Route | None, str]:
    """The route shipped for `spec` on `profile` in the folder of Triton `triton`'s release (None: the newest that
    holds one; roofline/releases.py), where it applies (its space, default `spec`'s own, and Triton release, and
    the residual whose pick it was fitted beside), and a line saying which or why none."""
    release = route_release(spec.name, profile, triton)
    route = load_route(spec.name, profile, release=release) if release else None
    if route is None:
        under = f" under Triton {release}" if release else ""
        return None, f"no route is fitted for {spec.name} on {profile.name}{under}"
    why = route.mismatch(space_version or spec.space.version, triton)
    if why is None and route.fit.get("residual") != residual_digest(residual):
        why = "fitted beside another residual's zero-trial pick"
    return (None, f"the shipped route was {why}") if why else (route, f"the route fitted on {route.fit.get('data')}")


def untuned_choice(shape, candidates: list[Config], profile: HardwareProfile, residual, route: Route | None,
                   kernel_only: bool = False, why_none: str = "no route") -> UntunedChoice | None:
    """The zero-trial pick among `candidates` and whether `route` sends the op to the library instead (never with
    `kernel_only`); without a route (another GPU, Triton release or residual than any route was fitted beside) the
    library, as nothing recorded there says the pick beats it. None where no candidate can launch."""
    picked = zero_trial(shape, candidates, profile, residual)
    if picked is None:
        return None
    pick, model_us = picked
    if route is None:  # nothing recorded here says the pick beats the library: never risk losing to it untuned
        if kernel_only:
            return UntunedChoice(pick, False, None, f"the kernel: $ROOFTUNE_KERNEL_ONLY ({why_none})")
        return UntunedChoice(pick, True, None, f"the library: {why_none}, so nothing says the kernel's zero-trial "
                                               "pick beats it (a tune times both)")
    gain = route.gain(route_features(shape, model_us, profile))
    predicted = f"predicted library ÷ pick {math.exp(gain):.3f}, the kernel kept above {math.exp(route.margin):.3f}"
    if kernel_only:
        return UntunedChoice(pick, False, gain, f"the kernel: $ROOFTUNE_KERNEL_ONLY ({predicted})")
    library = gain <= route.margin
    return UntunedChoice(pick, library, gain, f"{'the library' if library else 'the kernel'}: {predicted}")
