"""Which correction ranks a live tune: the shipped residual of the kernel on this GPU over this version of its
space that ranks under the installed Triton release (roofline/releases.py: the one fitted under it, else one
checked under it), else the model alone."""

from __future__ import annotations

from rooftune.hwprofiles import HardwareProfile
from rooftune.hwprofiles.hwprobe import installed_triton
from rooftune.roofline.releases import choose_residual
from rooftune.roofline.residual import Residual


def residual_choice(spec, profile: HardwareProfile, triton: str | None) -> tuple[object, str]:
    """The residual a live tune under Triton `triton` uses by default, and a line saying which and why: the
    shipped one of `spec`'s kernel on this GPU over this version of its space that ranks under this Triton
    release (`choose_residual`); else None (the model alone)."""
    residual, line = choose_residual(spec.name, profile, spec.space.version, triton)
    return residual, f"the model × {line}" if residual is not None else f"the model alone: {line}"


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
