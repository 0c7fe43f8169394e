"""Turning command-line strings into shapes, profiles and paths, and errors into exit codes, for every command."""

from __future__ import annotations

import inspect
import os
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from rooftune.candidates import KERNELS
from rooftune.eval.datasets.readers import recorded_device
from rooftune.hwprofiles import (ProfileError, fits_device, hwprobe, is_profile_of, list_profiles, load_profile,
                                 profiles_fitting)
from rooftune.hwprofiles.profile import profile_file
from rooftune.hwprofiles.shipped import shipped_profile_name
from rooftune.outputs import OutputError, check_not_input
from rooftune.roofline.neighbours import neighbours_file
from rooftune.roofline.releases import choose_residual, residuals_root, shipped_releases
from rooftune.roofline.residual import ResidualError, read_residual

# The CLI's one map from an exception to an exit code, as (module, class, code). `cli_errors` looks a
# class up only when its module is already imported (an instance of it implies so), so mapping an
# error never imports torch. 2: bad input, or no GPU for a GPU command (the user's to fix);
# 1: tuning found no working config, or a GPU's sweep worker died with no error to pass on;
# 3: a config killed the CUDA context (quarantined: run again) or the compile workers hung;
# 4: the context died under no single config (a rerun would repeat it).
# Any other exception, a plain ValueError included, is a bug: it propagates with its traceback
# (exit 1) and is never reported as bad input.
EXIT_CODES = (
    ("rooftune.candidates.shapes", "ShapeError", 2),
    ("rooftune.candidates.shapes", "ShapeListError", 2),
    ("rooftune.candidates.config", "ConfigError", 2),
    ("rooftune.candidates.space", "NoLegalConfigError", 2),
    ("rooftune.hwprofiles.profile", "ProfileError", 2),
    ("rooftune.hwprofiles.hwprobe", "NoGpuError", 2),
    ("rooftune.hwprofiles.hwprobe", "PartitionError", 2),
    ("rooftune.eval.datasets.format", "DatasetError", 2),
    ("rooftune.eval.datasets.readers", "DatasetFormatError", 2),
    ("rooftune.tuner.cache", "TuneCacheError", 2),
    ("rooftune.roofline.residual", "ResidualError", 2),
    ("rooftune.tuner.fitting", "HeldOutError", 2),
    ("rooftune.tuner.fitting", "FitError", 2),
    ("rooftune.tuner.evaluation", "NothingToScoreError", 2),
    ("rooftune.tuner.explanation", "ExplainError", 2),
    ("rooftune.tuner.kernel_explanation", "ScriptError", 2),
    ("rooftune.tuner.cli.args", "ArgumentError", 2),
    ("rooftune.tuner.llm.shapes", "ModelConfigError", 2),
    ("rooftune.tuner.llm.tables", "TableError", 2),
    ("rooftune.outputs", "OutputError", 2),
    ("rooftune.inputs", "InputError", 2),
    ("rooftune.environment", "SettingError", 2),
    ("rooftune.tuner.tune", "TuneError", 1),
    ("rooftune.eval.sweeping.workers", "WorkerError", 1),
    ("rooftune.eval.sweeping.quarantine", "ContextQuarantined", 3),
    ("rooftune.kernels.harness.context", "ContextLost", 3),
    ("rooftune.kernels.harness.compile_pool", "CompileStalled", 3),
    ("rooftune.eval.sweeping.quarantine", "ContextLostUnattributed", 4),
)


class ArgumentError(ValueError):
    """A command-line value the command cannot use: an option out of range, an unwritable output path."""


def fail(message: str, code: int = 2) -> NoReturn:
    """Print a clear error on stderr and exit with `code` (2: bad input), for every CLI command."""
    Console(stderr=True, soft_wrap=True).print(f"[bold red]error:[/] {escape(message)}")
    raise typer.Exit(code=code)


def warn(message: str) -> None:
    """Print a warning on stderr; the command goes on."""
    Console(stderr=True, soft_wrap=True).print(f"[bold yellow]warning:[/] {escape(message)}")


def warnings_as_lines() -> None:
    """Show every Python warning a command meets (a cache entry ignored, dataset rows left out) as one `warning:`
    line (`warn`), not Python's two lines naming the source file: for the `rooftune` program (app.py `main`)."""
    warnings.showwarning = lambda message, *_, **__: warn(str(message))


DEFAULT_GPU = "h200"


def describe_device(device: dict) -> str:
    """A dataset's GPU as its data say (eval/datasets/readers.py `recorded_device`)."""
    if "name" in device:
        return device["name"]
    major, minor = device["compute_capability"]
    return f"a GPU of compute capability {major}.{minor} with {device['smem_per_block_bytes']} bytes of shared memory per block"


def gpu_of_data(data, device: dict | None, *, strict: bool = False) -> str:
    """--gpu left out: the one shipped profile that fits the data's GPU; where several fit, DEFAULT_GPU if it
    is one of them (else the first), with a warning; where the data say nothing, DEFAULT_GPU. Where the data
    name a GPU no shipped profile fits: DEFAULT_GPU with a warning, or with `strict` an ArgumentError."""
    fitting = profiles_fitting(device) if device is not None else []
    if len(fitting) == 1:
        return fitting[0]
    if fitting:
        chosen = DEFAULT_GPU if DEFAULT_GPU in fitting else fitting[0]
        warn(f"{data} was recorded on {describe_device(device)}, which the profiles {', '.join(fitting)} all fit; "
             f"using {chosen} (--gpu chooses)")
        return chosen
    if device is not None:
        unknown = f"no shipped profile fits {data}'s GPU ({describe_device(device)})"
        if strict:
            raise ArgumentError(f"{unknown}: pass --gpu with the profile JSON it was recorded with")
        warn(f"{unknown}; using {DEFAULT_GPU} (--gpu takes a profile JSON: `rooftune hwprobe` writes one)")
    return DEFAULT_GPU


def data_profile(gpu: str | None, data, *, strict: bool = False, verb: str = "scoring"):
    """The profile of a command that reads recorded data (eval, fit): --gpu's, warned where the data say
    their GPU was another (eval/datasets/readers.py `recorded_device`), else `gpu_of_data`'s."""
    device = recorded_device(data)
    if gpu is None:
        return load_gpu(gpu_of_data(data, device, strict=strict))
    profile = load_gpu(gpu)
    if device is not None and not fits_device(profile, device):
        warn(f"--gpu {gpu} is {profile.name}, but {data} was recorded on {describe_device(device)}; "
             f"{verb} with {gpu}'s model")
    return profile


def gpu_of_this_machine() -> str:
    """`--gpu` left out of a command that runs on this machine's GPU (tune, sweep): $ROOFTUNE_PROFILE where
    set (as rooftune's PyTorch ops), else the shipped profile of the GPU NVML names (hwprofiles/shipped.py),
    else DEFAULT_GPU where no GPU is visible (a cache hit needs none; the rest says there is no GPU).
    ArgumentError for a GPU no shipped profile describes: `rooftune hwprobe` profiles it."""
    if os.environ.get("ROOFTUNE_PROFILE"):
        return os.environ["ROOFTUNE_PROFILE"]
    name = hwprobe.nvml_gpu_name()
    if name is None:
        return DEFAULT_GPU
    try:
        return shipped_profile_name(name)
    except ProfileError:
        raise ArgumentError(new_gpu_steps(name)) from None


def new_gpu_steps(name: str) -> str:
    """What a user does with a GPU rooftune ships no profile for: the whole sequence, in order."""
    return (f"no shipped hardware profile for GPU {name!r} (shipped: {', '.join(list_profiles())}). To tune on it: "
            f"(1) profile it once: `rooftune hwprobe --out my_gpu.json` (about 10 seconds); "
            f"(2) tune with it: `rooftune tune gemm --shape MxNxK --gpu my_gpu.json` (the model alone ranks, no "
            f"residual is fitted for it), or set ROOFTUNE_PROFILE=my_gpu.json for every command and rooftune's "
            f"PyTorch ops; (3) optionally check it on your own shapes: `rooftune sweep gemm --shapes SHAPES.json "
            f"--out DATA --gpu my_gpu.json`, then `rooftune eval gemm --data DATA --gpu my_gpu.json`, and fit its "
            f"residual from a training sweep with `rooftune fit gemm --data DATA --gpu my_gpu.json` "
            f"(docs/datasets.md, 'Adding a GPU')")


def check_this_gpu(profile, gpu: str, *, records: bool = False) -> None:
    """Warn where an explicit --gpu is not a profile of the GPU NVML sees (its legality and model are used); with
    `records` (a command that writes ground truth for the profile's GPU: a sweep) refuse instead, since another
    GPU's times would enter that GPU's dataset. A profile of an SM partition of this GPU (`rooftune hwprobe --sms
    N`: named "NVIDIA H200 (66 SMs)", or as `--name` says, its `meta.gpu` this GPU's name) is one."""
    name = hwprobe.nvml_gpu_name()
    if name is None or is_profile_of(profile, name):
        return
    if records:
        fail(f"--gpu {gpu} is {profile.name}, but this GPU is {name}: a sweep records ground truth for its "
             f"profile's GPU, so it runs only on that GPU (here: the profile of this GPU, --gpu left out, into "
             f"a folder of its own)")
    warn(f"--gpu {gpu} is {profile.name}, but this GPU is {name}: legality and the model follow --gpu")


def live_gpu(gpu: str | None, *, records: bool = False):
    """The profile of a command that runs on this machine's GPU: --gpu's (warned where NVML names another
    GPU; refused with `records`, see `check_this_gpu`), else `gpu_of_this_machine`'s."""
    if gpu is None:
        return load_gpu(gpu_of_this_machine())
    profile = load_gpu(gpu)
    check_this_gpu(profile, gpu, records=records)
    return profile


def exit_code(exc: BaseException) -> int | None:
    """The exit code EXIT_CODES gives `exc`, or None (a bug, not the user's to fix)."""
    for module, name, code in EXIT_CODES:
        loaded = sys.modules.get(module)
        if loaded is not None and isinstance(exc, getattr(loaded, name)):
            return code
    return None


@contextmanager
def cli_errors() -> Iterator[None]:
    """Run a command body (or decorate a command) so that a mapped error is printed as `error: ...`
    and exits with its code, without a traceback; anything else propagates."""
    try:
        yield
    except Exception as exc:
        code = exit_code(exc)
        if code is None:
            raise
        fail(str(exc), code)


# The helpers below exit through `cli_errors` themselves, so a command that calls them reports bad
# input the same way whether or not its own body runs under `cli_errors`.


@cli_errors()
def parse_shape(kernel: str, text: str, layout: str = "kn", dtype: str = "bf16", gemm: str = "gate_up",
                quant: str = "w8a8"):
    """The registered kernel's shape of `text` in its shape form (GEMM MxNxK, attention BxHxSxD, MoE
    ExTOPKxHIDDENxINTERMEDIATExTOKENS), with the options its parser takes (`parse_options`: GEMM `layout`
    and `dtype`, attention `dtype`, MoE `gemm` 'gate_up' or 'down' and `dtype`, FP8 MoE `gemm` and `quant`); exits
    on bad input."""
    if kernel not in KERNELS:
        raise ArgumentError(f"unknown kernel {kernel!r}; expected {', '.join(KERNELS)}")
    spec = KERNELS[kernel]
    given = {"layout": layout, "dtype": dtype, "gemm": gemm, "quant": quant}
    return spec.parse(text, **{name: given[name] for name in spec.parse_options})


@cli_errors()
def parse_counts(text: str, option: str, least: int = 1) -> list[int]:
    """'1,8,64' -> [1, 8, 64]: integers of at least `least` (1; 0 for GPU numbers), comma-separated,
    each once; exits on bad input."""
    parts = [p.strip() for p in str(text).split(",") if p.strip()]
    if not parts or not all(p.isdigit() and int(p) >= least for p in parts):
        kind = "positive integers" if least == 1 else f"integers from {least} up"
        raise ArgumentError(f"{option} must be {kind} separated by commas, got {text!r}")
    counts = [int(p) for p in parts]
    if len(set(counts)) != len(counts):
        raise ArgumentError(f"{option} names a value twice: {text!r}")
    return counts


@cli_errors()
def parse_shard(text: str | None) -> tuple[int, int] | None:
    """--shard 'I/N' -> (I, N): shard I (0 .. N-1) of N; None when not given; exits on bad input."""
    if text is None:
        return None
    index, slash, count = str(text).strip().partition("/")
    if not (slash and index.strip().isdigit() and count.strip().isdigit()):
        raise ArgumentError(f"--shard must be I/N (shard I of N, counted from 0, e.g. 0/2), got {text!r}")
    index, count = int(index), int(count)
    if not 0 <= index < count:
        raise ArgumentError(f"--shard {text}: I must be between 0 and N-1 = {count - 1}" if count
                            else f"--shard {text}: N must be at least 1")
    return index, count


@cli_errors()
def load_gpu(name_or_path: str):
    """A shipped profile by name or a profile JSON by path; exits with the validation error."""
    return load_profile(name_or_path)


@cli_errors()
def check_sms(sms: int | None, profile=None) -> None:
    """--sms (an SM partition) must be None or 1 .. the profile's SM count (>= 1 without a profile)."""
    if sms is None:
        return
    most = profile.sm_count if profile is not None else None
    if sms < 1 or (most is not None and sms > most):
        limit = f"between 1 and {most} ({profile.name})" if most is not None else "at least 1"
        raise ArgumentError(f"--sms must be {limit}, got {sms}")


@cli_errors()
def check_output(path: str | os.PathLike | None, option: str, folder: bool = False, inputs=()) -> None:
    """Before any work: `path` (a file, or a folder to create or resume with `folder`) can be written.
    A file must not be a folder or another non-regular file (a device such as /dev/full, a pipe: an
    output is renamed into place, rooftune/outputs.py), and its folder must exist and be writable; a
    folder must not be a file, and the nearest existing folder above it must be writable. None: the
    option was not given. What only the write itself finds out (a full disk, /proc) the writer reports.
    `inputs`: the paths the command reads; an output that is one of them, or inside one, is refused."""
    if path is None:
        return
    try:
        check_not_input(path, inputs)
    except OutputError as exc:
        raise ArgumentError(f"{option} {exc}") from None
    path = Path(path)
    if folder:
        if path.exists() and not path.is_dir():
            raise ArgumentError(f"{option} {path}: exists and is not a folder")
        parent = next((p for p in (path, *path.absolute().parents) if p.exists()), Path("/"))
    else:
        if path.is_dir():
            raise ArgumentError(f"{option} {path}: is a folder; give a file name")
        if path.exists() and not path.is_file():
            raise ArgumentError(f"{option} {path}: is not a regular file (a device, pipe or socket); give a "
                                "regular file's path")
        if path.exists() and not os.access(path, os.W_OK):
            raise ArgumentError(f"{option} {path}: file is not writable")
        parent = path.absolute().parent
        if not parent.exists():
            raise ArgumentError(f"{option} {path}: folder {parent} does not exist")
    if not parent.is_dir():
        raise ArgumentError(f"{option} {path}: {parent} is not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ArgumentError(f"{option} {path}: folder {parent} is not writable")


def read_files(*paths: str | os.PathLike | None, gpu: str | None = None, residual: str | None = None) -> list:
    """What a command reads, for its outputs' `inputs`: `paths` as given (a dataset folder stands for every file in
    it), the profile `gpu` names (a shipped profile's JSON in the package), and the residual `residual` names with
    its companion, the neighbour table `read_residual` reads beside it ('shipped': the shipped residuals' folder;
    'none': nothing)."""
    files = [*paths, profile_file(gpu) if gpu else None]
    if residual == "shipped":
        files.append(residuals_root())
    elif residual not in (None, "none"):
        files += [residual, neighbours_file(residual)]
    return files


@cli_errors()
def check_outputs(outputs: Iterable[tuple[str | os.PathLike | None, str]], inputs=()) -> None:
    """`check_output` for each (path, option) of a command's file outputs (None: not given), none of them one of its
    `inputs`, and no two of them one file: the second write would replace the first (`report --json X --markdown
    X` said "wrote" twice and kept the Markdown alone)."""
    seen: dict[Path, str] = {}
    for path, option in outputs:
        if path is None:
            continue
        same = seen.get(Path(path).resolve())
        if same is not None:
            raise ArgumentError(f"{option} {path}: also the path of {same}; two outputs of one command need two paths")
        seen[Path(path).resolve()] = f"{option}"
        check_output(path, option, inputs=inputs)


# Help texts that several commands share, so that one option reads the same everywhere. Help is rich
# markup: a literal "[" before a lowercase letter is written "\\[".
# What --sms gets (hwprobe.granted_sms): the driver gives a green context whole groups of SMs.
SMS_GROUPS_HELP = (f" (rounded up to whole groups of {hwprobe.SM_GROUP_FROM_9_0} SMs from compute capability 9.0, of "
                   f"{hwprobe.SM_GROUP_BEFORE_9_0} before: 66 gives {hwprobe.granted_sms(66, (9, 0))})")
PLOT_EXTRA = '.png, .svg or .pdf; needs the plot extra: pip install -e ".\\[plot]"'
RESIDUAL_HELP = ("'shipped' (the residual fitted for --gpu, if any, where it applies), 'none' (the model alone), "
                 "or a residual JSON's path")
GPU_HELP = "a profile name (`rooftune hwprofiles`) or a profile JSON's path"
MOE_GEMM_HELP = ("which GEMM of the MoE layer: 'gate_up' (N = 2·intermediate, K = hidden) or 'down' (N = hidden, "
                 "K = intermediate, scaled by the routing weight)")
LAYOUT_HELP = "B stored [K,N] ('kn') or [N,K] like an nn.Linear weight ('nk')"
DTYPE_HELP = "element type: bf16, fp16, tf32 or fp32"
QUANT_HELP = ("FP8 scales: 'w8a8' (per tensor: vLLM's dtype=fp8_w8a8) or 'block' (128×128 weight blocks, 1×128 "
              "activation groups: block_shape=[128,128])")
# A shape option a family's parser takes (its registry entry's `parse_options`): its default, flag and help.
SHAPE_OPTIONS = {"layout": ("kn", "--layout", LAYOUT_HELP), "dtype": ("bf16", "--dtype", DTYPE_HELP),
                 "gemm": ("gate_up", "--gemm", MOE_GEMM_HELP), "quant": ("w8a8", "--quant", QUANT_HELP)}
# Recorded data are refused whole where one record is damaged (eval/datasets/format.py `read_shape`): a score, a
# report or a fit over the rest would silently be of other data than the folder holds.
DAMAGED_HELP = ("a damaged file (a time that is not finite or under 0.1 µs, a value that is not a number, a row cut "
                "short) is refused, naming the file and row; a row outside the space is left out, with a warning")


def residual_option(kernel: str, profile, choice: str, space_version: str | None, triton: str | None = None):
    """'shipped': the shipped residual of `profile`'s GPU, if any, fitted on the same space as the measurements'
    (`space_version`; None: data of another kernel) that ranks under their Triton release (`triton`: a dataset's,
    or the installed one for a live ranking; None: the newest release's): roofline/releases.py `choose_residual`;
    'none': the model alone; else a path, used as given (it must be a residual of `kernel`)."""
    if choice == "none":
        return None
    if choice != "shipped":
        residual = read_residual(choice)
        if residual.kernel != kernel:
            raise ResidualError(f"{choice}: a residual for {residual.kernel}, not {kernel}")
        return residual
    if not shipped_releases(kernel, profile):
        return None  # a GPU without a shipped residual: the model alone, as expected
    residual, why = choose_residual(kernel, profile, space_version, triton)
    if residual is None:
        warn(f"{why}: the model alone (--residual PATH to use one anyway)")
    return residual


def family_command(spec, before: list[tuple[str, type, object]], after: list[tuple[str, type, object]],
                   run: Callable[..., None], shape_options: bool = True) -> Callable[..., None]:
    """A Typer command for the registered family `spec`: the parameters `before` ((name, type, typer.Option)),
    then (with `shape_options`) one option per shape option its parser takes (its `parse_options`, as SHAPE_OPTIONS
    spells them), then `after`; the command calls `run(**values)`. So a family's `space` and `explain` commands,
    and its `sweep`, `eval`, `fit` and `report` where it needs no options of its own, come from its registration."""

    def command(**values) -> None:
        run(**values)

    shape_options = [(name, str, typer.Option(SHAPE_OPTIONS[name][0], SHAPE_OPTIONS[name][1],
                                              help=SHAPE_OPTIONS[name][2]))
                     for name in (spec.parse_options if shape_options else ())]
    params = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=kind, default=default)
              for name, kind, default in (*before, *shape_options, *after)]
    command.__signature__ = inspect.Signature(params, return_annotation=None)
    command.__annotations__ = {p.name: p.annotation for p in params}
    return command


def register_missing(app: typer.Typer, make: Callable, short_help: Callable) -> None:
    """Register `make(spec)` as `app`'s command for every registered family that has no command of its own there
    (`short_help(spec)` its one-line help): a new family gets the command with no code of its own."""
    have = {c.name for c in app.registered_commands}
    for spec in KERNELS.values():
        if spec.name not in have:
            app.command(spec.name, short_help=short_help(spec))(make(spec))
