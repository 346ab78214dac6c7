"""Audio utilities shared by every family.

- ``io``: read (mono mixdown as upstream) and write (atomically) WAV / FLAC / OGG.
- ``resample``: equal to ``torchaudio.functional.resample``'s default, without torchaudio.
- ``silence``: pydub 0.25.1's silence functions and OmniVoice's ``remove_silence`` /
  ``trim_long_audio`` on numpy audio, without pydub.
- ``dsp``: fades, cross-fading of chunks, peak / RMS normalisation.

Submodules are imported where used (``from audiocpp.engine.audio.io import read_audio``) so
that importing this package pulls in neither torch nor soundfile.
"""
