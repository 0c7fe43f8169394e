"""`--plot` on eval, report and explain: pictures written where matplotlib is installed (the `plot`
extra), and a clear exit-2 error where it is not; the per-shape scores `evaluate` returns for them."""

import json
import sys

import pytest
from typer.testing import CliRunner

from rooftune.candidates import GemmShape
from rooftune.candidates.records import ShapeRecords, Trial
from rooftune.eval.datasets.format import write_manifest, write_shape
from rooftune.hwprofiles import load_profile
from rooftune.tuner.cli.app import app

runner = CliRunner()
H200 = load_profile("h200")
PNG = b"\x89PNG\r\n\x1a\n"
SHAPES = [(GemmShape(16, 4096, 4096, layout="nk"), "llama decode", 9.0),
          (GemmShape(2048, 4096, 4096, layout="nk"), "llama prefill", 120.0),
          (GemmShape(300, 700, 900, layout="nk"), "random", 12.0)]


@pytest.fixture
def recorded(tmp_path, synthetic):
    """A rooftune dataset folder: each shape's legal space timed synthetically, cuBLAS beside it."""
    root = tmp_path / "heldout"
    (tmp_path / "shapes.json").write_text(json.dumps(
        [{"m": s.m, "n": s.n, "k": s.k, "layout": s.layout, "source": source} for s, source, _ in SHAPES]))
    write_manifest(root, {"kernel": "gemm", "shapes_file": "shapes.json", "gpu_profile": H200.name})
    for shape, _, cublas_us in SHAPES:
        records = synthetic(shape, H200)
        write_shape(root, ShapeRecords(shape, tuple(Trial(t.config, t.time_us) for t in records.trials),
                                      {"cublas": cublas_us}))
    return root


def _text(result) -> str:
    return " ".join(result.output.split())


COMMANDS = {
    "eval": lambda data, out: ["eval", "gemm", "--data", str(data), "--budget", "2", "--methods", "rooftune,model,random",
                               "--plot", str(out)],
    "report": lambda data, out: ["report", "gemm", "--data", str(data), "--no-rows", "--plot", str(out)],
    "explain": lambda data, out: ["explain", "gemm", "--shape", "2048x4096x4096", "--layout", "nk", "--data", str(data),
                                  "--plot", str(out)],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_plot_without_matplotlib_names_the_extra(command, recorded, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    out = tmp_path / "picture.png"
    result = runner.invoke(app, COMMANDS[command](recorded, out))
    assert result.exit_code == 2, result.output
    assert 'pip install -e ".[plot]"' in _text(result) and "matplotlib" in _text(result)
    assert not out.exists()


def test_plot_options_checked_before_any_work(recorded, tmp_path):
    no_data = runner.invoke(app, ["explain", "gemm", "--shape", "2048x4096x4096", "--plot", str(tmp_path / "x.png")])
    assert no_data.exit_code == 2 and "--plot needs --data" in _text(no_data)
    bad_suffix = runner.invoke(app, COMMANDS["report"](recorded, tmp_path / "x.txt"))
    assert bad_suffix.exit_code == 2 and ".png" in _text(bad_suffix)
    no_folder = runner.invoke(app, COMMANDS["eval"](recorded, tmp_path / "missing" / "x.png"))
    assert no_folder.exit_code == 2 and "does not exist" in _text(no_folder)


def test_explain_plot_of_a_shape_the_data_lacks(recorded, tmp_path):
    pytest.importorskip("matplotlib")
    elsewhere = runner.invoke(app, ["explain", "gemm", "--shape", "64x64x64", "--data", str(recorded),
                                    "--plot", str(tmp_path / "x.png")])
    assert elsewhere.exit_code == 2 and "not recorded there" in _text(elsewhere)


def test_evaluate_returns_each_runs_per_shape_scores(recorded):
    from rooftune.eval.datasets.readers import load_records
    from rooftune.tuner.evaluation import evaluate
    from rooftune.tuner.search.strategies import model_order, random_order

    records = load_records(recorded)
    summary = evaluate(records, 3, H200, {"model": model_order, "random": [random_order(s) for s in range(3)]})
    assert [len(runs) for runs in summary["scores"].values()] == [1, 3]
    assert all(len(run) == len(SHAPES) for runs in summary["scores"].values() for run in runs)
    model = summary["scores"]["model"][0]
    assert summary["methods"]["model"]["mean"] == pytest.approx(sum(model) / len(model))


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_plot_written(command, recorded, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "picture.png"
    result = runner.invoke(app, COMMANDS[command](recorded, out))
    assert result.exit_code == 0, result.output
    assert out.read_bytes().startswith(PNG) and f"wrote {out}" in _text(result)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_eval_json_stays_compact_with_plot(recorded, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "summary.json"
    result = runner.invoke(app, [*COMMANDS["eval"](recorded, tmp_path / "cdf.svg"), "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "scores" not in json.loads(out.read_text())
    assert (tmp_path / "cdf.svg").read_text().lstrip().startswith("<?xml")


def test_plot_functions_take_plain_data(tmp_path):
    pytest.importorskip("matplotlib")
    from rooftune.tuner.cli import plots

    plots.eval_cdf({"a": [[1.0, 0.99, 0.4]], "b": [[0.9, 1.02], [0.95, 0.97]], "none": []}, tmp_path / "c.png",
                   title="t", labels={"a": "0.797"})
    plots.report_scatter([1e6, 1e9, 1e12], [0.7, 1.0, 5.0], ["decode", "prefill", "decode"], tmp_path / "r.pdf",
                         title="t", baseline_label="cuBLAS", faint=[False, False, True])
    plots.explain_scatter([10.0, 11.0, 30.0], [12.0, 10.5, 28.0], tmp_path / "e.png", title="t", tried=[],
                          zero_trial=None, best=1)
    assert all((tmp_path / name).stat().st_size > 1000 for name in ("c.png", "r.pdf", "e.png"))
