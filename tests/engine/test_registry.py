"""Entry-point discovery and family detection from files."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import gguf
import numpy as np
import pytest

from audiocpp.engine import registry
from audiocpp.engine.errors import FamilyUnavailableError, ModelError, UsageError

BUILTIN = {"omnivoice", "voxcpm1", "voxcpm2", "audio8_tts"}


def _gguf(path: Path, arch: str, **meta: str) -> Path:
    writer = gguf.GGUFWriter(str(path), arch)
    for key, value in meta.items():
        writer.add_string(key, value)
    writer.add_tensor("x", np.zeros(4, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_builtin_families_are_discovered_through_entry_points() -> None:
    found = registry.families()
    assert BUILTIN <= set(found)
    for name in BUILTIN:
        assert found[name].name == name
        assert registry.origin(name).startswith("audiocpp ")


def test_listing_imports_no_model_code_and_no_torch() -> None:
    import subprocess

    code = (
        "import sys; from audiocpp.engine import registry; "
        "fams = registry.families(); [p.spec for p in fams.values()]; "
        "heavy = [m for m in sys.modules if m == 'torch' "
        "or (m.startswith('audiocpp.families.') and m.count('.') > 2)]; "
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_unknown_family_lists_the_installed_ones() -> None:
    with pytest.raises(UsageError) as err:
        registry.get_family("nope")
    assert "omnivoice" in str(err.value)


def test_detect_from_gguf_architecture(tmp_path: Path) -> None:
    path = _gguf(tmp_path / "lm.gguf", "omnivoice-lm")
    assert registry.detect_family(path).name == "omnivoice"


def test_detect_from_gguf_metadata_key(tmp_path: Path) -> None:
    path = _gguf(tmp_path / "v.gguf", "llama", voxcpm_architecture="voxcpm")
    assert registry.detect_family(path).name == "voxcpm1"


def test_embedded_spec_family_wins(tmp_path: Path) -> None:
    path = _gguf(tmp_path / "p.gguf", "omnivoice-lm", **{"audiocpp.model_spec.family": "voxcpm2"})
    assert registry.detect_family(path).name == "voxcpm2"


def test_detect_from_config_json(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"architecture": "voxcpm2"}))
    assert registry.detect_family(tmp_path).name == "voxcpm2"
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "omnivoice"}))
    assert registry.detect_family(tmp_path).name == "omnivoice"


def test_undetectable_path_lists_candidates(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(ModelError) as err:
        registry.detect_family(tmp_path)
    assert "pass --family" in str(err.value) and "voxcpm2" in str(err.value)


def test_ambiguous_detection_lists_the_matches(tmp_path: Path) -> None:
    # A folder holding both families' marker files and no config.json.
    for rel in ("config.json", "audiovae.pth", "audio_tokenizer/config.json"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("{}")
    with pytest.raises(ModelError) as err:
        registry.detect_family(tmp_path)
    message = str(err.value)
    assert "matches several families" in message and "voxcpm1" in message and "voxcpm2" in message


def test_missing_path_and_wrong_magic(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="does not exist"):
        registry.detect_family(tmp_path / "missing.gguf")
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"NOPE" + b"\0" * 64)
    with pytest.raises(ModelError, match="not a GGUF file"):
        registry.detect_family(bad)


def test_wip_family_is_refused_with_its_status_note(tmp_path: Path) -> None:
    from audiocpp.engine.plugin import FamilyPlugin
    from audiocpp.engine.spec import builtin_spec_path

    spec = json.loads(builtin_spec_path("voxcpm2").read_text())
    spec.update(status="wip", status_note="its model code has not landed yet")
    (tmp_path / "voxcpm2.json").write_text(json.dumps(spec))

    class WipPlugin(FamilyPlugin):
        name = "voxcpm2"
        spec_file = tmp_path / "voxcpm2.json"

    plugin = WipPlugin()
    assert plugin.spec.status == "wip"
    with pytest.raises(FamilyUnavailableError) as err:
        plugin.load("/nonexistent")
    assert plugin.spec.status_note in str(err.value)
    assert err.value.exit_code == 2
