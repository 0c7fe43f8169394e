"""The shipped residuals (and the untuned routes fitted beside them), one folder per Triton release, and which one
ranks a kernel on a GPU under a given release.

    hwprofiles/residuals/triton-3.6/gemm-NVIDIA_H200.json         fitted on a training sweep made under Triton 3.6
    hwprofiles/residuals/triton-3.6/route-gemm-NVIDIA_H200.json   the untuned route fitted beside it
    hwprofiles/residuals/triton-3.9/gemm-NVIDIA_H200.json         fitted on one made under 3.9 (`rooftune fit gemm
                                                                  --out shipped` on data whose manifest says 3.9.x)

A release is major.minor (`triton_release`: a patch release keeps the code generator). Under release R (the
installed Triton's for a live ranking, the data's for a replay) a kernel on a GPU ranks with
1. the residual fitted under R (the file in triton-R/), where it applies to the measurements' space;
2. else a residual fitted under another release that `rooftune fit --check` found to rank at least as well as the
   model alone on a training sweep made under R (R among its recorded releases), the newest such release first;
3. else the model alone, and the line saying so names the releases that have a residual.
Where no release is known (data that record none), the newest release's residual that applies.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from rooftune.hwprofiles import HardwareProfile
from rooftune.roofline.residual import Residual, ResidualError, read_residual, residual_file_name, triton_release

RESIDUAL_DIR = "residuals"
RELEASE_PREFIX = "triton-"


def residuals_root() -> Path:
    """The folder of the shipped residuals: one `triton-<release>` folder per release under it."""
    return Path(str(resources.files("rooftune.hwprofiles"))) / RESIDUAL_DIR


def release_order(release: str) -> tuple[int, ...]:
    """'3.10' -> (3, 10): releases sort as versions, not as text (3.10 after 3.9)."""
    try:
        return tuple(int(part) for part in release.split("."))
    except ValueError:
        raise ResidualError(f"{release!r} is not a Triton release (major.minor, e.g. 3.9)") from None


def release_folder(release: str) -> Path:
    """The shipped folder of Triton release `release` ('3.9', or a full version: its major.minor)."""
    return residuals_root() / f"{RELEASE_PREFIX}{triton_release(release)}"


def shipped_residual_path(kernel: str, profile: HardwareProfile, release: str) -> Path:
    """Where the residual of `kernel` on `profile`'s GPU fitted under Triton `release` is shipped."""
    return release_folder(release) / residual_file_name(kernel, profile)


def shipped_releases(kernel: str, profile: HardwareProfile, prefix: str = "") -> tuple[str, ...]:
    """The releases (oldest first) whose folder holds a file of `kernel` on `profile`'s GPU: its residual, or with
    `prefix` 'route-' its untuned route."""
    name = prefix + residual_file_name(kernel, profile)
    root = residuals_root()
    found = [p.name[len(RELEASE_PREFIX):] for p in root.glob(f"{RELEASE_PREFIX}*") if (p / name).is_file()] \
        if root.is_dir() else []
    return tuple(sorted(found, key=release_order))


def read_shipped(kernel: str, profile: HardwareProfile, release: str) -> Residual | None:
    """The residual shipped in `release`'s folder for `kernel` on `profile`'s GPU (None: none there); a
    ResidualError where it says it was fitted under another release (a file in the wrong folder would rank
    under a compiler it was not fitted for)."""
    path = shipped_residual_path(kernel, profile, release)
    if not path.is_file():
        return None
    residual = read_residual(path)
    fitted = residual.tritons[0] if residual.tritons else triton_release(release)
    if fitted != triton_release(release):
        raise ResidualError(f"{path}: fitted under Triton {fitted}, in the folder of {triton_release(release)}; "
                            f"move it to {release_folder(fitted)}")
    return residual


def ranking_candidates(kernel: str, profile: HardwareProfile, triton: str | None) -> list[Residual]:
    """The shipped residuals that rank under `triton`'s release, in the rule's order (the module's docstring):
    the one fitted under it, then those checked under it, newest release first; every one, newest first, where
    `triton` is None."""
    releases = shipped_releases(kernel, profile)
    residuals = {r: read_shipped(kernel, profile, r) for r in reversed(releases)}
    if triton is None:
        return list(residuals.values())
    release = triton_release(triton)
    fitted = [residuals[release]] if release in residuals else []
    return fitted + [r for key, r in residuals.items() if key != release and release in r.tritons]


def choose_residual(kernel: str, profile: HardwareProfile, space_version: str | None,
                    triton: str | None) -> tuple[Residual | None, str]:
    """The shipped residual `kernel` on `profile`'s GPU ranks with, for measurements over `space_version` (None:
    of another kernel) under Triton `triton` (None: a release not known), and a line saying which and why; None
    and the reason where the model ranks alone."""
    releases = shipped_releases(kernel, profile)
    if not releases:
        return None, f"no residual is fitted for {kernel} on {profile.name}"
    candidates = ranking_candidates(kernel, profile, triton)
    for residual in candidates:
        if residual.mismatch(space_version, triton) is None:
            under = f" under Triton {', '.join(residual.tritons)}" if residual.tritons else ""
            return residual, f"the residual fitted on {residual.fit.get('data')}{under}"
    if candidates:
        return None, f"the shipped residual was {candidates[0].mismatch(space_version, triton)}"
    release = triton_release(triton)
    return None, (f"no shipped residual of {kernel} on {profile.name} was fitted or checked under Triton {release} "
                  f"(residuals fitted under Triton {', '.join(releases)}); one for {release}: `rooftune fit {kernel} "
                  f"--out shipped` on a training sweep made under it, or `rooftune fit {kernel} --check shipped` there")


def load_residual(kernel: str, profile: HardwareProfile, triton: str | None = None) -> Residual | None:
    """The shipped residual that ranks `kernel` on `profile`'s GPU under Triton `triton` (None: the newest
    release's), whatever the space; None where none does."""
    candidates = ranking_candidates(kernel, profile, triton)
    return candidates[0] if candidates else None


def check_source(kernel: str, profile: HardwareProfile, triton: str | None) -> Path | None:
    """`rooftune fit --check shipped` on data made under Triton `triton`: the shipped residual to check there,
    the one fitted under the newest release other than the data's (None where there is none)."""
    release = triton_release(triton) if triton else None
    others = [r for r in shipped_releases(kernel, profile) if r != release]
    return shipped_residual_path(kernel, profile, others[-1]) if others else None


def shipped_route_path(kernel: str, profile: HardwareProfile, release: str) -> Path:
    """'route-gemm-NVIDIA_H200.json' beside the kernel's residual in `release`'s folder."""
    return release_folder(release) / f"route-{residual_file_name(kernel, profile)}"


def route_release(kernel: str, profile: HardwareProfile, triton: str | None) -> str | None:
    """The release folder whose route an untuned op under Triton `triton` reads: its own release's, or where
    `triton` is None the newest that holds a route (None: no route is shipped)."""
    if triton is not None:
        return triton_release(triton)
    releases = shipped_releases(kernel, profile, prefix="route-")
    return releases[-1] if releases else None
