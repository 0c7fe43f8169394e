"""A kernel's IR work (kernels/introspect/work.py) put to one call: every program of the grid evaluated at once
(program ids as NumPy arrays), each op's amount times its loops' trip counts and its branches' shares, summed.

Stated rules where the call cannot give a count (each applied one is named in the result's notes, which
`explain` prints):
- a for loop whose bounds depend on what the call does not hold runs (the call's largest integer argument) / step
  iterations (at least one): as if it swept the call's largest size, so that its work still scales with the
  config's step the way a counted loop's does; a while loop that is not a counted one runs once;
- a branch on such a value is taken by half the programs (kernels/introspect/expressions.py `Chance`);
- a loop whose bounds read its enclosing loop's index (a loop over groups of their own sizes) is counted at each of
  the enclosing loop's iterations, up to UNROLL_TRIPS of them, else at its mean index (exact for affine bounds);
- a grid of more than MAX_PROGRAMS programs is evaluated on MAX_PROGRAMS of them spread evenly over the launch
  order, each standing for its share of the grid.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace

import numpy as np

from rooftune.kernels.introspect.expressions import Env, LoopIndex, evaluate, largest, trip_count
from rooftune.kernels.introspect.work import KernelWork, Loop, WorkItem

MAX_PROGRAMS = 1 << 16
# A loop whose bounds read its enclosing loop's index is counted at each of the enclosing loop's iterations where
# that loop has at most this many (per program); beyond, at the enclosing loop's mean index.
UNROLL_TRIPS = 64
# Programs whose work differs by less than this (relative) are one run of `work_runs`.
RUN_TOLERANCE = 1e-6


@dataclass(frozen=True)
class Tally:
    """A call's counts, summed over the grid (see candidates/kernel_counts.py `KernelCounts`): `loads` and
    `stores` bytes by argument (None: not traced to one); `loop_trips`: each loop's mean trips per program;
    `sharing`: for the arguments whose every load has an address, the share of their loaded bytes that are
    distinct among programs in flight together (`sharing`)."""

    programs: int
    mma_flops: dict[str, float]
    dot_operand_bytes: float
    loads: dict[str | None, float]
    stores: dict[str | None, float]
    vector_ops: float
    sfu_ops: float
    loop_iterations: float
    dot_executions: float
    loop_loads: float
    work_runs: tuple[tuple[float, int], ...]
    loop_trips: tuple[float, ...]
    notes: tuple[str, ...]
    sharing: dict = None  # argument -> ((programs in flight, distinct share), ...): `sharing`


def program_ids(grid: tuple[int, int, int], limit: int = MAX_PROGRAMS) -> tuple[tuple[np.ndarray, ...], float]:
    """(x, y, z ids of the programs evaluated, in launch order: x fastest; how many programs each stands for)."""
    total = int(np.prod(grid))
    linear = np.arange(total) if total <= limit else np.linspace(0, total - 1, limit).round().astype(np.int64)
    x, rest = linear % grid[0], linear // grid[0]
    return (x, rest % grid[1], rest // grid[1]), total / len(linear)


def _uses(expr, loop: int) -> bool:
    """Whether `expr` reads loop `loop`'s index."""
    if isinstance(expr, LoopIndex):
        return expr.loop == loop
    children = getattr(expr, "args", None) or [getattr(expr, n) for n in ("offset", "cond") if hasattr(expr, n)]
    return any(_uses(c, loop) for c in children)


def _trips(loop: Loop, lower, upper, step) -> np.ndarray:
    """Trips of `loop` from its evaluated bounds: ceil((upper − lower) / step), or (upper − lower) / step for a
    counter entering its range at any phase (`expected`)."""
    if loop.expected:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(step > 0, np.maximum((upper - lower) / step, 0.0), 0.0)
    return trip_count(lower, upper + (1 if loop.inclusive else 0), step)


def _unrolled(loop: Loop, env: Env, trips: dict[int, np.ndarray]) -> np.ndarray | None:
    """Trips per program of a loop whose bounds read its enclosing loop's index, averaged over each of the
    enclosing loop's iterations where it has at most UNROLL_TRIPS (a loop over groups of their own sizes); None
    where the bounds do not read it, it has more, or a bound cannot be evaluated at some iteration."""
    parent = loop.parent
    exprs = (loop.lower, loop.upper, loop.step)
    if parent is None or parent not in env.loop_starts or not any(_uses(e, parent) for e in exprs):
        return None
    outer = trips[parent]
    if not 1 <= outer.max(initial=0) <= UNROLL_TRIPS:
        return None
    start, step = env.loop_starts[parent]
    total = np.zeros(env.pids[0].shape)
    for i in range(int(outer.max())):
        index = np.broadcast_to(start + i * step, total.shape)
        view = replace(env, memo={}, loop_means={**env.loop_means, parent: index})
        bounds = [evaluate(e, view) for e in exprs]
        if any(b is None for b in bounds):
            return None
        total += np.where(i < outer, _trips(loop, *bounds), 0.0)
    return total / np.maximum(outer, 1)


def _loop_trips(loop: Loop, env: Env, trips: dict[int, np.ndarray], extent: float, notes: list[str]) -> np.ndarray:
    """Trips per program of `loop` (its enclosing loops' indices already in `env`), by the stated rule where the
    call cannot give them; records the loop's first index, step and mean index for the loops and ops inside it."""
    shape = env.pids[0].shape
    lower, upper, step = (evaluate(e, env) for e in (loop.lower, loop.upper, loop.step))
    counted = _unrolled(loop, env, trips)
    if counted is not None:
        trips_ = counted
    elif lower is None or upper is None or step is None:
        if loop.kind == "while":
            trips_ = np.ones(shape)
            notes.append(f"{loop.describe()}: counted as one trip (a while loop the call cannot count)")
        else:
            per = step if step is not None and np.all(step > 0) else np.asarray(1.0)
            trips_ = np.broadcast_to(np.maximum(np.ceil(extent / per), 1.0), shape)
            notes.append(f"{loop.describe()}: counted as {float(np.mean(trips_)):g} trips (the call's largest size "
                         f"{extent:g} / step)")
    else:
        trips_ = np.broadcast_to(_trips(loop, lower, upper, step), shape)
    if lower is not None and step is not None:
        env.loop_starts[loop.id] = (np.broadcast_to(lower, shape), np.broadcast_to(step, shape))
        env.loop_means[loop.id] = np.broadcast_to(lower + step * np.maximum(trips_ - 1, 0) / 2, shape)
    return trips_


def _weight(item: WorkItem, trips: dict[int, np.ndarray], env: Env) -> np.ndarray:
    """Executions of `item` per program: its loops' trips times its branches' shares."""
    weight = np.ones(env.pids[0].shape)
    for loop in item.loops:
        weight = weight * trips[loop]
    for guard in item.guards:
        share = evaluate(guard, env)
        weight = weight * (0.5 if share is None else np.clip(share, 0.0, 1.0))
    return weight


def _runs(work: np.ndarray, stands_for: float) -> tuple[tuple[float, int], ...]:
    """`work` relative to its mean, as (value, run length) pairs in launch order: a run goes on while a program's
    value is within RUN_TOLERANCE of the run's first (each run's end found in windows that double, so a launch of
    a few long runs costs a few array operations, not one Python step per program)."""
    mean = work.mean()
    if mean <= 0:
        return ((1.0, int(round(len(work) * stands_for))),)
    rel = work / mean
    runs: list[tuple[float, int]] = []
    start, n = 0, len(rel)
    while start < n:
        value, end, window = float(rel[start]), start + 1, 8
        while end < n:
            part = rel[end:end + window]
            off = np.flatnonzero(np.abs(part - value) > RUN_TOLERANCE * np.maximum(1.0, part))
            if off.size:
                end += int(off[0])
                break
            end, window = end + len(part), window * 2
        runs.append((value, end - start))
        start = end
    return tuple((v, max(1, int(round(k * stands_for)))) for v, k in runs)


def tally(work: KernelWork, env: Env, stands_for: float = 1.0) -> Tally:
    """`work` evaluated for the programs of `env` (each standing for `stands_for` programs of the grid)."""
    notes: list[str] = []
    extent = largest(list(env.args.values()))
    trips: dict[int, np.ndarray] = {}
    for loop in work.loops:  # parents come before their children
        trips[loop.id] = _loop_trips(loop, env, trips, extent, notes)
    sums: dict = defaultdict(float)
    per_program = np.zeros(env.pids[0].shape)
    moved = np.zeros(env.pids[0].shape)
    dots = np.zeros(env.pids[0].shape)
    loop_loads = np.zeros(env.pids[0].shape)
    innermost_loading: set[int] = {item.loops[-1] for item in work.items if item.kind == "load" and item.loops}
    for item in work.items:
        executions = _weight(item, trips, env)
        total = float(executions.sum()) * stands_for * item.amount
        sums[(item.kind, item.dtype if item.kind == "dot" else item.tensor)] += total
        if item.kind == "dot":
            sums["operand"] += float(executions.sum()) * stands_for * item.operand_bytes
            per_program += executions * item.amount
            dots += executions if item.waits else 0.0
        elif item.kind in ("load", "store"):
            moved += executions * item.amount
            if item.kind == "load" and item.loops:
                loop_loads += executions
    iterations = np.zeros(env.pids[0].shape)
    for loop_id in innermost_loading:
        chain, lid = np.ones(env.pids[0].shape), loop_id
        while lid is not None:
            chain, lid = chain * trips[lid], work.loops[lid].parent
        iterations += chain
    programs = int(round(len(env.pids[0]) * stands_for))
    return Tally(
        programs=programs,
        mma_flops={d: v for (k, d), v in _pairs(sums) if k == "dot"},
        dot_operand_bytes=sums["operand"],
        loads={t: v for (k, t), v in _pairs(sums) if k == "load"},
        stores={t: v for (k, t), v in _pairs(sums) if k == "store"},
        vector_ops=sum(v for (k, _), v in _pairs(sums) if k == "vector"),
        sfu_ops=sum(v for (k, _), v in _pairs(sums) if k == "sfu"),
        loop_iterations=float(iterations.mean()) if len(iterations) else 0.0,
        dot_executions=float(dots.mean()) if len(dots) else 0.0,
        loop_loads=float(loop_loads.mean()) if len(loop_loads) else 0.0,
        work_runs=_runs(per_program if per_program.any() else moved, stands_for),
        loop_trips=tuple(float(np.mean(trips[loop.id])) for loop in work.loops),
        notes=tuple(dict.fromkeys(notes + env.unresolved)), sharing=sharing(work, env, trips, stands_for))


def _key_ids(item: WorkItem, first: Env, n: int) -> np.ndarray | None:
    """An id per program of where `item`'s tiles start (equal ids: the same tiles), None where not evaluable."""
    values = [evaluate(e, first) for e in item.address or ()]
    if not values or any(v is None for v in values):
        return None
    return packed_rows(values, n)


def packed_rows(columns: list, n: int) -> np.ndarray:
    """One integer per row of `columns` (arrays of n, or scalars), equal where the rows are equal and ordered as
    they are lexicographically (np.unique over the rows, which sorts far slower, ranks them alike): a column of whole
    numbers packed as its offset from its least, any other as its values' ranks."""
    key, span = np.zeros(n, dtype=np.int64), 1
    for v in columns:
        column = np.broadcast_to(np.asarray(v, dtype=float), (n,))
        low = float(column.min()) if n else 0.0
        size = float(column.max()) - low + 1.0 if n else 1.0
        if n and np.isfinite(size) and size < MAX_PACKED and (column == np.round(column)).all():
            codes = (column - low).astype(np.int64)
        else:
            codes = np.unique(column, return_inverse=True)[1].reshape(-1).astype(np.int64)
            size = float(codes.max()) + 1.0 if n else 1.0
        if span * size >= MAX_PACKED:  # repack what is packed so far as ranks (at most n), then the column too
            key = np.unique(key, return_inverse=True)[1].reshape(-1).astype(np.int64)
            span = int(key.max()) + 1
            if span * size >= MAX_PACKED:
                codes = np.unique(codes, return_inverse=True)[1].reshape(-1).astype(np.int64)
                size = float(codes.max()) + 1.0
        key, span = key * int(size) + codes, span * int(size)
    return key


MAX_PACKED = 2.0 ** 62  # packed row keys stay within int64


def sharing(work: KernelWork, env: Env, trips: dict[int, np.ndarray], stands_for: float) -> dict:
    """Per argument whose every load has an address: ((programs in flight S, share), ...) for S = 1, 2, 4, ...:
    the loaded bytes of S consecutive programs (launch order) that are distinct tiles, over their bytes (1: no two
    read the same; 1/S: all read the same, equally much). Tiles are told apart by where each program's sequence of
    them starts (the first iteration of its loops: kernels/introspect/addresses.py); a group of programs starting
    alike reads its longest program's tiles (a causal row's prefix covers the shorter rows')."""
    n = len(env.pids[0])
    first = replace(env, memo={}, loop_means={k: start for k, (start, _) in env.loop_starts.items()})
    per_tensor: dict = defaultdict(list)
    for item in work.items:
        if item.kind == "load" and item.tensor is not None:
            per_tensor[item.tensor].append((item, _key_ids(item, first, n), _weight(item, trips, env) * item.amount))
    out = {}
    sizes = [2 ** k for k in range(int(np.log2(max(n, 1))) + 1)]
    for tensor, entries in per_tensor.items():
        total = sum(float(b.sum()) for _, _, b in entries)
        if any(ids is None for _, ids, _ in entries) or total <= 0:
            continue
        distinct = np.zeros(len(sizes))
        for _, ids, moved in entries:
            distinct += _distinct_bytes(ids, moved, sizes)
        out[tensor] = tuple((size * stands_for, float(d) / total) for size, d in zip(sizes, distinct))
    return out


def _distinct_bytes(ids: np.ndarray, moved: np.ndarray, sizes: list[int]) -> np.ndarray:
    """Per size S of `sizes`: bytes of the distinct tiles in each run of S consecutive programs, summed over the
    runs: programs whose tiles start alike walk the same sequence of them, so a group of them reads its longest
    program's bytes. One sort for every size: programs by id, in launch order within an id, are also in order of
    their run (position // S) within an id."""
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    sorted_moved = np.broadcast_to(moved, ids.shape)[order]
    new_id = np.r_[True, np.diff(sorted_ids) != 0]
    out = np.empty(len(sizes))
    for k, size in enumerate(sizes):
        block = order // size
        starts = np.flatnonzero(new_id | np.r_[True, np.diff(block) != 0])
        out[k] = np.maximum.reduceat(sorted_moved, starts).sum()
    return out


def _pairs(sums: dict) -> list:
    return [(k, v) for k, v in sums.items() if isinstance(k, tuple)]
