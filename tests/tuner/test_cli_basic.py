from typer.testing import CliRunner

from rooftune.tuner.cli.app import app

runner = CliRunner()


def test_no_args_shows_help():
    result = runner.invoke(app, [])
    assert "Usage" in result.output and "space" in result.output


def test_hwprofiles_lists_every_profile():
    result = runner.invoke(app, ["hwprofiles"])
    assert result.exit_code == 0
    for name in ("h200", "h100_sxm", "a100_sxm4_80gb", "b200"):
        assert name in result.output


def test_space_prints_legal_count_and_version():
    from rooftune.candidates import GEMM_SPACE, GemmShape, legal_configs
    from rooftune.hwprofiles import load_profile

    result = runner.invoke(app, ["space", "gemm", "--shape", "4096x4096x4096", "--gpu", "h200"])
    assert result.exit_code == 0, result.output
    n = len(legal_configs(GEMM_SPACE, GemmShape(4096, 4096, 4096), load_profile("h200")))
    assert f"legal configs: {n} of" in result.output and GEMM_SPACE.version in result.output


def test_space_errors_are_clear():
    result = runner.invoke(app, ["space", "gemm", "--shape", "4096x0x4096"])
    assert result.exit_code == 2 and "n must be >= 1" in result.output
    result = runner.invoke(app, ["space", "gemm", "--shape", "64x64x64", "--gpu", "h900"])
    assert result.exit_code == 2 and "unknown GPU profile" in result.output
    result = runner.invoke(app, ["space", "conv", "--shape", "64x64x64"])
    assert result.exit_code == 2 and "No such command 'conv'" in result.output


def test_version():
    from typer.testing import CliRunner

    from rooftune import __version__
    from rooftune.tuner.cli.app import app

    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"rooftune {__version__}"
