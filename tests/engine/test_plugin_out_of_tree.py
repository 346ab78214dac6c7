"""A third-party family, built and installed from its own pyproject, plugs in with no core change:
everything docs/adding-a-family.md promises, through the real CLI (and the Python API in a
subprocess) with the toy distribution pip-installed next to audiocpp."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import soundfile as sf

from tests.support import run_cli

TOY_SPEC = (Path(__file__).resolve().parents[1] / "data" / "audiocpp_toyfamily" / "src" / "audiocpp_toyfamily"
            / "toytone.json")


def _env(*sites: Path, cache: Path | None = None) -> dict[str, str]:
    env = {"PYTHONPATH": os.pathsep.join(str(s) for s in sites)}
    if cache is not None:
        env["AUDIOCPP_CACHE_DIR"] = str(cache)
    return env


def _site(root: Path, name: str, module: str, spec: dict) -> Path:
    """A family installed as a module and its dist-info (what pip leaves), entry point included."""
    site = root / f"{name}-site"
    info = site / f"{name}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[audiocpp.families]\n{name} = {name}:plugin\n")
    (site / f"{name}.json").write_text(json.dumps(spec))
    (site / f"{name}.py").write_text(module)
    return site


def _toy_spec(family: str, **changes) -> dict:
    spec = json.loads(TOY_SPEC.read_text())
    for row in spec["options"]["request"]:
        row["name"] = row["name"].replace("toytone.", f"{family}.")
    spec.update(family=family, **changes)
    return spec


# -- listing, inspection, options ---------------------------------------------------------------

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


def test_family_options_come_from_its_own_spec(toy_site: Path, toy_model_dir: Path, tmp_path: Path) -> None:
    help_text = run_cli("--family", "toytone", "--help", env=_env(toy_site)).stdout
    assert "toytone.gain" in help_text and "pitch" in help_text and "slowdown" in help_text
    out = tmp_path / "x.wav"
    proc = run_cli("--model", toy_model_dir, "--text", "hi", "--request-option", "toytone.gain=3",
                   "--out", out, env=_env(toy_site))
    assert proc.returncode == 2 and "above the maximum 1" in proc.stderr
    # The family's own request options carry its prefix; a bare name is not an option of it.
    proc = run_cli("--model", toy_model_dir, "--text", "hi", "--request-option", "gain=0.3", "--out", out,
                   env=_env(toy_site))
    assert (proc.returncode == 2 and "no request option 'gain'" in proc.stderr
            and "toytone.gain" in proc.stderr)
    # --language is the canonical request option 'language': this spec does not declare it.
    proc = run_cli("--model", toy_model_dir, "--text", "hi", "--language", "en", "--out", out,
                   env=_env(toy_site))
    assert proc.returncode == 2 and "no request option 'language'" in proc.stderr
    assert not out.exists()


# -- synthesis ------------------------------------------------------------------------------------

def test_loaded_and_run_from_the_cli(toy_site: Path, toy_model_dir: Path, tmp_path: Path) -> None:
    out, chunks = tmp_path / "toy.wav", tmp_path / "chunks"
    proc = run_cli("--model", toy_model_dir, "--text", "hello plugin world", "--mode", "streaming",
                   "--seed", "3", "--metrics", "--load-option", "slowdown=2", "--out", out,
                   "--out-dir", chunks, env=_env(toy_site))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("event=audio") == 3
    assert "rtf=" in proc.stdout and "seed=3" in proc.stdout and "num_chunks=3" in proc.stdout
    audio, rate = sf.read(out)
    assert rate == 16000
    assert len(audio) == len("helloPluginworld") * 2 * 160
    assert sorted(p.name for p in chunks.iterdir()) == ["chunk_0.wav", "chunk_1.wav", "chunk_2.wav"]


def test_options_of_every_scope_reach_the_session(toy_site: Path, toy_model_dir: Path,
                                                  tmp_path: Path) -> None:
    def render(*flags: str) -> tuple:
        out = tmp_path / f"{len(list(tmp_path.iterdir()))}.wav"
        proc = run_cli("--model", toy_model_dir, "--text", "abc", "--seed", "1", *flags, "--out", out,
                       env=_env(toy_site))
        assert proc.returncode == 0, proc.stderr
        return tuple(sf.read(out)[0])

    base = render()
    assert render() == base  # seeded: the same audio
    assert render("--seed", "2") != base
    assert render("--request-option", "toytone.gain=0.1") != base
    assert render("--session-option", "toytone.pitch=2") != base
    proc = run_cli("--model", toy_model_dir, "--text", "abc", "--session-option", "pitch=2", "--out",
                   tmp_path / "y.wav", env=_env(toy_site))
    assert proc.returncode == 2 and "toytone.pitch=2" in proc.stderr  # the CLI wants the family prefix


def test_demo_model_without_model(toy_site: Path, tmp_path: Path) -> None:
    out = tmp_path / "demo.wav"
    proc = run_cli("--family", "toytone", "--text", "hi there", "--out", out,
                   env=_env(toy_site, cache=tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "toytone demo model" in proc.stderr
    assert sf.info(str(out)).frames == len("hithere") * 320  # the demo's config: 0.02 s a character
    assert (tmp_path / "demo" / "toytone-0.1.0" / "model.safetensors").is_file()


def test_missing_file_hint_names_the_plugins_own_spec(toy_site: Path, toy_model_dir: Path,
                                                      tmp_path: Path) -> None:
    (toy_model_dir / "model.safetensors").unlink()
    proc = run_cli("--family", "toytone", "--model", toy_model_dir, "--text", "hi",
                   "--out", tmp_path / "x.wav", env=_env(toy_site))
    assert proc.returncode == 1 and "model.safetensors" in proc.stderr
    assert str(toy_site / "audiocpp_toyfamily" / "toytone.json") in proc.stderr
    assert "model_specs/toytone.json" not in proc.stderr


# -- packages --------------------------------------------------------------------------------------

def test_packaged_then_used_with_and_without_the_plugin(toy_site: Path, toy_model_dir: Path,
                                                        tmp_path: Path) -> None:
    package = tmp_path / "toy-f32.gguf"
    proc = run_cli("package", "--family", "toytone", "--input", toy_model_dir, "--type", "f32",
                   "--out", package, env=_env(toy_site))
    assert proc.returncode == 0, proc.stderr
    # Without the plugin installed the package still describes itself through its embedded spec.
    proc = run_cli("inspect", package, "--json")
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["family"] == "toytone"
    assert info["spec"]["display_name"] == "Toy tone synthesizer"
    assert info["namespaces"] == {"weights": 1} and info["dtypes"] == {"F32": 1}
    assert "config.json" in info["embedded_files"]
    assert info["metadata"]["audiocpp.source_format"] == "folder"
    assert info["metadata"]["audiocpp.family_distribution"] == "audiocpp-toyfamily"
    # ... and synthesis says what to install.
    out = tmp_path / "x.wav"
    proc = run_cli("--model", package, "--text", "hi", "--out", out)
    assert proc.returncode == 1, proc.stderr
    assert ("is a package of family 'toytone', which is not installed (pip install audiocpp-toyfamily)"
            in proc.stderr)
    # Another family named on the command line: it says whose package it is.
    proc = run_cli("--family", "omnivoice", "--model", package, "--text", "hi", "--out", out,
                   env=_env(toy_site))
    assert proc.returncode == 2
    assert ("is a package of family 'toytone', not 'omnivoice'" in proc.stderr
            and "--family toytone" in proc.stderr)
    # With the plugin, the package runs like the folder did: the same samples.
    from_folder, from_package = tmp_path / "folder.wav", tmp_path / "package.wav"
    for model, wav in ((toy_model_dir, from_folder), (package, from_package)):
        proc = run_cli("--model", model, "--text", "hi you", "--seed", "1", "--out", wav, "--format", "wav32",
                       env=_env(toy_site))
        assert proc.returncode == 0, proc.stderr
    a, b = sf.read(from_folder, dtype="float32")[0], sf.read(from_package, dtype="float32")[0]
    assert len(a) == len(b) and (a == b).all(), abs(a - b).max()
    assert not out.exists()


# -- failures: no partial output; broken plugins say so ------------------------------------------

FAILTONE = '''
from dataclasses import replace
from pathlib import Path

from audiocpp.engine.plugin_api import ModelError
from audiocpp_toyfamily import ToyTonePlugin
from audiocpp_toyfamily.session import ToneLoadedModel, ToneSession
from audiocpp_toyfamily.weights import load_parts


class FailSession(ToneSession):
    """Streams the words before 'boom', then fails as a real decoder might."""

    def _synthesize(self, request):
        words = request.text.split()
        before = " ".join(words[:words.index("boom")]) if "boom" in words else request.text
        options = {"toytone.gain": request.options["failtone.gain"]}  # the toy session's name for it
        synthesis = yield from super()._synthesize(replace(request, text=before, options=options))
        if "boom" in words:
            raise ModelError("the tone bank cannot say 'boom'")
        return synthesis


class FailModel(ToneLoadedModel):
    def _create_session(self, task, mode, options):
        return FailSession(self, task, mode, options)


class FailPlugin(ToyTonePlugin):
    name = "failtone"
    spec_file = Path(__file__).with_name("failtone.json")

    def _load(self, path, options):
        return FailModel(self.spec, path, options, load_parts(path, options, spec=self.spec))


plugin = FailPlugin()
'''


def test_a_run_that_fails_part_way_leaves_no_chunks(toy_site: Path, toy_model_dir: Path,
                                                    tmp_path: Path) -> None:
    site = _site(tmp_path, "failtone", FAILTONE, _toy_spec("failtone", detection={}))
    env = _env(toy_site, site)
    out, chunks = tmp_path / "x.wav", tmp_path / "new" / "chunks"
    args = ("--family", "failtone", "--model", toy_model_dir, "--mode", "streaming", "--out", out)
    proc = run_cli(*args, "--text", "one two boom three", "--out-dir", chunks, env=env)
    assert proc.returncode == 1 and "cannot say 'boom'" in proc.stderr
    assert proc.stderr.count("event=audio") == 2  # two chunks were written, then removed
    assert "removed the 2 files" in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists() and not (tmp_path / "new").exists()
    # A folder that was there stays, with the files that were in it.
    chunks.mkdir(parents=True)
    (chunks / "mine.txt").write_text("keep me")
    proc = run_cli(*args, "--text", "one boom", "--out-dir", chunks, env=env)
    assert proc.returncode == 1
    assert [p.name for p in chunks.iterdir()] == ["mine.txt"]
    # The same family without the failure: the chunks stay.
    proc = run_cli(*args, "--text", "one two", "--out-dir", chunks, env=env)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in chunks.iterdir()) == ["chunk_0.wav", "chunk_1.wav", "mine.txt"]


BROKEN = '''
from pathlib import Path

from audiocpp.engine.plugin_api import FamilyPlugin


class BrokenPlugin(FamilyPlugin):
    name = "brokentone"
    spec_file = Path(__file__).with_name("brokentone.json")


plugin = BrokenPlugin()
'''


def test_a_plugin_with_a_broken_spec_is_named_by_synthesis(toy_site: Path, toy_model_dir: Path,
                                                          tmp_path: Path) -> None:
    spec = _toy_spec("brokentone")
    spec["options"]["request"][1]["name"] = "gain"  # not canonical, and not brokentone.gain
    site = _site(tmp_path, "brokentone", BROKEN, spec)
    listing = json.loads(run_cli("families", "--json", env=_env(site)).stdout)
    assert [b["name"] for b in listing["broken"]] == ["brokentone"]
    out = tmp_path / "x.wav"
    proc = run_cli("--model", toy_model_dir, "--text", "hi", "--out", out, env=_env(site))
    assert proc.returncode == 1
    assert "cannot tell which family" in proc.stderr
    assert "installed but failed to load: brokentone" in proc.stderr
    assert "'gain' is not a canonical request option name" in proc.stderr
    proc = run_cli("--family", "brokentone", "--model", toy_model_dir, "--text", "hi", "--out", out,
                   env=_env(site))
    assert proc.returncode == 2 and "brokentone' is installed but its plugin failed to load" in proc.stderr
    # A package of that family names it too.
    package = tmp_path / "toy.gguf"
    assert run_cli("package", "--family", "toytone", "--input", toy_model_dir, "--out", package,
                   env=_env(toy_site)).returncode == 0
    proc = run_cli("--model", package, "--text", "hi", "--out", out, env=_env(site))
    assert proc.returncode == 1 and "not installed (pip install audiocpp-toyfamily)" in proc.stderr
    assert not out.exists()


# -- the Python API -------------------------------------------------------------------------------

PYTHON_API = '''
import json, sys
import audiocpp.engine as ac

model = ac.load(sys.argv[1])
session = model.session("tts", pitch=2.0)
result = session.run(ac.TaskRequest(text="hello there", seed=7, options={"toytone.gain": 0.25}))
streamed = list(model.session("tts", mode="streaming").stream(ac.TaskRequest(text="a b c", seed=1)))
try:
    model.session("tts", toytone_pitch=2.0)
except ac.UsageError as error:
    hint = error.hint
print(json.dumps({"family": model.family, "rate": result.audio.sample_rate, "seed": result.metrics.seed,
                  "samples": result.audio.num_samples, "chunks": len(result.chunks),
                  "events": [e.kind for e in streamed], "num_chunks": streamed[-1].result.metrics.num_chunks,
                  "hint": hint}))
'''


def test_python_api(toy_site: Path, toy_model_dir: Path) -> None:
    env = {**os.environ, **_env(toy_site)}
    proc = subprocess.run([sys.executable, "-c", PYTHON_API, str(toy_model_dir)], capture_output=True,
                          text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.splitlines()[-1])
    assert got["family"] == "toytone" and got["rate"] == 16000 and got["seed"] == 7
    assert got["samples"] == len("hellothere") * 160 and got["chunks"] == 2
    assert got["events"] == ["audio", "audio", "audio", "final"] and got["num_chunks"] == 3
    assert "keyword arguments of session()" in got["hint"] and "pitch" in got["hint"]
    assert "toytone.pitch" not in got["hint"]
