"""The IR tally's array shortcuts against their plain definitions, on seeded random programs: the work runs (a run
goes on while a program's value is within the tolerance of the run's first), the distinct bytes of each run of S
consecutive programs, and the tile ids (rows' lexicographic rank)."""

import numpy as np

from rooftune.kernels.introspect import tally


def plain_runs(work, stands_for):
    mean = work.mean()
    if mean <= 0:
        return ((1.0, int(round(len(work) * stands_for))),)
    runs = []
    for value in work / mean:
        if runs and abs(runs[-1][0] - value) <= tally.RUN_TOLERANCE * max(1.0, value):
            runs[-1][1] += 1
        else:
            runs.append([float(value), 1])
    return tuple((v, max(1, int(round(n * stands_for)))) for v, n in runs)


def plain_distinct_bytes(ids, moved, size):
    total = 0.0
    for start in range(0, len(ids), size):
        best: dict = {}
        for i in range(start, min(start + size, len(ids))):
            best[ids[i]] = max(best.get(ids[i], 0.0), moved[i])
        total += sum(best.values())
    return total


def test_the_shortcuts_equal_their_definitions():
    rng = np.random.default_rng(7)
    for case in range(120):
        n = int(rng.integers(1, 1500))
        kind = case % 3
        if kind == 0:  # a few long runs
            work = np.repeat(rng.random(int(rng.integers(1, 12))), int(rng.integers(1, 300)))[:n]
        elif kind == 1:  # every program its own
            work = rng.random(n)
        else:  # uniform with rare outliers
            work = np.full(n, rng.random()) + (rng.random(n) < 0.02) * rng.random(n)
        stands_for = float(rng.choice([1.0, 2.5]))
        assert tally._runs(work, stands_for) == plain_runs(work, stands_for)
        ids = rng.integers(0, int(rng.integers(1, 40)), size=n)
        moved = rng.random(n)
        sizes = [2 ** k for k in range(int(np.log2(n)) + 1)]
        np.testing.assert_allclose(tally._distinct_bytes(ids, moved, sizes),
                                   [plain_distinct_bytes(ids, moved, s) for s in sizes])


def ranks(packed: np.ndarray) -> np.ndarray:
    return np.unique(packed, return_inverse=True)[1].reshape(-1)


def test_tile_ids_are_the_rows_lexicographic_rank():
    rng = np.random.default_rng(3)
    for trial in range(60):
        n = int(rng.integers(1, 800))
        step = 1.5 if trial % 2 else 1.0  # whole numbers are packed as offsets, others as ranks
        columns = [rng.integers(0, int(rng.integers(1, 20)), size=n).astype(float) * step
                   for _ in range(int(rng.integers(1, 4)))]
        if rng.random() < 0.3:
            columns.append(np.float64(rng.integers(0, 5)))  # a scalar: the same for every program
        rows = np.stack([np.broadcast_to(c, (n,)) for c in columns], axis=1)
        expected = np.unique(rows, axis=0, return_inverse=True)[1].reshape(-1)
        assert (ranks(tally.packed_rows(columns, n)) == expected).all()
        packed = tally.packed_rows(columns, n)  # what the sharing tables sort: the ranks' order and ties
        assert (np.argsort(packed, kind="stable") == np.argsort(expected, kind="stable")).all()
    wide = [np.arange(5.0) * 2.0 ** 40, np.arange(5.0)[::-1] * 2.0 ** 40, np.array([0.0, 1, 0, 1, 0]) * 2.0 ** 50]
    assert (ranks(tally.packed_rows(wide, 5)) == np.arange(5)).all()  # spans past int64 are repacked as ranks
