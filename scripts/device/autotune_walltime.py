"""The first call of a new key, side by side on one GPU: `@triton.autotune` over a suite kernel's whole config list
against `@rooftune.autotune(..., budget=5)` on the same list, each in a fresh process with an empty Triton cache and
an empty rooftune cache (compile and benchmark both counted), alternating kernel by kernel; and the chosen config's
time in each (Triton's do_bench, after the tune), so the speed-up is read beside what it costs.

    python3 scripts/device/autotune_walltime.py --out datasets/h100/suite/walltime.jsonl --seconds 500 \\
        [--kernels a,b] [--min-configs 25]
    python3 scripts/device/autotune_walltime.py --out datasets/h100/suite/walltime.jsonl --report   # no GPU needed

Each line of --out: {"kernel", "shape", "configs", "mode": "triton" | "rooftune", "first_call_s", "phases_s" (where
the first call's seconds went: rooftune's "order", "bench", "pool_ready" and the order's steps "order_pool",
"order_lower", "order_read", "order_launcher", "order_compile", ... (kernel_order.last_seconds); Triton's "bench"),
"choice", "choice_us"; with `--next-keys N`, "next_calls": the first calls of the kernel's next N shapes in the same
process, new keys of an autotuner that has tuned once, each {"shape", "call_s", "phases_s", "choice", "choice_us"};
with `--warm-up S`, "warm_up_s": rooftune's process called `rooftune.warm_up()` at its start, its first call S
seconds later},
or {"kernel", "mode", "error"} for a first call that failed or ran past 10 minutes (the run goes on); a kernel with
both lines in --out is skipped (a later call resumes), and `--seconds` starts a kernel only where the time left
covers the longest one so far (the file's, or 60 s where it has none). The summary printed at the end gives, per
kernel of the file, triton's first call ÷ rooftune's and the two choices' times (and the further keys'). Needs the
suite (rooftune.kernels.suite) and a CUDA GPU.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

FIRST_KERNEL_S = 60.0  # a kernel's two first calls before any is timed (11 kernels on an H100: 15-43 s, plus starts)
CHILD_TIMEOUT_S = 600.0  # one first call, compile included (Triton's over a 200-config list is minutes)
PROFILE_ENV = "ROOFTUNE_WALLTIME_PROFILE"  # set by --profile: the folder for each first call's cProfile summary


def child(mode: str, name: str, budget: int, next_keys: int = 0, warm_up_s: float = 0.0) -> dict:
    """One first call of `name`'s first shape under `mode`'s autotuner, in this (fresh) process; then the first call
    of each of its next `next_keys` shapes (new keys in a process that has tuned the kernel once). With `warm_up_s`,
    rooftune's process calls `rooftune.warm_up()` first and makes its first call `warm_up_s` seconds after it (a
    program's start-up of that length)."""
    warmed = time.perf_counter()
    import rooftune

    warm = bool(warm_up_s) and mode == "rooftune"
    if warm:
        rooftune.warm_up()
    import torch
    import triton

    from rooftune.kernels.suite import SUITE

    kernel = SUITE[name]
    shape = kernel.shapes[0]
    args = kernel.make_args(shape, "cuda")
    common = dict(configs=list(kernel.configs), key=list(kernel.key), reset_to_zero=list(kernel.reset) or None)
    tuned = (triton.autotune(**common) if mode == "triton" else rooftune.autotune(budget=budget, **common))(kernel.fn)
    torch.cuda.synchronize()
    if warm:
        time.sleep(max(0.0, warm_up_s - (time.perf_counter() - warmed)))
    profile_path = None
    if mode == "rooftune" and os.environ.get(PROFILE_ENV):  # rooftune's first call under cProfile, summary to a file
        profile_path = os.path.join(os.environ[PROFILE_ENV], f"{name}_{mode}.txt")
    first = timed_call(tuned, kernel, args, mode, profile_path)
    row = {"kernel": name, "shape": shape, "configs": len(kernel.configs), "mode": mode,
           "first_call_s": first.pop("call_s"), **first}
    if warm:
        row["warm_up_s"] = warm_up_s
    if next_keys:
        row["next_calls"] = [{"shape": s, **timed_call(tuned, kernel, kernel.make_args(s, "cuda"), mode)}
                             for s in kernel.shapes[1:1 + next_keys]]
    return row


def timed_call(tuned, kernel, args: dict, mode: str, profile_path: str | None = None) -> dict:
    """One call of the autotuned `tuned` on `args`, timed to its end (under cProfile, its summary written to
    `profile_path`, where given): {"call_s", "phases_s" (where a tune's time went: rooftune's order, its steps and
    timing, its compile pool's start; Triton's benchmarking of the whole list, its compiles inside it), "choice",
    "choice_us" (the chosen config's time, Triton's do_bench)}."""
    import torch
    import triton

    profiler = None
    if profile_path is not None:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    torch.cuda.synchronize()
    started = time.perf_counter()
    tuned[lambda meta: kernel.grid(args, meta)](**args)
    torch.cuda.synchronize()
    call_s = time.perf_counter() - started
    if profiler is not None:
        import io
        import pstats

        profiler.disable()
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(45)
        with open(profile_path, "w") as f:
            f.write(f"first call {call_s:.2f} s\n{text.getvalue()}")
    if mode == "rooftune":
        from rooftune.tuner.pytorch import kernel_order

        phases = {**tuned.tune_seconds, "pool_ready": kernel_order.pool_ready_seconds(),
                  **{f"order_{step}": s for step, s in kernel_order.last_seconds.items()}}
    else:
        phases = {"bench": getattr(tuned, "bench_time", None)}
    choice = tuned.best_config
    choice_ms = triton.testing.do_bench(lambda: kernel.launch(args, choice), return_mode="median")
    return {"call_s": call_s, "phases_s": phases, "choice": str(choice), "choice_us": choice_ms * 1e3}


def run_child(mode: str, name: str, budget: int, timeout_s: float = CHILD_TIMEOUT_S, next_keys: int = 0,
              warm_up_s: float = 0.0) -> dict:
    """`child` in a fresh process with empty caches of its own; a child that fails or runs past `timeout_s` is an
    error row (its last lines of output), not the end of the run."""
    with tempfile.TemporaryDirectory(prefix="walltime-") as folder:
        env = {**os.environ, "TRITON_CACHE_DIR": os.path.join(folder, "triton"),
               "ROOFTUNE_CACHE": os.path.join(folder, "rooftune", "tune.json")}
        env.pop("TRITON_INTERPRET", None)
        try:
            done = subprocess.run([sys.executable, __file__, "--next-keys", str(next_keys), "--warm-up", str(warm_up_s),
                                   "--child", mode, name, "--budget", str(budget)],
                                  env=env, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return {"kernel": name, "mode": mode, "error": f"no first call within {timeout_s:.0f} s"}
        lines = done.stdout.strip().splitlines()
        if done.returncode != 0 or not lines:
            tail = " | ".join(line.strip() for line in (done.stderr or done.stdout).strip().splitlines()[-3:])
            return {"kernel": name, "mode": mode, "error": f"exit {done.returncode}: {tail}"}
        return json.loads(lines[-1])


def done_rows(path: str) -> list[dict]:
    """The rows already in --out (none where it does not exist)."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def longest_kernel(done: list[dict]) -> float:
    """The most seconds one kernel's two first calls took in `done` (FIRST_KERNEL_S where none finished)."""
    spent: dict[str, float] = {}
    for r in done:
        if "first_call_s" in r:
            spent[r["kernel"]] = spent.get(r["kernel"], 0.0) + r["first_call_s"] + sum(
                n["call_s"] for n in r.get("next_calls", ()))
    return max(spent.values(), default=FIRST_KERNEL_S)


def measure(names: list[str], out_path: str, budget: int, seconds: float, done: list[dict],
            clock=time.monotonic, next_keys: int = 0, warm_up_s: float = 0.0) -> list[dict]:
    """Both modes' first calls of each kernel of `names` not in `done`, appended to `out_path` as they come, while
    the seconds left cover the longest kernel so far (at first, the longest in `done`, or FIRST_KERNEL_S where
    `done` has none); the new rows."""
    rows, started, longest = [], clock(), longest_kernel(done)
    os.makedirs(os.path.dirname(out_path) or ".", exist_ok=True)
    with open(out_path, "a") as out:
        for name in names:
            if {r["mode"] for r in done if r["kernel"] == name} == {"triton", "rooftune"}:
                continue
            left = seconds - (clock() - started)
            if left < longest:
                print(f"{name}: not started, {left:.0f} s left, ~{longest:.0f} s needed")
                continue
            began = clock()
            for mode in ("triton", "rooftune"):  # side by side: one kernel's two first calls back to back
                rows.append(run_child(mode, name, budget, next_keys=next_keys, warm_up_s=warm_up_s))
                out.write(json.dumps(rows[-1]) + "\n")
                out.flush()
            longest = max(longest, clock() - began)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="walltime.jsonl")
    parser.add_argument("--kernels", default=None)
    parser.add_argument("--min-configs", type=int, default=25)
    parser.add_argument("--budget", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=float("inf"), help="start no kernel past this")
    parser.add_argument("--report", action="store_true", help="print the summary of --out and measure nothing")
    parser.add_argument("--profile", default=None, metavar="FOLDER",
                        help="run each first call under cProfile, its top functions in FOLDER/KERNEL_MODE.txt")
    parser.add_argument("--next-keys", type=int, default=0, metavar="N",
                        help="after each first call, the first calls of the kernel's next N shapes in the same process")
    parser.add_argument("--warm-up", type=float, default=0.0, metavar="SECONDS",
                        help="rooftune's process calls rooftune.warm_up() at its start, its first call SECONDS later")
    parser.add_argument("--child", nargs=2, metavar=("MODE", "KERNEL"), help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.child:
        print(json.dumps(child(*options.child, options.budget, options.next_keys, options.warm_up)))
        return
    from rooftune.kernels.suite import SUITE

    names = options.kernels.split(",") if options.kernels else [n for n, k in SUITE.items()
                                                                if len(k.configs) >= options.min_configs]
    unknown = [n for n in names if n not in SUITE]
    if unknown:
        parser.error(f"not suite kernels: {', '.join(unknown)} (rooftune.kernels.suite has {', '.join(SUITE)})")
    results = done_rows(options.out)
    if options.profile:
        os.makedirs(options.profile, exist_ok=True)
        os.environ[PROFILE_ENV] = os.path.abspath(options.profile)
    if not options.report:
        results += measure(names, options.out, options.budget, options.seconds, results, next_keys=options.next_keys,
                           warm_up_s=options.warm_up)
    ratios, speeds, further = [], [], []
    for name in dict.fromkeys(r["kernel"] for r in results):
        rows = {r["mode"]: r for r in results if r["kernel"] == name}
        failed = [f"{m}: {r['error']}" for m, r in rows.items() if "error" in r]
        if failed:
            print(f"{name}: failed ({'; '.join(failed)})")
            continue
        if set(rows) != {"triton", "rooftune"}:
            continue
        triton_row, rooftune_row = rows["triton"], rows["rooftune"]
        ratio = triton_row["first_call_s"] / rooftune_row["first_call_s"]
        ratios.append(ratio)
        speeds.append(triton_row["choice_us"] / rooftune_row["choice_us"])
        print(f"{name} ({triton_row['configs']} configs): first call {triton_row['first_call_s']:.1f} s ÷ "
              f"{rooftune_row['first_call_s']:.1f} s = {ratio:.1f}x;"
              f" choices {triton_row['choice_us']:.1f} µs (triton) and {rooftune_row['choice_us']:.1f} µs (rooftune)"
              f"{phase_text(rooftune_row)}")
        pairs = list(zip(triton_row.get("next_calls", ()), rooftune_row.get("next_calls", ()), strict=False))
        if pairs:
            further += [t["call_s"] / r["call_s"] for t, r in pairs]
            print("    further keys: " + "; ".join(
                f"{t['call_s']:.2f} s ÷ {r['call_s']:.2f} s = {t['call_s'] / r['call_s']:.1f}x, choices "
                f"{t['choice_us']:.1f} and {r['choice_us']:.1f} µs" for t, r in pairs))
    if ratios:
        print(f"{len(ratios)} kernels: first call {geometric_mean(ratios):.1f}x less (min {min(ratios):.1f}x), "
              f"rooftune's choice at {geometric_mean(speeds):.3f} of triton's speed (min {min(speeds):.3f})")
    if further:
        print(f"{len(further)} further keys: {geometric_mean(further):.1f}x less (min {min(further):.1f}x)")


def phase_text(row: dict) -> str:
    """Where a rooftune first call went, where its row says ("" for rows before the phases were recorded)."""
    phases = {k: v for k, v in (row.get("phases_s") or {}).items() if isinstance(v, (int, float))}
    if "order" not in phases:
        return ""
    steps = ", ".join(f"{k[6:]} {v:.2f}" for k, v in phases.items() if k.startswith("order_") and v >= 0.05)
    return f"\n    rooftune: order {phases['order']:.2f} s ({steps}), bench {phases.get('bench', float('nan')):.2f} s"


def geometric_mean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


if __name__ == "__main__":
    main()
