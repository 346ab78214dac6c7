"""A spectrogram PNG of an audio file, with numpy and Pillow only: listen with your eyes.

Real speech shows harmonics (parallel bands under voiced sounds), formants (dark-bright regions that move)
and gaps between words; noise shows none of that. Log magnitude of a 25 ms Hann-windowed STFT, 0-8 kHz by
default, time left to right, low frequencies at the bottom, a faint grid every second and every kHz.

    python tools/spectrogram.py hello.wav hello.png [--max-hz 8000] [--height 400] [--px-per-s 200]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

#: A perceptual dark-to-bright ramp (dark blue, purple, orange, pale yellow), interpolated.
_RAMP = np.array([[13, 8, 135], [126, 3, 168], [204, 71, 120], [248, 149, 64], [240, 249, 33]], np.float32)


def spectrogram(samples: np.ndarray, rate: int, *, max_hz: float = 8000.0, hop_s: float = 0.005,
                window_s: float = 0.025) -> np.ndarray:
    """dB magnitudes ``[frequency bins up to max_hz, frames]``, low frequencies first."""
    n_fft = int(2 ** np.ceil(np.log2(window_s * rate)))
    hop = max(1, int(hop_s * rate))
    window = np.hanning(int(window_s * rate)).astype(np.float32)
    x = np.pad(samples.astype(np.float32), (len(window) // 2, len(window) // 2))
    frames = max(1, 1 + (len(x) - len(window)) // hop)
    idx = np.arange(len(window))[None, :] + hop * np.arange(frames)[:, None]
    spec = np.abs(np.fft.rfft(x[idx] * window, n=n_fft, axis=1)).T
    bins = int(min(spec.shape[0], max_hz / (rate / 2) * (spec.shape[0] - 1) + 1))
    return 20 * np.log10(spec[:bins] + 1e-6)


def render(db: np.ndarray, seconds: float, *, height: int = 400, px_per_s: int = 200,
           max_hz: float = 8000.0, floor_db: float = 70.0) -> np.ndarray:
    """RGB image ``[height, width, 3]`` of ``db`` (the top ``floor_db`` dB shown), with a light grid."""
    width = max(32, int(seconds * px_per_s))
    top = float(db.max())
    level = np.clip((db - (top - floor_db)) / floor_db, 0.0, 1.0)
    rows = np.linspace(level.shape[0] - 1, 0, height).round().astype(int)
    cols = np.linspace(0, level.shape[1] - 1, width).round().astype(int)
    v = level[rows][:, cols] * (len(_RAMP) - 1)
    lo = np.floor(v).astype(int)
    hi = np.minimum(lo + 1, len(_RAMP) - 1)
    frac = (v - lo)[..., None]
    image = _RAMP[lo] * (1 - frac) + _RAMP[hi] * frac
    for s in range(1, int(seconds) + 1):
        image[:, min(width - 1, int(s * px_per_s))] = (255, 255, 255)
    for khz in range(1, int(max_hz // 1000)):
        image[height - 1 - int(khz * 1000 / max_hz * (height - 1)), ::4] = (255, 255, 255)
    return image.astype(np.uint8)


def write_png(audio_path: Path, png: Path, *, max_hz: float = 8000.0, height: int = 400,
              px_per_s: int = 200) -> Path:
    import soundfile as sf
    from PIL import Image

    samples, rate = sf.read(str(audio_path), dtype="float32", always_2d=True)
    mono = samples.mean(axis=1)
    db = spectrogram(mono, rate, max_hz=min(max_hz, rate / 2))
    Image.fromarray(render(db, len(mono) / rate, height=height, px_per_s=px_per_s,
                           max_hz=min(max_hz, rate / 2))).save(png)
    return png


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("audio", type=Path)
    parser.add_argument("png", type=Path)
    parser.add_argument("--max-hz", type=float, default=8000.0)
    parser.add_argument("--height", type=int, default=400)
    parser.add_argument("--px-per-s", type=int, default=200)
    args = parser.parse_args(argv)
    print(write_png(args.audio, args.png, max_hz=args.max_hz, height=args.height, px_per_s=args.px_per_s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
