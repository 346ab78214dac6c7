"""Load OmniVoice 0.2.1's utils/audio.py and utils/text.py by file path (reference env only).

Importing the ``omnivoice`` package would run its __init__, which imports the model and
transformers; these two files import only numpy, soundfile, torch, torchaudio and pydub.
"""

from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path
from types import ModuleType

warnings.filterwarnings("ignore")


def _omnivoice_root() -> Path:
    spec = importlib.util.find_spec("omnivoice")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("omnivoice is not installed in this env (tools/reference_envs/torchaudio.sh)")
    return Path(next(iter(spec.submodule_search_locations)))


def load(name: str) -> ModuleType:
    """``load("audio")`` / ``load("text")``: omnivoice/utils/<name>.py as a standalone module."""
    path = _omnivoice_root() / "utils" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"omnivoice_utils_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
