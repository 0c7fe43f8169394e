"""This folder's helper modules (compile_script.py) import by name from its tests: pytest's importlib mode puts
no test folder on sys.path."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
