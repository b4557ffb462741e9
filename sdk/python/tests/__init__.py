"""Tests of the santa SDK; importing this package makes `santa` importable
from the source tree, so nothing needs installing."""

import sys
from pathlib import Path

_SDK = str(Path(__file__).resolve().parent.parent)
if _SDK not in sys.path:
    sys.path.insert(0, _SDK)
