"""This folder's helper module (script_module.py) importable by its tests, as tests/kernels does for its own."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
