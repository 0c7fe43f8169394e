"""A repository script (scripts/..., or a test helper file) loaded as a module, for its CPU tests."""

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def load_script(relative: str):
    """The module of REPO/`relative`, named after its file."""
    path = REPO / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
