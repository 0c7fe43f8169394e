"""The routes backfill with a fake measurer: SDPA backends that a sweep built but never timed, added on
the dataset's scale through its recorded SDPA time; rows and recorded baselines unchanged; resume; the
time budget; a route that cannot run keeps its reason; the sweep's final passes now time every route."""

import pytest
from typer.testing import CliRunner

from rooftune.candidates import KERNELS, AttentionShape, legal_configs
from rooftune.eval.sweeping.backfill import backfill_routes, routes_backfilled_shape, untimed_routes
from rooftune.eval.datasets.format import (
    DatasetError,
    ShapeRecords,
    Trial,
    open_dataset,
    read_manifest,
    read_shape,
    write_shape,
)
from rooftune.hwprofiles import load_profile
from rooftune.kernels.harness.benches import SDPA_ROUTES
from rooftune.kernels.harness.measure import ROUTE_UNTIMED, RetimePasses
from rooftune.tuner.cli.app import app

PROFILE = load_profile("h200")
SPACE = KERNELS["attention"].space
SHAPES = [AttentionShape(2, 8, 256, 64), AttentionShape(1, 16, 512, 128, kv_heads=4), AttentionShape(3, 4, 96, 64)]
DRIFT = 0.95  # the backfill's GPU runs this much faster than during the sweep
# what each backend takes relative to SDPA's own choice on the fake GPU (efficient refuses GQA there)
ROUTE_FACTOR = {"sdpa": 1.0, "sdpa:cudnn": 1.01, "sdpa:flash": 1.7, "sdpa:efficient": 0.8}
NO_GQA = "RuntimeError: No available kernel. Aborting execution."


def sdpa_us(shape) -> float:
    return shape.batch * shape.heads * shape.seq / 100


def old_sweep(root, shapes=SHAPES) -> dict[str, bytes]:
    """A dataset as attention sweeps wrote it before every route was in the final passes: SDPA and
    cuDNN recorded, flash (and efficient where it runs) built but untimed. Returns the files' bytes."""
    open_dataset(root, {"kernel": "attention", "space_version": SPACE.version, "gpu_profile": PROFILE.name,
                        "sms": None})
    for shape in shapes:
        configs = legal_configs(SPACE, shape, PROFILE).configs[:4]
        rows = tuple(Trial(c, 10.0 + i, None, 0.3, 7, 0.01, 10.0 + i) for i, c in enumerate(configs))
        absent = {"sdpa:flash": ROUTE_UNTIMED,
                  "sdpa:efficient": NO_GQA if shape.kv_heads != shape.heads else ROUTE_UNTIMED}
        write_shape(root, ShapeRecords(shape, rows, {"sdpa": sdpa_us(shape), "sdpa:cudnn": 1.01 * sdpa_us(shape)},
                                      {"legal_configs": len(configs), "baseline_errors": absent}))
    return {p.name: p.read_bytes() for p in (root / "shapes").iterdir()}


class FakeRoutesMeasurer:
    """Times each route that runs at its factor x the shape's SDPA time x DRIFT (± 0.1% between the passes);
    each shape takes `shape_s` of its clock `now`; can die on the n-th shape."""

    baseline = "sdpa"

    def __init__(self, shape_s=0.0, die_at=None):
        self.shape_s, self.die_at, self.measured, self.t = shape_s, die_at, [], 0.0

    def now(self):
        return self.t

    def measure_extras(self, shape, extras, finals, compiled):
        assert extras == finals == [] and compiled == {}
        if self.die_at is not None and len(self.measured) == self.die_at:
            raise KeyboardInterrupt
        self.measured.append(shape)
        self.t += self.shape_s
        runs = {k: f for k, f in ROUTE_FACTOR.items() if not (k == "sdpa:efficient" and shape.kv_heads != shape.heads)}
        first = {k: (f * sdpa_us(shape) * DRIFT * 0.999,) * 3 for k, f in runs.items()}
        second = {k: (f * sdpa_us(shape) * DRIFT * 1.001,) * 3 for k, f in runs.items()}
        absent = {} if shape.kv_heads == shape.heads else {"sdpa:efficient": NO_GQA}
        return RetimePasses(first, second, {}, {"retime_s": 0.1, "baseline_errors": absent})


def test_untimed_routes_are_added_on_the_dataset_scale(tmp_path):
    before = old_sweep(tmp_path)
    summary = backfill_routes(tmp_path, FakeRoutesMeasurer(), SDPA_ROUTES, date="2026-11-30")
    assert (summary.done, summary.already, summary.failed, summary.remaining) == (3, 0, 0, 0)
    for shape in SHAPES:
        result = read_shape(tmp_path / "shapes" / next(n for n in before if n.startswith(
            f"{shape.batch}x{shape.heads}x{shape.seq}x")))
        base = sdpa_us(shape)
        assert result.baselines_us["sdpa"] == base and result.baselines_us["sdpa:cudnn"] == 1.01 * base
        assert result.baselines_us["sdpa:flash"] == pytest.approx(1.7 * base)  # drift scaled away
        record = result.meta["routes_backfilled"]
        assert record["scale"] == pytest.approx(1 / DRIFT) and record["date"] == "2026-11-30"
        if shape.kv_heads == shape.heads:
            assert result.baselines_us["sdpa:efficient"] == pytest.approx(0.8 * base)
            assert "baseline_errors" not in result.meta and record["added"] == ["sdpa:efficient", "sdpa:flash"]
        else:
            assert "sdpa:efficient" not in result.baselines_us
            assert result.meta["baseline_errors"] == {"sdpa:efficient": NO_GQA}
        assert untimed_routes(result, SDPA_ROUTES) == []
    assert read_manifest(tmp_path)["routes_backfill"][-1]["shapes"] == 3


def test_rows_and_recorded_bytes_stay_as_they_were(tmp_path):
    before = old_sweep(tmp_path)
    old = {name: read_shape(tmp_path / "shapes" / name) for name in before}
    backfill_routes(tmp_path, FakeRoutesMeasurer(), SDPA_ROUTES)
    for name, result in old.items():
        new = read_shape(tmp_path / "shapes" / name)
        assert new.trials == result.trials and new.shape == result.shape
        assert {k: v for k, v in new.meta.items() if k not in ("routes_backfilled", "baseline_errors")} == \
            {k: v for k, v in result.meta.items() if k != "baseline_errors"}


def test_resumes_after_a_kill_and_skips_what_is_done(tmp_path):
    old_sweep(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        backfill_routes(tmp_path, FakeRoutesMeasurer(die_at=1), SDPA_ROUTES)
    fake = FakeRoutesMeasurer()
    summary = backfill_routes(tmp_path, fake, SDPA_ROUTES)
    assert (summary.done, summary.already) == (2, 1) and len(fake.measured) == 2
    again = FakeRoutesMeasurer()
    assert backfill_routes(tmp_path, again, SDPA_ROUTES).done == 0 and again.measured == []


def test_time_budget_starts_no_shape_that_would_end_past_it(tmp_path):
    old_sweep(tmp_path)
    fake = FakeRoutesMeasurer(shape_s=40.0)
    summary = backfill_routes(tmp_path, fake, SDPA_ROUTES, max_minutes=1.5, now=fake.now)
    assert summary.done == 2 and summary.remaining == 1 and summary.stopped_early


def test_a_shape_whose_sdpa_cannot_be_retimed_is_left_unchanged(tmp_path):
    before = old_sweep(tmp_path, SHAPES[:1])
    result = read_shape(tmp_path / "shapes" / next(iter(before)))
    passes = RetimePasses({"sdpa:flash": (5.0,)}, {"sdpa:flash": (5.0,)}, {"sdpa": "time: launch failed"}, {})
    assert routes_backfilled_shape(result, "sdpa", passes, "2026-11-30") is None


def test_only_listed_shapes_are_backfilled_and_a_non_dataset_is_refused(tmp_path):
    old_sweep(tmp_path)
    fake = FakeRoutesMeasurer()
    summary = backfill_routes(tmp_path, fake, SDPA_ROUTES, shapes=SHAPES[:1])
    assert summary.done == 1 and fake.measured == SHAPES[:1]
    with pytest.raises(DatasetError):
        backfill_routes(tmp_path / "nothing", FakeRoutesMeasurer(), SDPA_ROUTES)


def test_cli_refuses_backfill_routes_with_gpus(tmp_path):
    shapes = tmp_path / "s.json"
    shapes.write_text('[{"batch": 1, "heads": 8, "seq": 128, "head_dim": 64}]')
    result = CliRunner().invoke(app, ["sweep", "attention", "--shapes", str(shapes), "--out", str(tmp_path / "d"),
                                      "--backfill-routes", "--gpus", "0,1"])
    assert result.exit_code == 2 and "--backfill-routes runs on one GPU" in result.output


def test_shapes_swept_before_reasons_were_recorded_have_their_missing_routes_timed(tmp_path):
    """Older sweeps kept neither a time nor a reason for the routes left out of the final passes."""
    open_dataset(tmp_path, {"kernel": "attention", "space_version": SPACE.version, "gpu_profile": PROFILE.name,
                            "sms": None})
    shape = SHAPES[1]  # GQA: the memory-efficient backend cannot run it
    config = legal_configs(SPACE, shape, PROFILE).configs[0]
    write_shape(tmp_path, ShapeRecords(shape, (Trial(config, 10.0, None, 0.3, 7, 0.01, 10.0),),
                                      {"sdpa": sdpa_us(shape), "sdpa:cudnn": sdpa_us(shape)}, {"legal_configs": 1}))
    old = read_shape(next((tmp_path / "shapes").iterdir()))
    assert untimed_routes(old, SDPA_ROUTES) == ["sdpa:efficient", "sdpa:flash"]
    assert backfill_routes(tmp_path, FakeRoutesMeasurer(), SDPA_ROUTES).done == 1
    new = read_shape(next((tmp_path / "shapes").iterdir()))
    assert new.baselines_us["sdpa:flash"] == pytest.approx(1.7 * sdpa_us(shape))
    assert new.meta["baseline_errors"] == {"sdpa:efficient": NO_GQA}
    assert "routes_backfilled" in new.meta  # done: a rerun skips it
