"""Every registered kernel family is whole in every layer, each layer's part resolved only where it belongs,
and a family registered from outside (a toy, here) goes through every generic layer without code changes."""

import ast
import importlib.util
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from rooftune.candidates import (
    KERNELS,
    Config,
    ShapeRecords,
    Trial,
    configs_to_columns,
    header_shape,
    kernel_of,
    legal_configs,
    load_implementation,
    shape_header,
    shape_id,
)
from rooftune.candidates.families import IMPLEMENTATION_LAYERS, KernelSpec, layer_family, table_dtype_of
from rooftune.candidates.space import SearchSpace
from rooftune.hwprofiles import load_profile

REPO = Path(__file__).resolve().parents[2]
H200 = load_profile("h200")
runner = CliRunner()


def test_each_implementation_path_points_into_its_layer():
    for spec in KERNELS.values():
        for name, layer in IMPLEMENTATION_LAYERS.items():
            path = getattr(spec, name)
            if path is None:
                continue
            module = path.partition(":")[0]
            assert module.startswith(f"rooftune.{layer}."), f"{spec.name}.{name} = {path!r} is not in {layer}/"
            assert importlib.util.find_spec(module) is not None, f"{spec.name}.{name}: no module {module}"


def test_implementations_are_resolved_only_at_or_above_their_layer():
    """Every `load_implementation(x.FIELD)` call sits in a layer that may import FIELD's layer (the import
    arrows of tests/test_architecture.py); its argument is always a family's field, never a string."""
    from tests.test_architecture import ALLOWED, PACKAGES

    problems, calls = [], 0
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "load_implementation"):
                    continue
                calls += 1
                arg = node.args[0] if node.args else None
                field = arg.attr if isinstance(arg, ast.Attribute) else None
                where = f"{path.relative_to(REPO)}:{node.lineno}"
                if field not in IMPLEMENTATION_LAYERS:
                    problems.append(f"{where}: resolves {ast.unparse(arg) if arg else '?'}, not a family's field")
                elif IMPLEMENTATION_LAYERS[field] not in ALLOWED[package]:
                    problems.append(f"{where}: {package}/ resolves `{field}`, which belongs to "
                                    f"{IMPLEMENTATION_LAYERS[field]}/")
    assert calls >= len(IMPLEMENTATION_LAYERS) - 1 and not problems, "\n".join(problems)


def _walk_model_layers(spec: KernelSpec, shape):
    """candidates (space, header, id), roofline (model, breakdown, residual features): what needs no GPU."""
    from rooftune import roofline
    from rooftune.roofline.residual import feature_set

    assert type(shape) is spec.shape_type and kernel_of(shape) is spec
    assert header_shape(shape_header(shape)) == shape and spec.shape_id(shape) == shape_id(shape)
    assert spec.parse(spec.dims(shape), **{o: getattr(shape, o) for o in spec.parse_options}) == shape
    assert spec.fold_group(shape) is None or len(spec.fold_group(shape)) == len(spec.fold_keys)
    configs = legal_configs(spec.space, shape, H200).configs
    assert configs, f"{spec.name}: no legal config of {shape}"
    assert all(spec.twin(shape, c) == c for c in configs), f"{spec.name}: a legal config's twin is another config"
    if spec.table_dtypes:  # an engine's layer tables: the shape's table dtype is one of its family's
        assert table_dtype_of(shape) in spec.table_dtypes and layer_family(*_words(table_dtype_of(shape)))[0] is spec
    assert {own for own, _ in spec.gemm_names} <= set(spec.space.names) and set(spec.runtime_params) <= set(spec.space.names)
    breakdown = roofline.predict(shape, configs_to_columns(configs), H200)
    model = roofline.cost_model(shape)
    assert isinstance(breakdown, model.breakdown) and np.all(breakdown.time_us > 0)
    assert {model.terms[int(i)] for i in breakdown.dominant} <= set(model.terms)
    assert sorted(roofline.rank(shape, configs_to_columns(configs), H200)) == list(range(len(configs)))
    names, x = feature_set(spec.name).compute(shape, configs, breakdown)
    assert x.shape == (len(configs), len(names)) and np.all(np.isfinite(x))
    return configs


def _words(table_dtype):
    return table_dtype.dtype, table_dtype.block_shape


@pytest.mark.parametrize("name", KERNELS)
def test_every_family_is_whole_in_every_layer(name, tmp_path):
    from rooftune.eval.datasets.format import read_dataset, write_manifest, write_shape
    from rooftune.eval.scoring.reports import ReportKind, report_kind
    from rooftune.kernels.harness.benches import bench_of
    from rooftune.tuner.cli.app import app

    spec = KERNELS[name]
    shape = spec.parse(spec.example)
    configs = _walk_model_layers(spec, shape)
    assert spec.extras(shape, configs) is not None and spec.aliases(shape, configs) is not None
    # kernels: the bench is the family's, its Triton module importable (not imported: no GPU work here)
    bench = bench_of(name)
    assert bench.kernel is spec and importlib.util.find_spec(spec.module) is not None
    assert callable(load_implementation(spec.jobs))
    # eval: a dataset of the family round-trips; its report
    trials = tuple(Trial(c, 10.0 + i) for i, c in enumerate(configs[:4]))
    write_manifest(tmp_path, {"kernel": name, "space_version": spec.space.version})
    write_shape(tmp_path, ShapeRecords(shape, trials, {spec.baseline: 12.0}))
    assert [r.shape for r in read_dataset(tmp_path)] == [shape]
    assert isinstance(report_kind(name), ReportKind)
    assert spec.backfill is None or callable(load_implementation(spec.backfill))
    # tuner: eval methods, table writer, and the CLI's space and explain
    methods = load_implementation(spec.eval_methods)([ShapeRecords(shape, trials)])
    assert {"rooftune", "model", "random"} <= set(methods)
    assert spec.table is None or callable(load_implementation(spec.table))
    options = [arg for o in spec.parse_options if o != "dtype" for arg in (f"--{o}", str(getattr(shape, o)))]
    result = runner.invoke(app, ["space", name, "--shape", spec.example, *options])
    assert result.exit_code == 0 and "legal configs:" in result.output, result.output
    result = runner.invoke(app, ["explain", name, "--shape", spec.example, "--residual", "none", "--top", "2",
                                 *options], env={"COLUMNS": "200"})
    assert result.exit_code == 0 and "best predicted" in result.output, result.output


# --- a toy family: registered from outside, read by every generic layer ---------------------------------

@dataclass(frozen=True)
class ToyShape:
    """y = x · 2 over n elements."""

    n: int
    dtype: str = "bf16"

    @property
    def flops(self) -> int:
        return self.n


def parse_toy(text: str, dtype: str = "bf16") -> ToyShape:
    return ToyShape(int(text), dtype=dtype)


def _toy_legality(shape, columns, profile):
    return {"BLOCK larger than n": columns["BLOCK"] > max(shape.n, 64)}


TOY_SPACE = SearchSpace("toy", (("BLOCK", (64, 128, 256, 512)), ("num_warps", (1, 2, 4)), ("num_stages", (1,))),
                        _toy_legality, "toy-1")


@dataclass(frozen=True)
class ToyBreakdown:
    time_us: np.ndarray
    fits: np.ndarray
    dominant: np.ndarray


def predict_toy(shape, columns, profile):
    """n / BLOCK programs of BLOCK elements each, a warp a lane: a made-up but config-dependent time."""
    block, warps = columns["BLOCK"].astype(float), columns["num_warps"].astype(float)
    time_us = 1.0 + shape.n / block * 0.01 + block / (32.0 * warps) * 0.001
    return ToyBreakdown(time_us, np.ones(len(block), dtype=bool), np.zeros(len(block), dtype=np.int64))


def toy_features(shape, configs, breakdown):
    columns = configs_to_columns(configs)
    return ("log_block",), np.log2(columns["BLOCK"]).astype(float)[:, None]


class ToyBench:
    kernel = None  # set when registered


def toy_methods(records, seeds=(0, 1), residual=None, static=None) -> dict:
    from rooftune.tuner.search.strategies import model_order, random_order

    return {"model": model_order, "random": [random_order(seed) for seed in seeds]}


@pytest.fixture
def toy(monkeypatch):
    """A toy family in the registry, its implementations in this test module (where the layer rule of
    the real families does not apply: a toy has no files in the layers)."""
    from rooftune.roofline.costmodel import CostModel
    from rooftune.roofline.residual import FeatureSet

    here = __name__
    monkeypatch.setitem(globals(), "TOY_MODEL", CostModel(predict_toy, ToyBreakdown, ("all",)))
    monkeypatch.setitem(globals(), "TOY_FEATURES", FeatureSet("toy-features-1", toy_features))
    spec = KernelSpec(
        "toy", "toy", ToyShape, parse_toy, ("dtype",), "4096", "N", "N: elements", lambda path: [],
        lambda s: f"toy-{s.n}-{s.dtype}", lambda s: str(s.n), ("n", "dtype"), TOY_SPACE, "torch", "torch",
        "rooftune.kernels.gemm", f"{here}:TOY_MODEL", f"{here}:TOY_FEATURES", f"{here}:ToyBench", f"{here}:ToyBench",
        "rooftune.eval.scoring.reports:GEMM_REPORT", f"{here}:toy_methods")
    monkeypatch.setitem(KERNELS, "toy", spec)
    monkeypatch.setattr(ToyBench, "kernel", spec)
    return spec


def test_a_toy_family_goes_through_every_generic_layer(toy, tmp_path):
    """One `KERNELS` entry and the family's own parts (shape, space, model, features, bench, methods): the
    registry, the model, the residual, the bench lookup, the dataset format, replay and `rooftune eval`'s
    methods, and the CLI's shape parsing and `space` command take it with no change of theirs."""
    import typer

    from rooftune.eval.datasets.format import read_dataset, write_manifest, write_shape
    from rooftune.kernels.harness.benches import bench_of
    from rooftune.tuner.cli.app import _space_command
    from rooftune.tuner.cli.args import parse_shape
    from rooftune.tuner.evaluation import evaluate

    shape = parse_shape("toy", "4096", dtype="fp16")
    assert shape == ToyShape(4096, "fp16")
    configs = _walk_model_layers(toy, shape)
    assert len(configs) == 12 and isinstance(bench_of("toy"), ToyBench)
    truth = {c: 1.0 + 4096 / c["BLOCK"] * 0.011 + c["num_warps"] * 0.01 for c in configs}
    write_manifest(tmp_path, {"kernel": "toy", "space_version": TOY_SPACE.version})
    write_shape(tmp_path, ShapeRecords(shape, tuple(Trial(c, t) for c, t in truth.items()), {"torch": 2.0}))
    records = read_dataset(tmp_path)
    assert [r.shape for r in records] == [shape]
    summary = evaluate(records, 3, H200, load_implementation(toy.eval_methods)(records))
    assert set(summary["methods"]) == {"model", "random"} and summary["methods"]["model"]["mean"] > 0.9
    app = typer.Typer()
    app.command("toy")(_space_command(toy))
    result = runner.invoke(app, ["--shape", "512", "--gpu", "h200"])
    assert result.exit_code == 0 and "legal configs: 12 of 12" in result.output, result.output
    assert replace(toy, extras=lambda s, c: [Config.make(1, 1, BLOCK=64)]).extras(shape, configs)


@pytest.mark.parametrize("group", ["space", "explain", "sweep", "eval", "fit", "report"])
def test_every_family_has_its_command_in_each_group(group):
    """Each registered family gets `rooftune GROUP FAMILY` (written for it where it has options of its own, else made
    from its registration), so a family cannot be half-added to the command line."""
    import typer

    from rooftune.tuner.cli.app import app

    commands = typer.main.get_command(app).commands[group].commands
    assert set(KERNELS) <= set(commands), sorted(set(KERNELS) - set(commands))
    for name in KERNELS:
        result = CliRunner().invoke(app, [group, name, "--help"])
        assert result.exit_code == 0 and result.exception is None, result.output
