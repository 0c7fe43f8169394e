"""Tasks for the per-GPU worker processes of test_shard.py: a spawned worker imports its task by module
name, so they live here, imported through sys.path, not in the test module."""

import os
import time

from rooftune.eval.datasets.format import ShapeRecords, Trial, update_manifest
from rooftune.eval.sweeping.quarantine import ContextQuarantined
from rooftune.eval.sweeping.sweep import run_sweep
from rooftune.hwprofiles import load_profile

REPEATABILITY = {"abs_median": 0.004, "abs_p90": 0.01, "ratio_median": 0.003, "ratio_p90": 0.01,
                 "best_within_1pct": True}


class QuickMeasurer:
    """Every config compiles and takes a time fixed by its parameters; a shape takes `shape_s` to measure."""

    def __init__(self, shape_s=0.02):
        self.shape_s = shape_s

    def group_key(self, shape):
        return shape.layout

    def compile(self, jobs, timeout_s=None):
        return {c: 0.1 for _, c in jobs}

    def measure(self, shape, configs, compiled):
        time.sleep(self.shape_s)
        rows = tuple(Trial(c, float(c["BLOCK_M"] + c["num_stages"]), None, 0.1, 7) for c in configs)
        return ShapeRecords(shape, rows, {"cublas": 1.0}, {"repeatability": REPEATABILITY})


def this_gpu() -> str:
    return os.environ["CUDA_VISIBLE_DEVICES"]


def sweep_part(out, shapes, reporter):
    """A worker's sweep of its part into the shared folder `out`, as `rooftune sweep --gpus` runs it."""
    return run_sweep(shapes, out, QuickMeasurer(), load_profile("h200"), reporter=reporter,
                     device=f"gpu {this_gpu()}: fake")


def echo(shapes, reporter):
    reporter.phase(shapes[0], "working")
    reporter.finished(shapes[0], 1.5)
    return this_gpu(), [str(s) for s in shapes]


def fail_on(gpu, shapes, reporter):
    if this_gpu() == gpu:
        raise ContextQuarantined(f"config X killed the CUDA context on {gpu}")
    return "ok"


def die(shapes, reporter):
    os._exit(9)


def count_up(out, times, shapes, reporter):
    """`times` read-modify-writes of the manifest's counter: the lock must lose none."""
    for _ in range(times):
        update_manifest(out, lambda m: {**m, "count": m.get("count", 0) + 1})
    return times
