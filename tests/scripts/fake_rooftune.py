"""`rooftune` with the fake device of tests/fakes.py in place of a GPU: what the cluster recipe's
shards run in its tests (tests/scripts/test_cluster_recipe.py in-process; test_ray_cluster.py as the command
`python3 fake_rooftune.py sweep ...` that each Ray task starts).

As a command it reads two variables. ROOFTUNE_FAKE_LOG: a file each shape measured to its end is appended to,
as "SHAPE_ID PID". ROOFTUNE_FAKE_KILL: a file holding one shard ("1/2"); the first run of that shard to start
measuring its second shape takes the file (renamed to FILE.taken, its PID written in) and kills its parent,
the Ray worker running the shard, with SIGKILL, as a lost node or the OOM killer would; then it waits to be
taken down with its worker, and measures on if it is not (a rerun of the shard would then measure beside it).
"""

import functools
import os
import signal
import sys
import time
from pathlib import Path

from script_module import load_script

from rooftune.candidates import KERNELS, shape_id
from rooftune.eval.sweeping import sweep

FAKES = load_script("tests/fakes.py")
ORPHAN_WAIT_S = 60.0  # how long the killer waits to be killed with its worker before measuring on


class KillingMeasurer(FAKES.QuickMeasurer):
    """The fake device, logging each shape it finished and, for the shard named in `kill_file`, killing its
    parent process at its second shape."""

    def __init__(self, shard: str | None, log: str | None, kill_file: str | None):
        super().__init__(0.0)
        self.shard, self.log, self.kill_file, self.started = shard, log, kill_file, 0

    def measure(self, shape, configs, compiled):
        self.started += 1
        if self.started == 2 and self._takes_the_kill():
            os.kill(os.getppid(), signal.SIGKILL)
            time.sleep(ORPHAN_WAIT_S)
        records = super().measure(shape, configs, compiled)
        if self.log:
            with open(self.log, "a") as log:
                log.write(f"{shape_id(shape)} {os.getpid()}\n")
        return records

    def _takes_the_kill(self) -> bool:
        if not self.kill_file or not self.shard or not os.path.exists(self.kill_file):
            return False
        if Path(self.kill_file).read_text().strip() != self.shard:
            return False
        try:
            os.rename(self.kill_file, f"{self.kill_file}.taken")  # one taker, however many runs race for it
        except FileNotFoundError:
            return False
        Path(f"{self.kill_file}.taken").write_text(str(os.getpid()))
        return True


def sweep_part(kernel, shapes, reporter, *, shapes_path, listed, out, profile, sms, max_minutes, workers, settings,
               measurer=None):
    """What `rooftune sweep --shard` runs on a GPU (eval/sweeping/sweep.py `_sweep_part`), on the fake device."""
    return sweep.run_sweep(shapes, out, measurer or FAKES.QuickMeasurer(0.0), profile, kernel=KERNELS[kernel],
                           manifest={"shapes_file": Path(shapes_path).name, "shapes_listed": listed},
                           max_minutes=max_minutes, reporter=reporter,
                           device=f"gpu {os.environ.get('CUDA_VISIBLE_DEVICES', '0')}: fake")


def main() -> None:
    argv = sys.argv[1:]
    shard = argv[argv.index("--shard") + 1] if "--shard" in argv else None
    measurer = KillingMeasurer(shard, os.environ.get("ROOFTUNE_FAKE_LOG"), os.environ.get("ROOFTUNE_FAKE_KILL"))
    sweep._sweep_part = functools.partial(sweep_part, measurer=measurer)
    from rooftune.tuner.cli.app import main as rooftune

    rooftune()


if __name__ == "__main__":
    main()
