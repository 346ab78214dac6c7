"""`audiocpp package` and `audiocpp inspect` through the real CLI (subprocess)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from audiocpp.engine.weights.open import open_weights
from tests.engine.packaging_inputs import SIDECARS, make_spec_data, model_folder, omnivoice_folder
from tests.support import run_cli


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("cli")
    spec = root / "pkgtest.json"
    spec.write_text(json.dumps(make_spec_data(), indent=1), encoding="utf-8")
    return spec, model_folder(root / "Model")


def _no_output(out: Path) -> None:
    assert not out.exists()
    assert not [p for p in out.parent.iterdir() if out.name in p.name], "a temporary file was left behind"


def _fails(proc, code: int, *needles: str) -> None:
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stderr.startswith("error: ") and "Traceback" not in proc.stderr, proc.stderr
    for needle in needles:
        assert needle in proc.stderr, (needle, proc.stderr)


def test_package_a_folder_then_inspect(setup: tuple[Path, Path], tmp_path: Path) -> None:
    spec, folder = setup
    out = tmp_path / "m-q8_0.gguf"
    proc = run_cli("package", "--spec", spec, "--input", folder, "--type", "q8_0",
                   "--keep-type", "w/layers.*=f16", "--out", out)
    assert proc.returncode == 0, proc.stderr
    assert ("Q8_0" in proc.stdout and "lookup table" in proc.stdout
            and "--keep-type w/layers.*=f16" in proc.stdout)
    assert "embedded files: 5" in proc.stdout
    source = open_weights(out)
    assert source.info("w/layers.0.q_proj.weight").dtype == "F16"
    assert source.info("w/half.proj.weight").dtype == "F16"
    assert source.info("w/bf.weight").dtype == "Q8_0"
    assert {n: source.embedded_bytes(n) for n in source.embedded_file_names()} == SIDECARS


def test_family_detected_from_the_folder_and_inspect(tmp_path: Path) -> None:
    folder = omnivoice_folder(tmp_path / "OmniVoice")
    out = tmp_path / "omnivoice-q8_0.gguf"
    proc = run_cli("package", "--input", folder, "--type", "q8_0", "--out", out)
    assert proc.returncode == 0, proc.stderr
    source = open_weights(out)
    assert source.metadata["audiocpp.model_spec.family"] == "omnivoice"
    assert source.info("weights/llm.layers.0.self_attn.q_proj.weight").dtype == "Q8_0"
    assert source.info("weights/llm.embed_tokens.weight").dtype == "F16"
    assert source.info("audio_tokenizer_weights/fc2.weight").dtype == "F32"  # spec keep-type
    proc = run_cli("inspect", out, "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["family"] == "omnivoice" and data["spec"]["family"] == "omnivoice"
    assert data["namespaces"] == {"weights": 4, "audio_tokenizer_weights": 3}
    assert data["dtypes"] == {"F16": 1, "F32": 4, "I64": 1, "Q8_0": 1}
    assert "config.json" in data["embedded_files"] and "audio_tokenizer/config.json" in data["embedded_files"]
    proc = run_cli("inspect", out)
    assert "omnivoice" in proc.stdout and "Q8_0 x1" in proc.stdout


def test_existing_output_needs_overwrite(setup: tuple[Path, Path], tmp_path: Path) -> None:
    spec, folder = setup
    out = tmp_path / "m.gguf"
    out.write_bytes(b"keep me")
    proc = run_cli("package", "--spec", spec, "--input", folder, "--out", out)
    _fails(proc, 2, "already exists", "--overwrite")
    assert out.read_bytes() == b"keep me"
    proc = run_cli("package", "--spec", spec, "--input", folder, "--type", "f16", "--out", out, "--overwrite")
    assert proc.returncode == 0, proc.stderr
    assert open_weights(out).info("w/embed.weight").dtype == "F16"


def test_missing_namespace(setup: tuple[Path, Path], tmp_path: Path) -> None:
    spec, folder = setup
    out = tmp_path / "m.gguf"
    proc = run_cli("package", "--spec", spec, "--input", f"w={folder / 'model.safetensors'}", "--out", out)
    _fails(proc, 2, "codec")
    _no_output(out)


def test_missing_sidecar(setup: tuple[Path, Path], tmp_path: Path) -> None:
    spec, _ = setup
    folder = model_folder(tmp_path / "NoConfig", skip=("codec/config.json",))
    out = tmp_path / "m.gguf"
    proc = run_cli("package", "--spec", spec, "--input", folder, "--out", out)
    _fails(proc, 1, "codec/config.json")
    _no_output(out)


@pytest.mark.parametrize(("args", "needle"), [
    (("--type", "q4_k"), "K-quants"),
    (("--type", "int3"), "unknown --type"),
    (("--keep-type", "codec"), "pattern=type"),
    (("--keep-type", "nothing/*=f16"), "matches no tensor"),
])
def test_bad_type_options(setup: tuple[Path, Path], tmp_path: Path, args: tuple[str, ...],
                          needle: str) -> None:
    spec, folder = setup
    out = tmp_path / "m.gguf"
    proc = run_cli("package", "--spec", spec, "--input", folder, *args, "--out", out)
    _fails(proc, 2, needle)
    _no_output(out)


def test_missing_input_path(setup: tuple[Path, Path], tmp_path: Path) -> None:
    spec, _ = setup
    out = tmp_path / "m.gguf"
    proc = run_cli("package", "--spec", spec, "--input", tmp_path / "nowhere", "--out", out)
    _fails(proc, 2, "does not exist")
    _no_output(out)


def test_re_encode_a_package_of_a_family_not_installed(setup: tuple[Path, Path], tmp_path: Path) -> None:
    spec, folder = setup
    first = tmp_path / "a.gguf"
    assert run_cli("package", "--spec", spec, "--input", folder, "--out", first).returncode == 0
    second = tmp_path / "b.gguf"
    proc = run_cli("package", "--input", first, "--type", "q4_0", "--out", second)
    assert proc.returncode == 0, proc.stderr
    source = open_weights(second)
    assert source.metadata["audiocpp.model_spec.family"] == "pkgtest"
    assert source.info("w/layers.0.q_proj.weight").dtype == "Q4_0"
    assert {n: source.embedded_bytes(n) for n in source.embedded_file_names()} == SIDECARS
