"""`rooftune fit gemm|attention`: the residual correction and the search constants, cross-validated on training data."""

from __future__ import annotations

import math
from pathlib import Path

import typer
from rich.console import Console

from rooftune.candidates import kernel_spec
from rooftune.eval.datasets.format import read_manifest
from rooftune.eval.datasets.readers import load_records
from rooftune.roofline.neighbours import neighbours_file
from rooftune.roofline.releases import shipped_route_path
from rooftune.roofline.residual import triton_release, write_residual
from rooftune.roofline.route import write_route
from rooftune.tuner.cli.args import (
    DAMAGED_HELP,
    GPU_HELP,
    check_output,
    check_outputs,
    cli_errors,
    data_profile,
    fail,
    family_command,
    read_files,
    register_missing,
)
from rooftune.tuner.cli.fit_generic import fit_generic_command
from rooftune.tuner.cli.help import NAME_OR_PATH, PATH
from rooftune.tuner.fitting import (
    SHIPPED,
    AlsoData,
    check_plan,
    check_residual,
    describe,
    fit_kernel,
    fit_shapes_from_records,
    fit_target,
    fit_against_model,
    fitted_residual,
    refuse_held_out,
    with_check,
)
from rooftune.tuner.residual_choice import shipped_residual
from rooftune.tuner.route_fit import CV_SEEDS, fit_route_data
from rooftune.tuner.routing import LOW

fit_app = typer.Typer(help="Fit the residual correction on a training dataset (cross-validated).",
                      no_args_is_help=True)


_GPU = typer.Option(None, "--gpu", metavar=NAME_OR_PATH,
                    help=f"the GPU the data was recorded on: {GPU_HELP} (default: the shipped "
                    "profile of the GPU the dataset names; none fitting is an error)", show_default=False)
_DATA_HELP = "a training dataset folder written by `rooftune sweep {}`; " + DAMAGED_HELP
_OUT = typer.Option(None, "--out", metavar=PATH,
                    help="where to write the residual JSON (required to fit): a file, or 'shipped' to replace the "
                    "shipped residual of --gpu, which `tune`, `eval` and `explain` use; with --check, default: in place")
_CHECK = typer.Option(None, "--check", metavar=NAME_OR_PATH, help="instead of fitting: check this residual (a path, or 'shipped') on a "
                      "training dataset measured under another Triton release, and where it still ranks at least "
                      "as well as the model alone, write it with that release added (to --out, default: in place)")
_ALSO = typer.Option(None, "--also", metavar=PATH,
                     help="another GPU's training dataset of the same kernel, space and Triton release (repeatable), "
                     "fitted beside --data with its own GPU's profile (the one its manifest names): a residual of "
                     "both GPUs, written as --gpu's; cross-validated on --data's shapes only")
_ROUTE = typer.Option(False, "--route", help="instead of the residual: fit the untuned route (kernel's zero-trial pick "
                      "or the library's op, tuner/routing.py) beside the shipped residual, and write it beside the residuals")


@fit_app.command("gemm", short_help="Fit the GEMM residual and the search's constants.")
def fit_gemm(
    data: Path = typer.Option(..., "--data", metavar=PATH, help=_DATA_HELP.format("gemm")),
    gpu: str | None = _GPU, out: Path = _OUT, check: str | None = _CHECK, route: bool = _ROUTE,
    also: list[Path] | None = _ALSO,
) -> None:
    """Choose the ridge penalty, the near-best weighting, whether the zero-trial pick gets its own
    correction, and the search constants by 5-fold cross-validation over shapes (the search replayed
    at budgets 1, 5, 10, 20), refit on every training shape, learn the `static` baseline list, and
    write it all as one JSON. Refuses held-out data. About a minute on 120 shapes with 2 cores.
    A residual ranks for the Triton release its data were measured under; --check extends it to another."""
    _fit("gemm", data, gpu, out, check, route, also)


@fit_app.command("attention", short_help="The same for causal attention.")
def fit_attention(
    data: Path = typer.Option(..., "--data", metavar=PATH, help=_DATA_HELP.format("attention")),
    gpu: str | None = _GPU, out: Path = _OUT, check: str | None = _CHECK, route: bool = _ROUTE,
    also: list[Path] | None = _ALSO,
) -> None:
    """The same for the causal attention forward: its residual (attention's features), search
    constants and static list, cross-validated on the training shapes. Refuses held-out data."""
    _fit("attention", data, gpu, out, check, route, also)


@fit_app.command("moe", short_help="The same for the fused-MoE GEMM.")
def fit_moe(
    data: Path = typer.Option(..., "--data", metavar=PATH, help=_DATA_HELP.format("moe")),
    gpu: str | None = _GPU, out: Path = _OUT, check: str | None = _CHECK, also: list[Path] | None = _ALSO,
) -> None:
    """The same for the fused-MoE GEMM: its residual (MoE's features), search constants and static list,
    cross-validated on the training shapes (both GEMMs of the training models). Refuses held-out data."""
    _fit("moe", data, gpu, out, check, also=also)


def _fit_command(spec):
    """`rooftune fit NAME` for a registered family without a command of its own."""
    data = typer.Option(..., "--data", metavar=PATH, help=_DATA_HELP.format(spec.name))
    command = family_command(
        spec, [("data", Path, data), ("gpu", str, _GPU), ("out", Path, _OUT), ("check", str, _CHECK)], [],
        lambda **o: _fit(spec.name, o["data"], o["gpu"], o["out"], o["check"]), shape_options=False)
    command.__doc__ = f"Fit the {spec.label} residual and the search's constants by cross-validation on training data."
    return command


register_missing(fit_app, _fit_command, lambda spec: f"The same for the {spec.label} family.")
fit_app.command("generic", short_help="The generic model's residual, on a suite dataset's training kernels."
                )(fit_generic_command)


def _fit(kernel: str, data: Path, gpu: str | None, out: Path | None, check: str | None = None,
         route: bool = False, also: list[Path] | None = None) -> None:
    """`rooftune fit KERNEL`: cross-validate, refit, learn the static list, write the residual, print the
    figures; with `check`, check a residual under the data's Triton release instead (`_check`)."""
    console = Console()
    with cli_errors():
        # the residual is written as the profile's (its shipped path by default): never a default the data contradict
        profile = data_profile(gpu, data, strict=True, verb="fitting")
        manifest = read_manifest(data)
        refuse_held_out(manifest, str(data))
        if manifest.get("kernel", "gemm") != kernel:
            fail(f"{data} holds {manifest.get('kernel', 'gemm')} measurements, not {kernel}")
        if also and (check is not None or route):
            fail("--also adds training data to a fit: not with --check or --route")
        inputs = read_files(data, *(also or ()), gpu=gpu)
        if check is not None:
            return _check(kernel, data, profile, manifest, check, out, console, inputs)
        if route:
            return _fit_route(kernel, data, profile, out, console, inputs)
        extra = [_also_data(kernel, path, manifest, profile) for path in also or ()]
        target = fit_target(kernel, profile, None if out is None else str(out), _data_triton(manifest))
        check_outputs([(target, "--out"), (neighbours_file(target), "--out's neighbour table")], inputs)
        residual, against = _fit_residual(kernel, data, profile, manifest, console, extra)
        if str(out) == SHIPPED and not against.ranks_well:
            console.print(f"cross-validated, the residual ranks worse than the model alone on average: not shipped; "
                          f"under Triton {against.triton or 'this release'} the model ranks alone")
            raise typer.Exit(code=1)
        write_residual(residual, target)  # after the figures: a write that fails does not lose them
    console.print(f"wrote {target} ({len(residual.coefficients)} coefficients)")


def _also_data(kernel: str, path: Path, manifest: dict, profile) -> AlsoData:
    """`--also PATH`: another GPU's training shapes of `kernel` over the same space, under the same Triton release as
    the data `manifest` describes, with the profile its own manifest names; held-out data refused as for --data."""
    theirs = read_manifest(path)
    refuse_held_out(theirs, str(path))
    for key, what in (("kernel", "kernel"), ("space_version", "space")):
        if theirs.get(key) != manifest.get(key):
            fail(f"--also {path} is of {what} {theirs.get(key)}, the fitted data of {manifest.get(key)}")
    if release_of(theirs) != release_of(manifest):
        fail(f"--also {path} was measured under Triton {release_of(theirs)}, the fitted data under "
             f"{release_of(manifest)}: a residual ranks for one release")
    other = data_profile(None, path, strict=True, verb="fitting")
    if other.name == profile.name:
        fail(f"--also {path} is {profile.name}'s own data: give it as --data (one dataset a GPU)")
    shapes = fit_shapes_from_records(load_records(path, kernel=kernel))
    return AlsoData(shapes, other, str(path))


def release_of(manifest: dict) -> str | None:
    """The Triton release (major.minor) a dataset was measured under, None where its manifest records none."""
    triton = _data_triton(manifest)
    return triton_release(triton) if triton else None


def _fit_residual(kernel: str, data: Path, profile, manifest: dict, console: Console, also=()):
    """Cross-validate each setting on the training shapes, refit, learn the static list; print the figures.
    `also`: other GPUs' training shapes in every fit (`AlsoData`)."""
    records = load_records(data, kernel=kernel)
    shapes = fit_shapes_from_records(records)
    left_out = len(records) - len(shapes)
    if not shapes:
        fail(f"{data}: no shape with a successful config to fit on ({len(records)} recorded)")
    console.print(f"{len(shapes)} training shapes from {data}"
                  + (f" ({left_out} left out: no config of their space ran successfully)" if left_out else ""))
    for a in also:
        console.print(f"  with {len(a.shapes)} training shapes of {a.profile.name} from {a.label} in every fit")
    report = fit_kernel(kernel, shapes, profile, str(data),
                        progress=lambda cand, score: console.print(f"  {describe(cand)}: CV objective {score:.4f}"),
                        also=also)
    residual = fitted_residual(report, shapes, manifest)
    residual, against = fit_against_model(report, residual, records, profile)
    console.print(f"chosen: {report.chosen.ridge}, {report.chosen.pick or 'pick by the ridge fit'}, "
                  f"{report.chosen.search}, {report.chosen.vote or 'no neighbour vote'}")
    for budget, s in report.cv.items():
        console.print(f"  CV at {budget:>2} configs: mean {s['mean']:.3f}, p10 {s['p10']:.3f}, "
                      f"worst-decile mean {s['worst_decile_mean']:.3f} (the model alone: mean "
                      f"{against.model_mean[budget]:.3f})")
    return residual, against


def _data_triton(manifest: dict) -> str | None:
    """The Triton version a dataset was measured under (its manifest's device.triton), None where not recorded."""
    return (manifest.get("device") or {}).get("triton")


def _fit_route(kernel: str, data: Path, profile, out: Path | None, console: Console, inputs: list) -> None:
    """`fit --route`: cross-validate and refit the untuned route beside the shipped residual of the data's Triton
    release; print, write (by default in that release's folder; never over one of the command's `inputs`)."""
    triton = _data_triton(read_manifest(data))
    if out is None and not triton:
        fail(f"{data}: its manifest records no Triton version, so the route's release is not known; give --out FILE")
    target = out or shipped_route_path(kernel, profile, triton)
    if out is None:
        target.parent.mkdir(parents=True, exist_ok=True)  # the first route of a release makes its folder
    check_output(str(target), "--out", inputs=inputs)
    spec = kernel_spec(kernel)
    residual = shipped_residual(spec, profile, triton)
    route, chosen, _ = fit_route_data(data, kernel, profile, residual, spec.baseline)
    console.print(f"chosen: features {', '.join(route.features)}; ridge {route.fit['alpha']:g}; kernel kept where "
                  f"the predicted library ÷ pick exceeds {math.exp(route.margin):.3f}")
    console.print(f"  CV ({route.fit['shapes']} shapes, 5 folds x {len(CV_SEEDS)} seeds), library ÷ untuned op: "
                  f"geometric mean {chosen['geomean']:.3f}, p10 {chosen['p10']:.3f}, min {chosen['min']:.3f}, "
                  f"below {LOW}: {chosen['below']:.1f}")
    write_route(route, target)
    console.print(f"wrote {target}")


def _check(kernel: str, data: Path, profile, manifest: dict, check: str, out: Path | None, console: Console,
           inputs: list) -> None:
    """`fit --check`: replay the residual and the model alone on the training data; write the residual with
    the data's Triton release added where it ranks well (exit 1 where it does not: nothing written), in place or
    at --out, never over another of the command's `inputs` (the residual's neighbour table among them)."""
    residual, target, other_gpu = check_plan(kernel, profile, manifest, check, out, str(data))
    triton = _data_triton(manifest)
    in_place = check != SHIPPED and Path(target).resolve() == Path(check).resolve()
    check_output(str(target), "--out", inputs=inputs + ([] if in_place or check == SHIPPED
                                                        else read_files(residual=check)))
    result = check_residual(residual, load_records(data, kernel=kernel), profile, triton)
    for budget in result.residual_mean:
        console.print(f"  {budget:>2} configs: with the residual {result.residual_mean[budget]:.3f}, "
                      f"the model alone {result.model_mean[budget]:.3f}")
    where = f"on {profile.name}" if other_gpu else f"under Triton {result.triton}"
    if not result.ranks_well:
        console.print(f"{where} the residual ranks worse than the model alone: not written; "
                      f"fit a new one on {data} instead")
        raise typer.Exit(code=1)
    checked = with_check(residual, result, str(data), profile.name if other_gpu else None)
    write_residual(checked, target)
    if other_gpu:
        console.print(f"wrote {target}: {residual.profile}'s residual, checked on {profile.name}, ranks for it "
                      f"(Triton {', '.join(checked.tritons)})")
    else:
        console.print(f"wrote {target}: the residual now ranks for Triton {', '.join(checked.tritons)}")


def register(app) -> None:
    app.add_typer(fit_app, name="fit")
