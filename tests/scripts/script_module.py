"""A repository script (scripts/..., or a test helper file) loaded as a module, for its CPU tests."""

import importlib.util
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def load_script(relative: str):
    """The module of REPO/`relative`, named after its file."""
    path = REPO / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def gpu_stack_after_import(relative: str) -> tuple[bool, bool]:
    """(torch loaded, triton loaded) after importing REPO/`relative` in a fresh interpreter."""
    path = str(REPO / relative)
    code = (f"import importlib.util, sys\nspec = importlib.util.spec_from_file_location('m', {path!r})\n"
            "spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
            "print('torch' in sys.modules, 'triton' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    return out[0] == "True", out[1] == "True"
