"""`rooftune hwprobe`: measure this machine's GPU and write its hardware profile."""

from __future__ import annotations

import json

import typer
from rich.console import Console

from rooftune.hwprofiles import hwprobe, profile_to_dict, save_profile
from rooftune.outputs import OutputError
from rooftune.tuner.cli.args import SMS_GROUPS_HELP, check_output, check_sms, cli_errors
from rooftune.tuner.cli.help import PATH

console = Console()


@cli_errors()
def hwprobe_cmd(
    out: str = typer.Option(None, "--out", metavar=PATH, help="write the profile JSON here (default: print it)"),
    name: str = typer.Option(None, "--name", help="profile name (default: the GPU's name)"),
    sms: int = typer.Option(None, "--sms", help="profile a green context of this many SMs" + SMS_GROUPS_HELP),
) -> None:
    """Measure this machine's GPU and write a hardware profile."""
    check_sms(sms)
    check_output(out, "--out")
    profile = hwprobe.probe(name=name, sms=sms, log=lambda line: console.print(line))
    if out:
        try:
            save_profile(profile, out)
        except OutputError:  # the probe's figures are not lost: printed, then the error (exit 2)
            console.print_json(json.dumps(profile_to_dict(profile)))
            raise
        console.print(f"wrote {out}")
    else:
        console.print_json(json.dumps(profile_to_dict(profile)))


def register(app) -> None:
    app.command("hwprobe")(hwprobe_cmd)
