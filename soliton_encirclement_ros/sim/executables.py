"""Where this package's console scripts are: beside Python, in the ament prefix, or on PATH."""
from __future__ import annotations

from pathlib import Path
import shutil
import sys


def find_executable(executable: str, package: str = 'soliton_encirclement_ros') -> str:
    """
    Return a console script of ``package``.

    Beside this Python (pip/venv), in the ament prefix (colcon: ``<prefix>/lib/<package>/``) or on
    PATH; ``FileNotFoundError`` otherwise.
    """
    local = Path(sys.executable).parent / executable
    if local.exists():
        return str(local)
    try:
        from ament_index_python.packages import get_package_prefix
        candidate = Path(get_package_prefix(package)) / 'lib' / package / executable
        if candidate.exists():
            return str(candidate)
    except (ImportError, LookupError):
        pass
    found = shutil.which(executable)
    if found is None:
        raise FileNotFoundError(f'executable {executable} of {package} not found')
    return found
