"""Malformed inputs give one clear error with a hint, a non-zero exit and no output file (real CLI)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import gguf
import numpy as np
import pytest

from tests.support import run_cli


def _env(site: Path) -> dict[str, str]:
    return {"PYTHONPATH": str(site)}


def _assert_clean_failure(proc, out: Path, code: int, *needles: str) -> None:
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("error: "), f"not checked before the model loads:\n{proc.stderr}"
    assert "\n  hint: " in proc.stderr, f"no hint line (docs/cli.md promises one):\n{proc.stderr}"
    assert "internal error" not in proc.stderr
    for needle in needles:
        assert needle in proc.stderr, (needle, proc.stderr)
    assert not out.exists()
    assert not list(out.parent.glob(f"*{out.name}*")), "a temporary output file was left behind"


def _small_gguf(path: Path) -> Path:
    writer = gguf.GGUFWriter(str(path), "omnivoice-lm")
    writer.add_tensor("w", np.arange(64, dtype=np.float32).reshape(8, 8))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_truncated_gguf(tmp_path: Path) -> None:
    good = _small_gguf(tmp_path / "good.gguf")
    bad = tmp_path / "truncated.gguf"
    bad.write_bytes(good.read_bytes()[:-100])
    out = tmp_path / "out" / "x.wav"
    out.parent.mkdir()
    proc = run_cli("--model", bad, "--text", "hi", "--out", out)
    _assert_clean_failure(proc, out, 1, "truncated")


def test_gguf_with_a_wrong_magic(tmp_path: Path) -> None:
    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"GGUX" + _small_gguf(tmp_path / "g.gguf").read_bytes()[4:])
    out = tmp_path / "out" / "x.wav"
    out.parent.mkdir()
    proc = run_cli("--model", bad, "--text", "hi", "--out", out)
    _assert_clean_failure(proc, out, 1, "not a GGUF file")


def test_safetensors_header_that_lies_about_sizes(toy_site: Path, toy_model_dir: Path,
                                                  tmp_path: Path) -> None:
    path = toy_model_dir / "model.safetensors"
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    header["tone.frequencies"]["data_offsets"][1] += 4096  # claims more bytes than the file has
    new_header = json.dumps(header).encode()
    new_header += b" " * (-len(new_header) % 8)
    path.write_bytes(struct.pack("<Q", len(new_header)) + new_header + raw[8 + n :])
    out = tmp_path / "x.wav"
    proc = run_cli("--model", toy_model_dir, "--text", "hi", "--out", out, env=_env(toy_site))
    _assert_clean_failure(proc, out, 1, "model.safetensors")


def test_voice_reference_that_is_not_audio(tmp_path: Path) -> None:
    fake = tmp_path / "voice.wav"
    fake.write_text("RIFF? no, just text")
    out = tmp_path / "x.wav"
    proc = run_cli("--family", "omnivoice", "--task", "clon", "--text", "hi", "--voice-ref", fake,
                   "--reference-text", "hello", "--out", out)
    _assert_clean_failure(proc, out, 1, "voice.wav")
    # the hint names the formats --help names
    assert "WAV, FLAC, OGG or MP3" in proc.stderr
    assert "wav/flac/ogg/mp3" in " ".join(run_cli("--help").stdout.split())


def test_unsupported_gguf_version(tmp_path: Path) -> None:
    good = _small_gguf(tmp_path / "good.gguf").read_bytes()
    bad = tmp_path / "v9.gguf"
    bad.write_bytes(good[:4] + struct.pack("<I", 9) + good[8:])
    out = tmp_path / "x.wav"
    proc = run_cli("--family", "omnivoice", "--model", bad, "--text", "hi", "--out", out)
    _assert_clean_failure(proc, out, 1, "GGUF version 9 is not supported", "version 3")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--text", "   "], "empty"),
        (["--text", "hi", "--request-option", "warp=9"], "no request option 'warp'"),
        (["--text", "hi", "--request-option", "gain"], "key=value"),
        (["--text", "hi", "--session-option", "toytone.turbo=1"], "no session option"),
        (["--text", "hi", "--task", "sing"], "unknown task"),
        (["--text", "hi", "--mode", "batch"], "unknown mode"),
        (["--text", "hi", "--format", "m4a"], "--format 'm4a'"),
        (["--text", "hi", "--text-file", "x.txt"], "not both"),
        (["--text", "hi", "--voice-ref", "missing.wav"], "--voice-ref 'missing.wav' does not exist"),
        (["--text", "hi", "--seed", "-1"], "below the minimum 0"),
    ],
)
def test_usage_errors_exit_2(toy_site: Path, toy_model_dir: Path, tmp_path: Path, args, needle) -> None:
    out = tmp_path / "x.wav"
    proc = run_cli("--model", toy_model_dir, *args, "--out", out, env=_env(toy_site))
    _assert_clean_failure(proc, out, 2, needle)


def _wip_family_site(root: Path) -> Path:
    """A family installed with status 'wip' (the toy's spec, marked wip): a module and its dist-info."""
    site = root / "site"
    (site / "wiptone-0.1.dist-info").mkdir(parents=True)
    (site / "wiptone-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: wiptone\nVersion: 0.1\n")
    (site / "wiptone-0.1.dist-info" / "entry_points.txt").write_text(
        "[audiocpp.families]\nwiptone = wiptone:plugin\n")
    spec = json.loads((Path(__file__).parents[1] / "data" / "audiocpp_toyfamily" / "src"
                       / "audiocpp_toyfamily" / "toytone.json").read_text())
    spec.update(family="wiptone", status="wip", status_note="its model code has not landed yet")
    spec.pop("detection", None)
    for row in spec["options"]["request"]:  # the toy's own options are named toytone.*
        row["name"] = row["name"].replace("toytone.", "wiptone.")
    (site / "wiptone.json").write_text(json.dumps(spec))
    (site / "wiptone.py").write_text(
        "from pathlib import Path\nfrom audiocpp.engine.plugin import FamilyPlugin\n\n"
        "class WipPlugin(FamilyPlugin):\n    name = 'wiptone'\n"
        "    spec_file = Path(__file__).with_name('wiptone.json')\n\n"
        "plugin = WipPlugin()\n")
    return site


def test_unknown_family_and_wip_family(tmp_path: Path) -> None:
    out = tmp_path / "x.wav"
    proc = run_cli("--family", "nope", "--text", "hi", "--out", out)
    _assert_clean_failure(proc, out, 2, "unknown family 'nope'", "omnivoice")
    proc = run_cli("--family", "omnivoce", "--text", "hi", "--out", out)  # a typo: the close name
    _assert_clean_failure(proc, out, 2, "unknown family 'omnivoce'", "did you mean 'omnivoice'?")
    proc = run_cli("--family", "wiptone", "--model", tmp_path, "--text", "hi", "--out", out,
                   env=_env(_wip_family_site(tmp_path)))
    _assert_clean_failure(proc, out, 2, "status 'wip'", "its model code has not landed yet")


def test_an_unknown_family_is_refused_before_torch_is_imported(tmp_path: Path) -> None:
    """The checks before a model loads need no torch (its import is most of a refusal's time)."""
    import subprocess
    import sys

    argv = ["audiocpp", "--family", "omnivoce", "--text", "hi", "--out", str(tmp_path / "x.wav")]
    code = (f"import sys\nfrom audiocpp.cli.main import main\nsys.argv = {argv!r}\n"
            "try:\n    main()\nexcept SystemExit as stop:\n    print('exit', stop.code)\n"
            "print('torch imported:', 'torch' in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "unknown family 'omnivoce'" in proc.stderr
    assert proc.stdout.split() == ["exit", "2", "torch", "imported:", "False"], proc.stdout


def test_output_folder_must_exist(toy_site: Path, toy_model_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "missing" / "x.wav"
    proc = run_cli("--model", toy_model_dir, "--text", "hi", "--out", out, env=_env(toy_site))
    _assert_clean_failure(proc, out, 2, "does not exist", f"mkdir -p {out.parent}")


def test_seed_range_prints_whole_numbers(tmp_path: Path) -> None:
    out = tmp_path / "x.wav"
    proc = run_cli("--family", "omnivoice", "--text", "hi", "--seed", str(2**64), "--out", out)
    _assert_clean_failure(proc, out, 2, "above the maximum 9223372036854775807")
    listing = run_cli("options", "--family", "omnivoice").stdout
    assert "int [0..9223372036854775807]" in listing and "e+18" not in listing


def test_text_from_stdin_and_file(toy_site: Path, toy_model_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "a.wav"
    proc = run_cli("--model", toy_model_dir, "--out", out, input="from stdin", env=_env(toy_site))
    assert proc.returncode == 0, proc.stderr
    text_file = tmp_path / "t.txt"
    text_file.write_text("from a file", encoding="utf-8")
    out2 = tmp_path / "b.flac"
    proc = run_cli("--model", toy_model_dir, "--text-file", text_file, "--out", out2, env=_env(toy_site))
    assert proc.returncode == 0, proc.stderr
    assert out.exists() and out2.exists()
