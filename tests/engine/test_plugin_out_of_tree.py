"""A third-party family, built and installed from its own pyproject, plugs in with no core change."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support import run_cli


def _env(site: Path) -> dict[str, str]:
    return {"PYTHONPATH": str(site)}


def test_listed_with_the_builtins(toy_site: Path) -> None:
    proc = run_cli("families", "--json", env=_env(toy_site))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    names = {row["family"] for row in data["families"]}
    assert {"omnivoice", "voxcpm1", "voxcpm2", "audio8_tts", "toytone"} <= names
    toy = next(row for row in data["families"] if row["family"] == "toytone")
    assert toy["origin"] == "audiocpp-toyfamily 0.1.0"
    assert data["broken"] == []
    table = run_cli("families", env=_env(toy_site)).stdout
    assert "toytone" in table and "experimental" in table


def test_inspected_with_auto_detection(toy_site: Path, toy_model_dir: Path) -> None:
    proc = run_cli("inspect", toy_model_dir, "--json", env=_env(toy_site))
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["family"] == "toytone"
    assert info["num_tensors"] == 1


def test_loaded_and_run_from_the_cli(toy_site: Path, toy_model_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "toy.wav"
    proc = run_cli("--model", toy_model_dir, "--text", "hello plugin world", "--mode", "streaming",
                   "--seed", "3", "--metrics", "--load-option", "slowdown=2", "--out", out, env=_env(toy_site))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("event=audio") == 3
    assert "rtf=" in proc.stdout and "seed=3" in proc.stdout
    import soundfile as sf

    audio, rate = sf.read(out)
    assert rate == 16000
    assert len(audio) == len("helloplugintworld".replace("t", "")) * 2 * 160


def test_family_options_come_from_its_own_spec(toy_site: Path, toy_model_dir: Path, tmp_path: Path) -> None:
    help_text = run_cli("--family", "toytone", "--help", env=_env(toy_site)).stdout
    assert "gain" in help_text and "slowdown" in help_text
    out = tmp_path / "x.wav"
    proc = run_cli("--model", toy_model_dir, "--text", "hi", "--request-option", "gain=3", "--out", out,
                   env=_env(toy_site))
    assert proc.returncode == 2
    assert "above the maximum 1" in proc.stderr
    assert not out.exists()


def test_packaged_then_inspected_without_the_plugin(toy_site: Path, toy_model_dir: Path, tmp_path: Path) -> None:
    package = tmp_path / "toy-f16.gguf"
    proc = run_cli("package", "--family", "toytone", "--input", toy_model_dir, "--type", "f16", "--out", package,
                   env=_env(toy_site))
    assert proc.returncode == 0, proc.stderr
    # Without the plugin installed the package still describes itself through its embedded spec.
    proc = run_cli("inspect", package, "--json")
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["family"] == "toytone"
    assert info["spec"]["display_name"] == "Toy tone synthesizer"
    assert info["namespaces"] == {"weights": 1} and info["dtypes"] == {"F32": 1}
    assert "config.json" in info["embedded_files"]
    # With the plugin, the package runs like the folder did.
    out = tmp_path / "from-package.wav"
    proc = run_cli("--model", package, "--text", "hi", "--seed", "1", "--out", out, env=_env(toy_site))
    assert proc.returncode == 0, proc.stderr
    assert "sample_rate=16000" in proc.stdout
