"""audiocpp's engine: registry, specs, weights, sessions and the CLI.

``audiocpp.engine.load(path)`` detects the family and returns a :class:`LoadedModel`;
``model.session("tts").run(TaskRequest(text=...))`` synthesizes. Importing this package
does not import torch.
"""

from .errors import AudiocppError, AudioError, ModelError, SpecError, UsageError
from .hub import download
from .loader import load
from .records import AudioBuffer, Metrics, StreamEvent, TaskRequest, TaskResult, VoiceReference, WordTiming
from .registry import detect_family, families, get_family
from .tasks import Mode, Task

__all__ = [
    "AudioBuffer",
    "AudioError",
    "AudiocppError",
    "Metrics",
    "Mode",
    "ModelError",
    "SpecError",
    "StreamEvent",
    "Task",
    "TaskRequest",
    "TaskResult",
    "UsageError",
    "VoiceReference",
    "WordTiming",
    "detect_family",
    "download",
    "families",
    "get_family",
    "load",
]
