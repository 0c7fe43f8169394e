"""How a config's failure is reported: its error text, and a CUDA context it killed (the probe that tells, the error that names it).

An illegal memory access (or a device-side assert) is sticky: every later CUDA call in the process
fails, so nothing after it can be measured and the config must not run again. The probe runs after a
config's run failed; `ContextLost` carries that config out to the sweep, which quarantines it.
torch is imported inside the probe, so the sweep and its fakes can import this module anywhere.
"""

from __future__ import annotations

from collections.abc import Hashable


class ContextLost(RuntimeError):
    """`culprit` (a config, or a timing key such as 'cublas') ran just before the CUDA context died."""

    def __init__(self, culprit: Hashable, reason: str):
        super().__init__(f"the CUDA context died after {culprit}: {reason}")
        self.culprit, self.reason = culprit, reason


def error_text(exc: BaseException) -> str:
    """`Type: message` on one line, at most 300 characters: a compile's or launch's recorded error."""
    return f"{type(exc).__name__}: {exc}".replace("\n", " ")[:300]


def error_line(exc: BaseException) -> str:
    """`Type: first line of the message` (at most 200 characters of it): a run's failure in short."""
    return f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:200]}"


def context_error(device: str = "cuda") -> str | None:
    """None while the CUDA context of `device` still runs a kernel and synchronizes; else the first
    line of the error (always None for a non-CUDA device)."""
    import torch

    if torch.device(device).type != "cuda":
        return None
    try:
        torch.empty(1, device=device).zero_()
        torch.cuda.synchronize(device)
    except Exception as exc:  # whatever CUDA raises, the context is unusable
        return error_line(exc)
    return None
