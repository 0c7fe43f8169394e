"""Which correction ranks a live tune: the residual fitted for the kernel on this GPU over this version of its
space, where it was fitted or checked under the installed Triton release, else the model alone."""

from __future__ import annotations

from rooftune.hwprofiles import HardwareProfile
from rooftune.hwprofiles.hwprobe import installed_triton
from rooftune.roofline.residual import Residual, load_residual


def residual_choice(spec, profile: HardwareProfile, triton: str | None) -> tuple[object, str]:
    """The residual a live tune under Triton `triton` uses by default, and a line saying which and why: the
    one fitted for `spec`'s kernel on this GPU over this version of its space, where it was fitted or
    checked under this Triton release; else None (the model alone)."""
    residual = load_residual(spec.name, profile)
    if residual is None:
        return None, f"the model alone: no residual is fitted for {spec.name} on {profile.name}"
    why = residual.mismatch(spec.space.version, triton)
    if why:
        return None, f"the model alone: the shipped residual was {why}"
    under = f" under Triton {', '.join(residual.tritons)}" if residual.tritons else ""
    return residual, f"the model × the residual fitted on {residual.fit.get('data')}{under}"


def shipped_residual(spec, profile: HardwareProfile, triton: str | None = None):
    """`residual_choice`'s residual (under Triton `triton`; None: the installed one)."""
    return residual_choice(spec, profile, triton or installed_triton())[0]


def ranking_residual(residual, spec, profile: HardwareProfile, triton: str | None) -> tuple[object, str | None]:
    """What a live tune ranks with, and the line saying which: "shipped" is `residual_choice`'s; "none" or None the
    model alone, a Residual itself (no line: the caller chose). Anything else raises ValueError."""
    if residual == "shipped":
        return residual_choice(spec, profile, triton)
    if residual == "none":
        return None, None
    if residual is not None and not isinstance(residual, Residual):
        raise ValueError(f'residual must be "shipped", "none", None or a Residual, got {residual!r}')
    return residual, None
