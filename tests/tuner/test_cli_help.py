"""`--help` of every command: a flag shows no metavar (typer 0.29 printed <bool> after --version, --rows/--no-rows
and --help), and every option that takes a path is labelled <path> (it was <path> in some commands, <str> in others)."""

import re

import pytest
import typer.main
from typer.testing import CliRunner

from rooftune.tuner.cli.app import app
from rooftune.tuner.cli.help import NAME_OR_PATH, PATH

runner = CliRunner()
PATH_OPTIONS = {"--data", "--json", "--markdown", "--plot", "--out", "--shapes", "--cache"}
NAME_OR_PATH_OPTIONS = {"--gpu", "--residual"}


def _commands(command, path: tuple[str, ...] = ()):
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, (*path, name))


COMMANDS = list(_commands(typer.main.get_command(app)))


@pytest.mark.parametrize("path, command", COMMANDS, ids=lambda x: " ".join(x) if isinstance(x, tuple) else "")
def test_flags_show_no_metavar_and_paths_one_label(path, command):
    # typer carries its own click (typer._click from 0.29 on): no `import click`, whose classes may be others
    ctx = command.context_class(command, info_name="rooftune")
    checked = 0
    for param in command.get_params(ctx):
        if param.param_type_name != "option":
            continue
        checked += 1
        shown = param.display_type_rich(ctx) if hasattr(param, "display_type_rich") else param.metavar
        name = param.opts[0]
        if param.is_flag:
            assert not shown, f"{' '.join(path)} {name}: {shown}"
        elif name in PATH_OPTIONS:
            assert shown == PATH, f"{' '.join(path)} {name}: {shown}"
        elif name in NAME_OR_PATH_OPTIONS or (path == ("tune", "model") and name == "--config"):
            assert shown == NAME_OR_PATH, f"{' '.join(path)} {name}: {shown}"
    assert checked >= 1  # --help at least: the options were found


@pytest.mark.parametrize("args", [[], ["report", "gemm"], ["tune", "gemm"], ["hwprobe"], ["sweep", "attention"]])
def test_help_text_has_no_bool_metavar_and_no_str_path(args):
    result = runner.invoke(app, [*args, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "<bool>" not in result.output
    for line in result.output.splitlines():
        row = re.match(r"^│\s*\*?\s*(--[a-z-]+)\s", line)  # an option's row of the panel
        if row and row.group(1) in ("--json", "--out", "--cache", "--shapes"):
            assert PATH in line, line
