"""Tasks for the per-GPU worker processes of test_shard.py: a spawned worker imports its task by module
name, so they live here, imported through sys.path, not in the test module; the fake device is tests/fakes.py's."""

import os

from fakes import QuickMeasurer

from rooftune.eval.datasets.format import update_manifest
from rooftune.eval.sweeping.quarantine import ContextQuarantined
from rooftune.eval.sweeping.sweep import run_sweep
from rooftune.hwprofiles import load_profile


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
