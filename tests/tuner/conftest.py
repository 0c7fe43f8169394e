"""The tuner tests' fakes: a synthetic recorded shape (every legal config 'measured' at its predicted time times a
deterministic per-config factor, so the model's first is not always the best), a GPU that measures any shape so,
the live measurer replaced by one, and `benched`: rooftune.autotune's benchmarking replaced by a recorder."""

import zlib

import pytest

from rooftune.candidates import Trial, configs_to_columns, kernel_of, legal_configs
from rooftune.candidates.records import ShapeRecords
from rooftune.eval.scoring.replay import RecordedMeasurer
from rooftune.roofline import predict


def factor(config) -> float:
    """0.8 .. 1.4, a fixed function of the config's tiles, warps and stages: TMA (one value per shape) and
    GROUP_M (the tile order; twins otherwise alike) are left out, so a config's GROUP_M twin is a
    measured neighbour that tells the search about it."""
    key = ",".join(f"{k}={v}" for k, v in config.params if k not in ("TMA", "GROUP_M")) + \
        f",num_warps={config.num_warps},num_stages={config.num_stages}"
    return 0.8 + 0.6 * (zlib.crc32(key.encode()) % 1000) / 1000


def synthetic_records(shape, profile, failing=()) -> ShapeRecords:
    configs = legal_configs(kernel_of(shape).space, shape, profile).configs
    predicted = predict(shape, configs_to_columns(configs), profile).time_us
    trials = tuple(Trial(c, None, error="check: wrong") if c in failing else Trial(c, float(t) * factor(c))
                   for c, t in zip(configs, predicted))
    return ShapeRecords(shape, trials)


class CountingMeasurer:
    """A measurer over records that remembers every batch it was asked for."""

    def __init__(self, records):
        self.inner = RecordedMeasurer(records)
        self.batches = []

    def measure(self, shape, configs):
        self.batches.append(list(configs))
        return self.inner.measure(shape, configs)


class SyntheticGpu:
    """Any shape 'measured' as its synthetic records, the configs `failing(shape)` names failing their check; the
    library's time fixed; every batch kept (`batches`, and `shapes` in the order first measured)."""

    compile_s = 0.0

    def __init__(self, profile, baseline_us=50.0, failing=None):
        self.profile, self.library_us, self.failing = profile, baseline_us, failing
        self.recorded, self.shapes, self.batches = {}, [], []

    def measure(self, shape, configs):
        self.batches.append((shape, list(configs)))
        if shape not in self.recorded:
            failing = set(self.failing(shape)) if self.failing else ()
            self.recorded[shape] = RecordedMeasurer(synthetic_records(shape, self.profile, failing))
            self.shapes.append(shape)
        return self.recorded[shape].measure(shape, configs)

    def baseline_us(self):
        return self.library_us

    def measured(self, shape) -> set:
        return {c for s, batch in self.batches if s == shape for c in batch}


@pytest.fixture
def synthetic():
    """synthetic_records(shape, profile, failing=())"""
    return synthetic_records


@pytest.fixture
def counting():
    """CountingMeasurer(records)"""
    return CountingMeasurer


@pytest.fixture
def synthetic_gpu():
    """SyntheticGpu(profile, baseline_us=50.0, failing=None)"""
    return SyntheticGpu


@pytest.fixture
def shipped_triton(monkeypatch):
    """The Triton release the shipped residuals were fitted under, as the installed one: for tests of what
    the residual shows, run under any Triton (tests/tuner/test_triton_versions.py tests the others)."""
    from rooftune.tuner import cache, live_tune, residual_choice
    from rooftune.tuner.cli import explain

    for module in (cache, live_tune, residual_choice, explain):
        monkeypatch.setattr(module, "installed_triton", lambda: "3.6.0")


@pytest.fixture
def live_from(monkeypatch):
    """live_from(measurer, baseline_us=10.0): the live measurer `tune` opens replaced by `measurer` (no CUDA, no
    compile time, `baseline_us` as the library's time); returns the measurer."""
    import contextlib

    from rooftune.hwprofiles import hwprobe
    from rooftune.kernels.harness import live

    def install(measurer, baseline_us=10.0):
        measurer.compile_s = 0.0
        measurer.baseline_us = lambda: baseline_us
        monkeypatch.setattr(hwprobe, "require_cuda", lambda: None)
        monkeypatch.setattr(live, "live_measurer", lambda kernel, profile, **kw: contextlib.nullcontext(measurer))
        return measurer

    return install


@pytest.fixture
def benched(monkeypatch):
    """Every config rooftune.autotune's Autotuner benchmarks, in order; each timed faster than the one before, so
    the last is the choice (the kernel itself runs only for the call's own launch)."""
    from rooftune.kernels.autotune import OrderedAutotuner

    calls = []

    def fake_bench(self, *args, config, **meta):
        calls.append(config)
        return [100.0 - len(calls)] * 3

    monkeypatch.setattr(OrderedAutotuner, "_bench", fake_bench)
    return calls
