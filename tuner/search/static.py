"""The `static` baseline: one list of configs learned greedily on training data, the same for every shape.

Each step adds the config that most raises the mean score over the training shapes, given the list so
far (on a shape where a listed config is illegal, its nearest legal twin runs: strategies.nearest_legal_twins).
Candidates are every config that is among some training shape's 10 fastest.
"""

from __future__ import annotations

import numpy as np

from rooftune.candidates import Config
from rooftune.roofline.fit import FitShape
from rooftune.tuner.search.strategies import nearest_legal_twins

POOL_PER_SHAPE = 10


def learn_static(shapes: list[FitShape], length: int = 20) -> list[Config]:
    """The greedy list (at most `length` configs) over `shapes` (their configs are each shape's legal set)."""
    pool: list[Config] = []
    for s in shapes:
        for i in np.argsort(np.where(np.isfinite(s.time_us), s.time_us, np.inf))[:POOL_PER_SHAPE]:
            if s.configs[i] not in pool:
                pool.append(s.configs[i])
    # score[p, s]: best / time of pool config p as it runs on shape s (its nearest legal twin there).
    score = np.zeros((len(pool), len(shapes)))
    for j, s in enumerate(shapes):
        times = dict(zip(s.configs, s.time_us))
        best = np.nanmin(s.time_us)
        for p, twin in enumerate(nearest_legal_twins(pool, list(s.configs))):
            t = times[twin]
            score[p, j] = best / t if np.isfinite(t) else 0.0
    chosen: list[int] = []
    current = np.zeros(len(shapes))
    for _ in range(min(length, len(pool))):
        gains = np.maximum(score, current).mean(axis=1)
        gains[chosen] = -1.0
        p = int(np.argmax(gains))
        chosen.append(p)
        current = np.maximum(current, score[p])
    return [pool[p] for p in chosen]
