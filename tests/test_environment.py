"""rooftune's environment variables (rooftune/environment.py): a boolean that is none is refused, naming the variable,
not read as off; a path whose `~user` names no home is refused, naming the variable, from the CLI as from the ops."""

import pytest
from typer.testing import CliRunner

from fakes import cli_error
from rooftune.environment import SettingError, env_flag, env_path
from rooftune.tuner.cache import cache_path
from rooftune.tuner.cli.app import app

runner = CliRunner()


@pytest.mark.parametrize("value, expected", [("1", True), ("TRUE", True), (" yes ", True), ("on", True),
                                             ("0", False), ("False", False), ("no", False), ("off", False),
                                             ("", False)])
def test_a_boolean_setting(monkeypatch, value, expected):
    monkeypatch.setenv("ROOFTUNE_TUNE", value)
    assert env_flag("ROOFTUNE_TUNE") is expected


@pytest.mark.parametrize("value", ["maybe", "2", "-1", "y", "enabled", "1.0"])
def test_a_setting_that_is_not_a_boolean_is_refused(monkeypatch, value):
    monkeypatch.setenv("ROOFTUNE_FALLBACK", value)
    with pytest.raises(SettingError, match=rf"\$ROOFTUNE_FALLBACK='{value}' is not a boolean: set it to one of"):
        env_flag("ROOFTUNE_FALLBACK")


def test_unset_is_the_default(monkeypatch):
    monkeypatch.delenv("ROOFTUNE_TUNE", raising=False)
    assert env_flag("ROOFTUNE_TUNE") is False and env_flag("ROOFTUNE_TUNE", default=True) is True


def test_a_path_setting_expands_home_or_names_the_variable(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("ROOFTUNE_CACHE", "~/c/tune.json")
    assert env_path("ROOFTUNE_CACHE") == tmp_path / "c" / "tune.json" == cache_path()
    monkeypatch.setenv("ROOFTUNE_CACHE", "~nouser_of_rooftune/x.json")
    with pytest.raises(SettingError, match=r"\$ROOFTUNE_CACHE='~nouser_of_rooftune/x.json': user "
                                           r"'nouser_of_rooftune' has no home directory"):
        cache_path()
    monkeypatch.setenv("ROOFTUNE_CACHE", "")
    monkeypatch.setenv("XDG_CACHE_HOME", "~nouser_of_rooftune")
    with pytest.raises(SettingError, match=r"\$XDG_CACHE_HOME="):
        cache_path()


def test_no_home_at_all_names_what_to_set(monkeypatch):
    import pathlib

    monkeypatch.delenv("ROOFTUNE_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)

    def no_home(cls=None):
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(pathlib.Path, "home", classmethod(no_home))
    with pytest.raises(SettingError, match=r"no home directory is known .*\$ROOFTUNE_CACHE"):
        cache_path()


@pytest.mark.parametrize("args", [["tune", "gemm", "--shape", "64x64x64"],
                                  ["tune", "attention", "--shape", "1x8x128x64"],
                                  ["tune", "model", "--config", "llama-3-8b", "--batch", "1"]])
def test_the_cli_names_a_cache_setting_that_names_no_home(monkeypatch, args):
    monkeypatch.setenv("ROOFTUNE_CACHE", "~nouser_of_rooftune/x.json")
    cli_error(runner.invoke(app, args), "$ROOFTUNE_CACHE='~nouser_of_rooftune/x.json'", "no home directory")


def test_the_cli_names_a_kernel_only_setting_that_is_no_boolean(monkeypatch):
    monkeypatch.setenv("ROOFTUNE_KERNEL_ONLY", "maybe")
    cli_error(runner.invoke(app, ["explain", "gemm", "--shape", "64x64x64"]), "$ROOFTUNE_KERNEL_ONLY='maybe'")


def test_a_model_config_whose_home_is_unknown_is_named():
    """`tune model --config '~nouser/config.json'` raised RuntimeError: Could not determine home directory."""
    cli_error(runner.invoke(app, ["tune", "model", "--config", "~nouser_of_rooftune/c.json", "--batch", "1"]),
              "--config='~nouser_of_rooftune/c.json'", "no home directory")
