"""The live measurer's logic on the CPU with a fake device: prefetched compiles, the anchor across rounds,
a crashed compile worker."""

from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool

import pytest

from rooftune.candidates import KERNELS, Config
from rooftune.eval.datasets.format import ShapeRecords, Trial
from rooftune.kernels.harness.live import LiveMeasurer


def cfg(i):
    return Config.make(4, 3, BLOCK_M=16 * (i + 1))


class FakePool:
    """Compiles at once, except configs in `queued`: those wait for a worker until `run_queued`."""

    def __init__(self, broken=(), queued=()):
        self.submitted, self.broken, self.queued, self.waiting = [], set(broken), set(queued), []

    def submit(self, shape, config):
        self.submitted.append(config)
        f = Future()
        if config in self.broken:
            f.set_exception(BrokenProcessPool("worker died"))
        elif config in self.queued:
            self.waiting.append(f)
        else:
            f.set_result(0.5)
        return f

    def run_queued(self):
        for f in self.waiting:
            if f.set_running_or_notify_cancel():
                f.set_result(0.5)


class FakeKM:
    """Times: config i takes 10 + i µs, times the clock factor of the current round."""

    baseline, timeout_base_s, timeout_per_config_s, device = "cublas", 60.0, 2.0, "cpu"
    kernel = KERNELS["gemm"]

    def __init__(self, pool):
        self.pool, self.factor, self.timed, self.compiled_again = pool, 1.0, [], []

    def compile_timeout_s(self, n):
        return self.timeout_base_s + self.timeout_per_config_s * n

    def compile(self, jobs, timeout_s=None):
        self.compiled_again.extend(c for _, c in jobs)
        return {c: "worker process died while compiling" for _, c in jobs}

    def measure(self, shape, configs, compiled):
        self.timed.append(list(configs))
        rows = tuple(Trial(c, None, error=compiled[c]) if isinstance(compiled[c], str) else
                     Trial(c, (10.0 + c["BLOCK_M"] / 16) * self.factor, compile_s=compiled[c]) for c in configs)
        return ShapeRecords(shape, rows, baselines_us={"cublas": 9.0 * self.factor})


def test_prefetched_configs_are_not_compiled_twice():
    pool = FakePool()
    live = LiveMeasurer(FakeKM(pool))
    live.prefetch("s", [cfg(0), cfg(1), cfg(2)])
    live.measure("s", [cfg(0), cfg(1)])
    assert pool.submitted == [cfg(0), cfg(1), cfg(2)]
    live.measure("s", [cfg(2), cfg(3)])
    assert pool.submitted == [cfg(0), cfg(1), cfg(2), cfg(3)]


def test_cuda_starts_at_the_first_measurement_after_the_prefetched_compiles_are_submitted():
    pool, events = FakePool(), []
    live = LiveMeasurer(FakeKM(pool), cuda_started=False)
    live.start_cuda = lambda device: events.append(("cuda", len(pool.submitted)))
    live.prefetch("s", [cfg(0), cfg(1)])
    assert events == [] and live.cuda_s == 0.0  # nothing of CUDA yet: the compiles are under way
    live.measure("s", [cfg(0), cfg(1)])
    first = live.first_measure_at
    live.measure("s", [cfg(2)])
    assert events == [("cuda", 2)] and live.cuda_s >= 0.0  # once, before the first round was timed
    assert first is not None and live.first_measure_at == first  # where a tune's start-up ends


def test_the_measurer_is_built_without_torch_or_triton():
    # A live tune builds it between starting the compile workers and submitting their first configs:
    # the kernel's module (triton) loads with torch at the first measurement, not before.
    import subprocess
    import sys

    code = ("import sys\nfrom rooftune.hwprofiles import load_profile\n"
            "from rooftune.kernels.harness.measure import kernel_measurer\n"
            "for kernel in ('gemm', 'attention'):\n"
            "    km = kernel_measurer(kernel, load_profile('h200'), pool=object())\n"
            "    assert km.kernel_sha and km.kernel.module.endswith(kernel)\n"
            "print('torch' in sys.modules, 'triton' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False False"


def test_a_round_goes_ahead_of_prefetched_configs_still_waiting_for_a_worker():
    pool = FakePool(queued={cfg(1), cfg(2)})
    live = LiveMeasurer(FakeKM(pool))
    live.prefetch("s", [cfg(0), cfg(1), cfg(2)])
    pool.queued = set()  # from now on workers are free
    live.measure("s", [cfg(3)])  # not prefetched: submitted first, the waiting two again behind it
    assert pool.submitted == [cfg(0), cfg(1), cfg(2), cfg(3), cfg(1), cfg(2)]
    pool.run_queued()  # the cancelled futures do not run
    live.measure("s", [cfg(1), cfg(2)])
    assert pool.submitted == [cfg(0), cfg(1), cfg(2), cfg(3), cfg(1), cfg(2)]


def test_configs_that_differ_only_in_run_time_parameters_compile_once():
    a, b = (Config.make(4, 3, BLOCK_M=64, BLOCK_N=32, GROUP_M=g) for g in (1, 8))  # one binary
    pool = FakePool(queued={a})
    live = LiveMeasurer(FakeKM(pool))
    live.prefetch("s", [a, b, cfg(0)])
    live.prefetch("t", [b])  # another shape: its own binaries
    assert pool.submitted == [a, cfg(0), b]
    pool.queued = set()
    live.measure("s", [cfg(3)])  # ahead of the waiting twins, which go back in the queue as one compile
    assert pool.submitted == [a, cfg(0), b, cfg(3), a]
    trials = live.measure("s", [a, b])
    assert pool.submitted == [a, cfg(0), b, cfg(3), a] and all(t.ok for t in trials)


def test_later_rounds_are_scaled_by_the_first_rounds_fastest():
    km = FakeKM(FakePool())
    live = LiveMeasurer(km)
    first = live.measure("s", [cfg(1), cfg(0)])
    assert [t.time_us for t in first] == [12.0, 11.0]
    km.factor = 1.3  # the clock dropped: every time in this round is 30% longer
    later = live.measure("s", [cfg(2), cfg(3)])
    assert km.timed[-1] == [cfg(2), cfg(3), cfg(0)]  # the anchor, timed again beside them
    assert [t.time_us for t in later] == pytest.approx([13.0, 14.0])
    assert live.baseline_us() == pytest.approx(9.0 * 1.3)


def test_a_crashed_worker_recompiles_one_at_a_time_and_fails_the_config():
    km = FakeKM(FakePool(broken={cfg(1)}))
    live = LiveMeasurer(km)
    trials = live.measure("s", [cfg(0), cfg(1)])
    assert km.compiled_again == [cfg(1)]
    assert trials[0].ok and not trials[1].ok and "died" in trials[1].error


def test_the_baseline_is_never_an_earlier_shapes():
    km = FakeKM(FakePool())
    live = LiveMeasurer(km)
    live.measure("a", [cfg(0)])
    assert live.baseline_us() == 9.0
    km.measure = lambda shape, configs, compiled: ShapeRecords(shape, tuple(Trial(c, 1.0) for c in configs))
    live.measure("b", [cfg(0)])
    assert live.baseline_us() is None
