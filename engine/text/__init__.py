"""Text utilities shared by families: chunking of long text, punctuation helpers.

``chunking.chunk_text_punctuation`` is OmniVoice's exact rule; ``chunking.chunk_text`` is the
general, budget-bounded chunker; ``punctuation.add_punctuation`` is OmniVoice's.
"""

from .chunking import chunk_text, chunk_text_punctuation, split_sentences
from .punctuation import add_punctuation

__all__ = ["add_punctuation", "chunk_text", "chunk_text_punctuation", "split_sentences"]
