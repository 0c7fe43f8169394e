"""The CLI's one error -> exit code map and its argument checks, without running a command."""

import importlib

import pytest
import typer

from rooftune.tuner.cli import args


def test_every_mapped_error_exists_and_only_input_errors_exit_2():
    for module, name, code in args.EXIT_CODES:
        cls = getattr(importlib.import_module(module), name)
        assert issubclass(cls, Exception) and code in (1, 2, 3, 4)
        assert args.exit_code(cls.__new__(cls)) == code  # (ContextLost's __init__ takes two arguments)
    assert args.exit_code(ValueError("a library bug")) is None
    assert args.exit_code(KeyError("x")) is None and args.exit_code(ZeroDivisionError()) is None


def test_cli_errors_exits_with_the_mapped_code_and_lets_bugs_through():
    from rooftune.tuner.tune import TuneError

    with pytest.raises(typer.Exit) as exit_:
        with args.cli_errors():
            raise TuneError("every planned config failed")
    assert exit_.value.exit_code == 1
    with pytest.raises(ValueError, match="bug"):
        with args.cli_errors():
            raise ValueError("bug")


def test_check_output(tmp_path):
    args.check_output(None, "--json")
    args.check_output(tmp_path / "new.json", "--json")
    args.check_output(tmp_path / "a" / "b", "--out", folder=True)  # a folder is created with its parents
    (tmp_path / "f").write_text("")
    for path, folder in ((tmp_path, False), (tmp_path / "f", True), (tmp_path / "f" / "x", True),
                         (tmp_path / "no" / "x.json", False)):
        with pytest.raises(typer.Exit) as exit_:
            args.check_output(path, "--out", folder=folder)
        assert exit_.value.exit_code == 2


def test_check_sms():
    from rooftune.hwprofiles import load_profile

    h200 = load_profile("h200")
    args.check_sms(None, h200)
    args.check_sms(h200.sm_count, h200)
    args.check_sms(1000)  # no profile: the device checks the top
    for sms, profile in ((0, h200), (h200.sm_count + 1, h200), (-1, None)):
        with pytest.raises(typer.Exit):
            args.check_sms(sms, profile)
