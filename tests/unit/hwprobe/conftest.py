"""Make the fake NVML module importable (pytest's importlib mode does not add test dirs)."""

import sys
from pathlib import Path

HERE = str(Path(__file__).parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
