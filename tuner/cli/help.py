"""How `--help` labels options: a flag takes no value and shows none; every option that takes a file or a
folder shows PATH whatever its Python type, one that takes a name or a path NAME_OR_PATH."""

from __future__ import annotations

import typer
from typer.core import TyperCommand, TyperGroup

# The metavar of every option whose value is a file or folder path (typer labels a `Path` option <path> and
# a `str` one <str>; --json and --out are paths in every command).
PATH = "<path>"
NAME_OR_PATH = "<name|path>"  # --gpu (a profile's name or JSON), --residual ('shipped', 'none' or a JSON), a model


class _PlainFlags:
    """A command whose flags (--version, --rows/--no-rows, --help) show no metavar: typer 0.29 prints
    <bool> after them, as if they took a value."""

    def get_params(self, ctx):
        params = super().get_params(ctx)
        for param in params:
            if getattr(param, "is_flag", False) and param.metavar is None:
                param.metavar = ""
        return params


class Command(_PlainFlags, TyperCommand):
    pass


class Group(_PlainFlags, TyperGroup):
    pass


def plain_flags(app: typer.Typer) -> None:
    """Make `app`, its commands and its sub-apps (all the way down) with the classes above: one call
    for the whole CLI, after every command is registered."""
    if not isinstance(app.info.cls, type) or app.info.cls is TyperGroup:  # typer's default, not a class of ours
        app.info.cls = Group
    for command in app.registered_commands:
        if not isinstance(command.cls, type) or command.cls is TyperCommand:
            command.cls = Command
    for group in app.registered_groups:
        plain_flags(group.typer_instance)
