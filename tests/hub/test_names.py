"""What a name means, and which files of a repo each installed family reads (in-process, no
network: the repo listings are the upstream layouts of docs and shared/reference)."""

from __future__ import annotations

from pathlib import Path

import pytest

from audiocpp.cli.download import format_package_list
from audiocpp.engine import hub
from audiocpp.engine.errors import FamilyUnavailableError, ModelError, UsageError
from audiocpp.engine.registry import get_family

OMNIVOICE = ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
             "chat_template.jinja", "audio_tokenizer/config.json", "audio_tokenizer/model.safetensors",
             "audio_tokenizer/preprocessor_config.json", "README.md", ".gitattributes", "assets/demo.png"]
VOXCPM2 = ["config.json", "model.safetensors", "audiovae.pth", "tokenizer.json", "tokenizer_config.json",
           "special_tokens_map.json", "tokenization_voxcpm2.py", "README.md", ".gitattributes"]
VOXCPM_05B = ["config.json", "pytorch_model.bin", "audiovae.pth", "tokenizer.json", "tokenizer_config.json",
              "special_tokens_map.json", "README.md", ".gitattributes"]


def _listing(files: list[str]) -> hub.Listing:
    return hub.Listing("0" * 40, {f: hub.RemoteFile(size=1) for f in files}, remote=True)


def _plan(repo: str, files: list[str], **kw) -> hub.Plan:
    return hub._plan(hub.ModelRef(repo, repo), _listing(files), kw.get("family"),
                     kw.get("runnable_only", False))


def test_local_paths_stay_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "org" / "tiny").mkdir(parents=True)
    for name in ("org/tiny", "./x/y", "/abs/x", "~/x", "models/OmniVoice/", "..", "C:\\models\\x"):
        assert hub.is_local_path(name), name
        assert hub.resolve_model(name) == Path(name)
    assert hub.resolve_model(Path("openbmb/VoxCPM2")) == Path("openbmb/VoxCPM2")  # a Path is always a path
    assert hub.resolve_model(None) is None
    for name in ("openbmb/VoxCPM2", "voxcpm1_0.5b", "org/name@v1"):
        assert not hub.is_local_path(name)
    with pytest.raises(UsageError, match="local path"):
        hub.resolve_model("org/tiny", revision="v1")
    with pytest.raises(ModelError, match="does not exist") as info:
        hub.resolve_model("OmniVoice")
    assert "repo id" in (info.value.hint or "")


def test_names_parse_as_packages_repos_files_and_revisions() -> None:
    ref = hub.parse_name("voxcpm1_0.5b")
    assert (ref.repo_id, ref.package, ref.family) == ("openbmb/VoxCPM-0.5B", "voxcpm1_0.5b", "voxcpm1")
    assert hub.parse_name("openbmb/VoxCPM2") == hub.ModelRef("openbmb/VoxCPM2", "openbmb/VoxCPM2")
    assert hub.parse_name("openbmb/VoxCPM2@v2.0").revision == "v2.0"
    assert hub.parse_name("openbmb/VoxCPM2", revision="abc").revision == "abc"
    ref = hub.parse_name("org/name/sub/model-q8_0.gguf@main")
    assert (ref.repo_id, ref.filename, ref.revision) == ("org/name", "sub/model-q8_0.gguf", "main")
    for not_a_name in ("OmniVoice", "org/", "/org/x", "org/name/config.json", "a/b/c"):
        assert hub.parse_name(not_a_name) is None, not_a_name
    with pytest.raises(UsageError, match="--revision"):
        hub.parse_name("org/x@v1", revision="v2")
    with pytest.raises(UsageError, match="built, not downloaded"):
        hub.parse_name("voxcpm2_q8_0")


@pytest.mark.parametrize("layout,families,files", [
    (OMNIVOICE, ("omnivoice",), {"config.json", "model.safetensors", "tokenizer.json",
                                 "tokenizer_config.json", "chat_template.jinja",
                                 "audio_tokenizer/config.json", "audio_tokenizer/model.safetensors",
                                 "audio_tokenizer/preprocessor_config.json"}),
    (VOXCPM2, ("voxcpm1", "voxcpm2"), {"config.json", "model.safetensors", "audiovae.pth", "tokenizer.json",
                                       "tokenizer_config.json", "special_tokens_map.json"}),
    (VOXCPM_05B, ("voxcpm1", "voxcpm2"), {"config.json", "pytorch_model.bin", "audiovae.pth",
                                          "tokenizer.json", "tokenizer_config.json",
                                          "special_tokens_map.json"}),
], ids=["omnivoice", "voxcpm2", "voxcpm-0.5b"])
def test_a_repo_id_fetches_only_the_files_its_family_reads(layout, families, files) -> None:
    plan = _plan("org/x", layout)
    assert set(plan.allow) == files and plan.target == ""
    assert set(families) <= set(plan.families)  # config.json tells them apart after the download


def test_hexgrads_kokoro_repo_fetches_the_weights_config_and_voices_only() -> None:
    """The spec's optional ``voices/*.pt`` glob takes every voice; samples, the ONNX and the README stay."""
    listing = ["config.json", "kokoro-v1_0.pth", "voices/af_heart.pt", "voices/jf_alpha.pt", "README.md",
               "samples/HEARME.wav", "eval/ArenaEval.png"]
    plan = _plan("hexgrad/Kokoro-82M", listing)
    assert set(plan.allow) == {"config.json", "kokoro-v1_0.pth", "voices/af_heart.pt", "voices/jf_alpha.pt"}
    assert plan.families == ("kokoro",)


def test_one_gguf_resolves_to_the_file_several_need_a_name_none_is_an_error() -> None:
    plan = _plan("org/pkg", ["voxcpm2-q8_0.gguf", "README.md"])
    assert plan.allow == ("voxcpm2-q8_0.gguf",) and plan.target == "voxcpm2-q8_0.gguf"
    with pytest.raises(UsageError, match="several GGUF files") as info:
        _plan("org/many", ["a.gguf", "b.gguf"])
    assert "org/many/a.gguf" in info.value.hint
    with pytest.raises(ModelError, match="match no installed family") as info:
        _plan("org/other", ["config.json", "model.onnx"])
    assert "model.onnx" in info.value.message and "omnivoice needs" in info.value.hint
    # a repo with the family layout and GGUFs besides: the layout wins
    assert _plan("org/both", [*VOXCPM2, "voxcpm2-q8_0.gguf"]).target == ""


def test_family_filter_and_package_plans() -> None:
    plan = _plan("org/x", VOXCPM2, family="voxcpm2")
    assert plan.families == ("voxcpm2",)
    with pytest.raises(ModelError, match=r"match no installed family \(omnivoice\)"):
        _plan("org/x", VOXCPM2, family="omnivoice")
    ref = hub.parse_name("voxcpm1_0.5b")
    plan = hub._plan(ref, _listing(VOXCPM_05B), None, False)
    package = next(p for p in get_family("voxcpm1").spec.packages if p.id == "voxcpm1_0.5b")
    assert plan.allow == package.files and plan.families == ("voxcpm1",)
    with pytest.raises(ModelError, match="lacks files package 'voxcpm1_0.5b' needs: audiovae.pth"):
        hub._plan(ref, _listing([f for f in VOXCPM_05B if f != "audiovae.pth"]), None, False)


def test_a_family_that_cannot_run_is_refused_before_any_download(monkeypatch: pytest.MonkeyPatch) -> None:
    plugin = get_family("voxcpm2")
    monkeypatch.setattr(plugin, "spec",
                        plugin.spec.model_copy(update={"status": "wip", "status_note": "not yet"}))
    with pytest.raises(FamilyUnavailableError, match="not yet"):
        _plan("org/x", VOXCPM2, family="voxcpm2", runnable_only=True)
    # `audiocpp download` may fetch it
    assert _plan("org/x", VOXCPM2, family="voxcpm2").families == ("voxcpm2",)
    monkeypatch.setattr(hub, "_listing", lambda *a: pytest.fail("the hub was asked"))
    with pytest.raises(FamilyUnavailableError, match="not yet"):
        hub.fetch(hub.ModelRef("voxcpm2_safetensors", "openbmb/VoxCPM2", package="voxcpm2_safetensors",
                               family="voxcpm2"), runnable_only=True)


def test_package_list_without_network(tmp_path: Path) -> None:
    rows = hub.list_packages(tmp_path, remote=False)
    assert {r.id for r in rows} == set(hub.package_index())
    assert all(not r.cached and r.size_bytes is None for r in rows)
    text = format_package_list(rows)
    assert text.splitlines()[0].split() == ["package", "family", "size", "cached", "source"]
    assert hub.human_size(3_100_000_000) == "3.1 GB" and hub.human_size(512) == "512 B"
