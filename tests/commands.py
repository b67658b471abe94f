"""How tests run the real ``rota`` console command."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def rota_command() -> list[str]:
    """The installed ``rota`` script next to this Python, else on PATH, else the module."""
    script = Path(sys.executable).parent / "rota"
    if script.exists():
        return [str(script)]
    found = shutil.which("rota")
    return [found] if found else [sys.executable, "-m", "rota.cli.main"]
