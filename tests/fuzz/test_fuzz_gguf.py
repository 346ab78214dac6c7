"""Fuzz the GGUF reader and the package reader: mutated valid files and field-by-field lies.

Each input is opened as ``audiocpp`` opens a model (``open_weights``; ``detect_family`` for the
auto-detection of ``audiocpp --model``), then every tensor is read and every embedded file
and the embedded spec are parsed, under the invariants of ``harness.check``.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given

from audiocpp.engine.weights import open_weights

from . import gguf_raw, seeds
from .harness import check, fuzz_settings
from .mutate import mutated


def read_everything(path: Path) -> None:
    """What loading a model and `audiocpp inspect` do with a weights file."""
    source = open_weights(path)
    for name in source.names():
        source.info(name)
        source.get(name)
    for ns in source.namespaces():
        len(source.namespace(ns))
    if source.model_spec_json:
        from audiocpp.engine.inspect import embedded_spec

        embedded_spec(source)


def detect(path: Path) -> None:
    from audiocpp.engine.registry import detect_family

    detect_family(path)


@given(mutated(seeds.gguf_seeds(), focus=512))
@fuzz_settings("gguf_bytes")
def test_mutated_gguf(fuzz_dir: Path, case: tuple[str, bytes]) -> None:
    path = fuzz_dir / "model.gguf"
    path.write_bytes(case[1])
    check("gguf_bytes", lambda: read_everything(path), files=[path])
    check("gguf_bytes", lambda: detect(path), files=[path])


@given(gguf_raw.gguf_files())
@fuzz_settings("gguf_struct")
def test_lying_gguf(fuzz_dir: Path, data: bytes) -> None:
    path = fuzz_dir / "lies.gguf"
    path.write_bytes(data)
    check("gguf_struct", lambda: read_everything(path), files=[path])


@given(mutated(seeds.package_seeds(), focus=4096))
@fuzz_settings("package_bytes")
def test_mutated_package(fuzz_dir: Path, case: tuple[str, bytes]) -> None:
    path = fuzz_dir / "package.gguf"
    path.write_bytes(case[1])
    check("package_bytes", lambda: read_everything(path), files=[path])


@given(gguf_raw.gguf_files(extra_kvs=gguf_raw.package_kvs))
@fuzz_settings("package_keys")
def test_lying_package_keys(fuzz_dir: Path, data: bytes) -> None:
    path = fuzz_dir / "keys.gguf"
    path.write_bytes(data)
    check("package_keys", lambda: read_everything(path), files=[path])
