"""The DualAR network of Audio8 TTS, with upstream's module names.

- ``slow_ar``: the slow-AR interface (:class:`SlowAR`) both backbones implement;
- ``qwen``: the 0.6B Qwen-style slow AR (``embeddings``, ``codebook_embeddings``, ``layers``,
  ``norm``);
- ``falcon_h1``: the 0.1B Falcon-H1 slow AR (``slow.*``, ``semantic_output``);
- ``dual_ar``: the fast codebook AR (``fast_*``) and :func:`build_slow_ar`.
"""

from .dual_ar import build_slow_ar
from .slow_ar import HeadKind, SlowAR, SlowHidden

__all__ = ["HeadKind", "SlowAR", "SlowHidden", "build_slow_ar"]
