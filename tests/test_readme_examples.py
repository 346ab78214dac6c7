"""README.md's examples, run as written: every fenced ```bash / ```sh / ```console and ```python block.

The blocks run in README order in one scratch folder, so a later block uses the files an earlier one wrote
(``me.wav``, ``OmniVoice/``, packages): shell blocks through bash (``set -e -o pipefail``; ``audiocpp``,
``python`` and ``hf`` are the venv's, as after ``. .venv/bin/activate``; ``bin/``, ``tools/`` and ``.venv/``
at the start of a word are the checkout's), Python blocks through the venv's python. A block that fails
fails its test with the README line of the command that failed and the output. Run the whole file: a
block alone (``-k``) misses the files of the blocks before it.

What the test puts in place of the world outside:

- **The Hugging Face Hub**: a local stand-in (``tests/hub/fakehub.py``; ``HF_ENDPOINT`` and a fresh
  ``HF_HOME``) serving random-weight checkpoints in the layouts of the real repos, under their real
  names, written here by the families' own checkpoint writers (``tools/<family>/checkpoint.py``,
  ``families/omnivoice/demo.py``, the converters of omnivoice.cpp's and VoxCPM.cpp's layouts). So
  ``hf download k2-fsa/OmniVoice``, ``audiocpp download ...`` and ``--model org/name`` run for real,
  against files of the same names and layout, and nothing leaves the machine. Random weights never
  stop on their own: the VoxCPM stand-ins get a stop head that fires after a few patches (as
  ``tools/voxcpm1/checkpoint.py``'s ``stop_tie``) and real-size VAE strides (so a second of audio is as
  many positions as on the real model).
- **``aplay``**, where the machine has none (no sound card): a stand-in that reads the stream and checks
  that it is WAV.
- **``audiocpp serve``**: started in the background on a free port (its ``--port`` and ``--wyoming-port``
  become free ports, and so do ``127.0.0.1:PORT`` / ``localhost:PORT`` in every later block; a
  ``--host 0.0.0.0`` / ``--wyoming-host 0.0.0.0`` becomes 127.0.0.1, so nothing listens beyond this
  machine), stopped when the next one starts and at the end.

What the test cannot run is marked in the README by a comment just above the block:
``<!-- readme-test: skip (reason) -->`` for the whole block, ``<!-- readme-test: skip-command PREFIX
(reason) -->`` for its commands that start with PREFIX; each is reported as skipped with its reason.
A ``print(...)`` in a Python block whose comment shows a repr (``# TaskResult(...)``) must print it: the
text before the comment's first ``...`` is looked for in the output.
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support import REPO, unfold_hubert_pos_conv

README = REPO / "README.md"
VENV_BIN = Path(sys.executable).parent
SHELL_LANGS = {"bash", "sh", "shell", "console"}
PYTHON_LANGS = {"python", "py", "python3"}
BLOCK_TIMEOUT_S = 900
_DROPPED_ENV = ("HF_", "HUGGING_FACE_", "TRANSFORMERS_OFFLINE", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
                "http_proxy", "https_proxy", "all_proxy", "AUDIOCPP_DEBUG")

FENCE = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\s]*)[^`]*$")
MARKER = re.compile(r"^\s*<!--\s*readme-test:\s*(?P<body>.*?)\s*-->\s*$")
MARKER_BODY = re.compile(r"^(?P<kind>skip-command|skip)\s*(?P<prefix>[^(]*?)\s*"
                         r"\((?P<reason>[^()]*(?:\([^()]*\)[^()]*)*)\)$")  # (one level of) () in a reason
REPO_WORD = re.compile(r"(?<![\w./$~-])(?P<dir>bin|tools|\.venv)/")
PROMISE = re.compile(r"^\s*print\(.*\)\s*#\s*(?P<repr>[A-Z]\w*\(.*)$")


# -- the README's blocks -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Command:
    line: int  # README line of its first line
    text: str  # its lines as written (continuations and the comment lines under it included)

    @property
    def flat(self) -> str:
        """The command on one line, single-spaced (for PREFIX matching)."""
        return " ".join(self.text.replace("\\\n", " ").split())


@dataclass
class Block:
    lang: str
    line: int  # README line of the opening fence
    code: str
    first: int  # README line of the code's first line
    skip: str | None = None  # reason
    skip_commands: list[tuple[str, str]] = field(default_factory=list)  # (prefix, reason)

    @property
    def id(self) -> str:
        return f"README.md:{self.line}-{self.lang}"

    @property
    def kind(self) -> str:
        return "shell" if self.lang in SHELL_LANGS else "python"

    def commands(self) -> list[Command]:
        """The block's commands: a line at column 0 starts one unless the line before ends with a
        backslash; indented lines (continuations, comment lines) belong to the command above."""
        out: list[Command] = []
        lines = self.code.split("\n")
        if self.lang == "console":
            lines = [ln[2:] if ln.startswith("$ ") else "" for ln in lines]
        continued = False
        for i, ln in enumerate(lines):
            starts = ln[:1] not in ("", " ", "\t", "#") and not continued
            if starts:
                out.append(Command(self.first + i, ln))
            elif out and ln.strip() and not (ln[:1] == "#" and not continued):
                out[-1] = Command(out[-1].line, out[-1].text + "\n" + ln)
            continued = ln.rstrip().endswith("\\")
        return out

    def skipped(self, command: Command) -> str | None:
        for prefix, reason in self.skip_commands:
            if command.flat.startswith(prefix):
                return reason
        return None


class MarkerError(ValueError):
    pass


def parse_blocks(text: str) -> list[Block]:
    """The shell and Python blocks of a Markdown text, each with the readme-test markers above it."""
    lines = text.split("\n")
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            if MARKER.match(lines[i]) and not _marks_a_block(lines, i):
                raise MarkerError(f"README.md line {i + 1}: a readme-test marker must stand just above a "
                                  "fenced block (blank lines and other markers between them only)")
            i += 1
            continue
        fence, lang = match["fence"], match["info"].lower()
        end = next((j for j in range(i + 1, len(lines))
                    if lines[j].strip().startswith(fence[0] * len(fence))
                    and not lines[j].strip().strip(fence[0])), len(lines))
        if lang in SHELL_LANGS | PYTHON_LANGS:
            block = Block(lang, i + 1, "\n".join(lines[i + 1:end]), i + 2)
            _apply_markers(block, lines, i)
            blocks.append(block)
        elif _markers_above(lines, i):
            raise MarkerError(f"README.md line {i + 1}: a readme-test marker above a block the test does "
                              f"not run ({lang or 'no language'})")
        i = end + 1
    return blocks


def _markers_above(lines: list[str], fence_index: int) -> list[tuple[int, str]]:
    found = []
    j = fence_index - 1
    while j >= 0 and (not lines[j].strip() or MARKER.match(lines[j])):
        if lines[j].strip():
            found.append((j + 1, MARKER.match(lines[j])["body"]))
        j -= 1
    return found[::-1]


def _marks_a_block(lines: list[str], marker_index: int) -> bool:
    j = marker_index + 1
    while j < len(lines) and (not lines[j].strip() or MARKER.match(lines[j])):
        j += 1
    return j < len(lines) and bool(FENCE.match(lines[j]))


def _apply_markers(block: Block, lines: list[str], fence_index: int) -> None:
    for line, body in _markers_above(lines, fence_index):
        match = MARKER_BODY.match(body)
        if not match or not match["reason"].strip():
            raise MarkerError(f"README.md line {line}: cannot read the marker {body!r}: write "
                              "'skip (REASON)' or 'skip-command PREFIX (REASON)'")
        if match["kind"] == "skip":
            if match["prefix"]:
                raise MarkerError(f"README.md line {line}: 'skip' takes a reason only: {body!r}")
            block.skip = match["reason"].strip()
        else:
            prefix = " ".join(match["prefix"].strip("\"'` ").split())
            if not prefix:
                raise MarkerError(f"README.md line {line}: 'skip-command' needs the commands' PREFIX")
            block.skip_commands.append((prefix, match["reason"].strip()))


def readme_blocks() -> list[Block]:
    return parse_blocks(README.read_text(encoding="utf-8"))


# -- running a block ---------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


SERVE = re.compile(r"^(?:bin/)?audiocpp serve\b")
PORT_FLAG = re.compile(r"(?P<flag>--(?:wyoming-)?port)(?P<sep>[ =])(?P<port>\d+)")
ALL_HOSTS = re.compile(r"(?P<flag>--(?:wyoming-)?host[ =])0\.0\.0\.0\b")
HOST_PORT = re.compile(r"(?P<host>127\.0\.0\.1|localhost):(?P<port>\d+)\b")

#: Variables a shell sets for itself: not exports a README block made.
SHELL_OWN = {"PWD", "OLDPWD", "SHLVL", "_"}

SHELL_PRELUDE = r"""
set -e -o pipefail
__line=0
__readme_line() {  # the README line the next command starts at; the time each took, in .readme-times.log
  local now=${EPOCHREALTIME//[.,]/} us
  if [ "$__line" != 0 ]; then
    us=$((now - __since))
    printf '%s %d.%03d\n' "$__line" $((us / 1000000)) $((us / 1000 % 1000)) >> .readme-times.log
  fi
  __line=$1; __since=$now
}
trap '__readme_line 0; env -0 > "$READMETEST_ENV_OUT"' EXIT
trap 'echo "readme-test: README.md line $__line failed (exit $?)" >&2' ERR
__readme_stop_server() {
  if [ -s "$READMETEST_SERVER_PID" ]; then
    local pid; pid=$(cat "$READMETEST_SERVER_PID"); : > "$READMETEST_SERVER_PID"
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
}
__readme_wait_server() {  # PORT LOG: until /health answers 200, or the server exits
  local pid; pid=$(cat "$READMETEST_SERVER_PID")
  for _ in $(seq 1200); do
    curl -sf -o /dev/null "http://127.0.0.1:$1/health" && return 0
    if ! kill -0 "$pid" 2>/dev/null; then echo "audiocpp serve exited:" >&2; cat "$2" >&2; return 1; fi
    sleep 0.25
  done
  echo "audiocpp serve did not answer on port $1 in 300 s:" >&2; cat "$2" >&2; return 1
}
"""


@dataclass
class World:
    """The scratch folder, the environment every block runs in, and the servers' ports."""

    work: Path
    env: dict[str, str]
    ports: dict[int, int] = field(default_factory=dict)  # README port -> the port used here
    server_pid_file: Path = Path()

    def port_for(self, port: int) -> int:
        if port not in self.ports:
            self.ports[port] = free_port()
        return self.ports[port]

    def localized(self, text: str) -> str:
        """``host:PORT`` of a server started earlier, as the port it listens on here."""
        return HOST_PORT.sub(lambda m: f"{m['host']}:{self.ports.get(int(m['port']), int(m['port']))}", text)

    def serve_command(self, command: Command, log: Path) -> str:
        """``audiocpp serve`` in the background on free ports, then wait until it answers."""
        text = command.text
        given = re.search(r"--port[ =](\d+)", text)
        if given is None:
            text = SERVE.sub(lambda m: f"{m.group(0)} --port 8000", text, count=1)
        text = PORT_FLAG.sub(lambda m: f"{m['flag']}{m['sep']}{self.port_for(int(m['port']))}", text)
        port = self.port_for(int(given[1]) if given else 8000)
        text = ALL_HOSTS.sub(r"\g<flag>127.0.0.1", text)  # this machine only: no port open to the network
        return (f"__readme_line {command.line}\n"
                "__readme_stop_server\n"
                f"{{\nexec {self.localized(text)}\n}} > {log} 2>&1 < /dev/null &\n"
                'echo $! > "$READMETEST_SERVER_PID"\n'
                f"__readme_wait_server {port} {log}\n")

    def shell_script(self, block: Block) -> tuple[str, list[tuple[Command, str]]]:
        parts, skipped = [SHELL_PRELUDE], []
        for command in block.commands():
            reason = block.skipped(command)
            if reason is not None:
                skipped.append((command, reason))
                continue
            if SERVE.match(command.flat):
                text = self.serve_command(command, self.work / f".serve-{command.line}.log")
            else:
                text = f"__readme_line {command.line}\n{self.localized(command.text)}\n"
            parts.append(REPO_WORD.sub(lambda m: f"{REPO}/{m['dir']}/", text))
        return "".join(parts), skipped

    def run(self, block: Block) -> subprocess.CompletedProcess[str]:
        if block.kind == "shell":
            script, _ = self.shell_script(block)
            path = self.work / f".readme-{block.line}.sh"
            path.write_text(script, encoding="utf-8")
            argv = ["bash", str(path)]
        else:
            path = self.work / f"readme_L{block.line}.py"  # its line numbers are the README's
            path.write_text("\n" * (block.first - 1) + self.localized(block.code) + "\n", encoding="utf-8")
            argv = [sys.executable, str(path)]
        env = {**self.env, "READMETEST_ENV_OUT": str(self.work / ".readme-env")}
        proc = subprocess.Popen(argv, cwd=self.work, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=BLOCK_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the block's own process group: bash and what it started
            out, _ = proc.communicate()
            out += f"\nreadme-test: the block ran past {BLOCK_TIMEOUT_S} s and was stopped"
        if block.kind == "shell":
            self.keep_exports(self.work / ".readme-env")
        return subprocess.CompletedProcess(argv, proc.returncode, out)

    def keep_exports(self, dump: Path) -> None:
        """What a shell block exported (``export KEY=...``) is in the environment of the blocks after it."""
        if not dump.is_file():
            return
        for entry in dump.read_bytes().split(b"\0"):
            name, sep, value = entry.decode(errors="replace").partition("=")
            if sep and name not in SHELL_OWN and not name.startswith(("READMETEST_", "BASH_FUNC_")) \
                    and self.env.get(name) != value:
                self.env[name] = value
        dump.unlink()

    def stop_servers(self) -> None:
        if not self.server_pid_file.is_file():
            return
        text = self.server_pid_file.read_text().strip()
        if not text:
            return
        pid = int(text)
        try:
            os.kill(pid, signal.SIGTERM)
            for _ in range(100):
                os.kill(pid, 0)
                time.sleep(0.1)
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.server_pid_file.write_text("")


def failed_line(block: Block, output: str) -> int:
    """The README line a failed block stopped at (the block's first line when unknown)."""
    if block.kind == "shell":
        found = re.findall(r"readme-test: README\.md line (\d+) failed", output)
    else:
        found = re.findall(rf'readme_L{block.line}\.py", line (\d+)', output)
    return int(found[-1]) if found and int(found[-1]) > 0 else block.first


def check_block(world: World, block: Block) -> str:
    """Run ``block``; raise AssertionError naming its README line and output if it fails."""
    proc = world.run(block)
    out = proc.stdout
    if proc.returncode != 0:
        line = failed_line(block, out)
        raise AssertionError(f"README.md line {line} ({block.lang} block at line {block.line}) failed with "
                             f"exit code {proc.returncode}:\n{_source_line(line)}\n--- output ---\n"
                             f"{out[-6000:]}")
    if block.kind == "python":
        for line, promised in promises(block):
            assert promised in out, (f"README.md line {line} promises {promised!r}... but the block "
                                     f"printed:\n{out[-4000:]}")
    return out


def promises(block: Block) -> list[tuple[int, str]]:
    """(line, text) of each ``print(...)  # Repr(...)`` comment: the repr up to its first ``...``."""
    found = []
    for i, ln in enumerate(block.code.split("\n")):
        match = PROMISE.match(ln)
        if match:
            text = match["repr"].split("...", 1)[0].rstrip()
            found.append((block.first + i, text))
    return found


def _source_line(line: int) -> str:
    lines = README.read_text(encoding="utf-8").split("\n")
    return lines[line - 1] if 0 < line <= len(lines) else ""


# -- the stand-ins: checkpoints on a local hub, aplay --------------------------------------------------
APLAY = """#!/usr/bin/env bash
# readme-test's aplay: no sound card here. Reads the whole stream and checks that it is WAV audio.
head=$(head -c 4 | od -An -c | tr -d ' \\n'); cat > /dev/null
[ "$head" = "RIFF" ] || { echo "aplay (readme-test stand-in): not a WAV stream: '$head'" >&2; exit 1; }
"""


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def _stop_tie(folder: Path, seed: int, tie: float = 0.01) -> None:
    """A stop head whose two logits nearly tie, so generation stops after a few patches (random weights
    alone never stop); as tools/voxcpm1/checkpoint.py's ``stop_tie``."""
    import torch
    from safetensors.torch import load_file, save_file

    path = folder / "model.safetensors"
    state = dict(load_file(str(path)))
    head = state["stop_head.weight"].clone()
    head[1] = head[0] + tie * torch.randn(head.shape[1], generator=torch.Generator().manual_seed(seed))
    state["stop_head.weight"] = head
    save_file(state, str(path))


def hub_repos(root: Path) -> dict[str, dict[str, bytes]]:
    """Repo id -> files: random-weight checkpoints in the layouts of the repos the README names."""
    from audiocpp.families.omnivoice.demo import write_demo
    from tools.kokoro import checkpoint as kokoro
    from tools.omnivoice import convert_omnivoice_cpp as omnivoice_cpp
    from tools.voxcpm1 import checkpoint as voxcpm1
    from tools.voxcpm1 import convert_voxcpm_cpp as voxcpm_cpp
    from tools.voxcpm2 import checkpoint as voxcpm2

    omnivoice = root / "OmniVoice"
    write_demo(omnivoice)
    (omnivoice / "demo.json").unlink()  # the demo's marker: the real repo has none
    unfold_hubert_pos_conv(omnivoice / "audio_tokenizer" / "model.safetensors")
    omnivoice_gguf = root / "OmniVoice-GGUF"
    omnivoice_gguf.mkdir()
    omnivoice_cpp.write_lm(omnivoice, omnivoice_gguf, "q8_0")
    omnivoice_cpp.write_codec(omnivoice, omnivoice_gguf)

    v2 = copy.deepcopy(voxcpm2.TINY_V2)  # tiny widths, VoxCPM2's strides: 16 kHz / 640 in, 48 kHz / 1920 out
    v2["audio_vae_config"].update(encoder_rates=[2, 5, 8, 8], decoder_rates=[8, 6, 5, 2, 2, 2],
                                  decoder_dim=64)
    v2["max_length"] = v2["lm_config"]["max_position_embeddings"] = 4096
    vox2 = voxcpm2.write_checkpoint(root / "VoxCPM2", v2, seed=1234)
    _stop_tie(vox2, 1235)

    v1 = copy.deepcopy(voxcpm1.TINY_05B)  # VoxCPM-0.5B's strides: 16 kHz / 640
    v1["audio_vae_config"].update(encoder_rates=[2, 5, 8, 8], decoder_rates=[8, 8, 5, 2])
    v1["max_length"] = v1["lm_config"]["max_position_embeddings"] = 4096
    vox05 = voxcpm1.write_v1_checkpoint(root / "VoxCPM-0.5B", v1, seed=99, weights="bin", stop_tie=0.01)
    vox05_gguf = voxcpm_cpp.convert(vox05, root / "voxcpm-0.5b-q8_0-audiovae-f16.gguf", weight_type="q8_0",
                                    vae_type="f16")

    hexgrad = kokoro.write_checkpoint(root / "Kokoro-82M", "tiny", seed=1234, voices=("af_heart", "am_adam"))
    readme = {"README.md": b"# a random-weight stand-in of this repo (tests/test_readme_examples.py)\n",
              ".gitattributes": b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n"}
    return {
        "k2-fsa/OmniVoice": {**_files(omnivoice), **readme},
        "Serveurperso/OmniVoice-GGUF": {**_files(omnivoice_gguf), **readme},
        "openbmb/VoxCPM2": {**_files(vox2), **readme},
        "openbmb/VoxCPM-0.5B": {**_files(vox05), **readme},
        "audio-cpp/audio.cpp-gguf": {f"VoxCPM1-GGUF/{vox05_gguf.name}": vox05_gguf.read_bytes(), **readme},
        "hexgrad/Kokoro-82M": {**_files(hexgrad), **readme},
        "Audio8/Audio8-TTS-Preview-0.6b": {**_files(REPO / "tests" / "data" / "audio8_tts" / "tiny"),
                                           **readme},
    }


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    from tests.hub.fakehub import FakeHub

    root = tmp_path_factory.mktemp("readme")
    hub = FakeHub()
    for repo_id, files in hub_repos(root / "checkpoints").items():
        hub.add_repo(repo_id, files)
    work = root / "work"
    work.mkdir()
    standins = root / "standins"
    standins.mkdir()
    if shutil.which("aplay") is None:
        (standins / "aplay").write_text(APLAY, encoding="utf-8")
        (standins / "aplay").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(_DROPPED_ENV)}
    env.update(HF_ENDPOINT=hub.url, HF_HOME=str(root / "hf-home"), HF_HUB_DISABLE_TELEMETRY="1",
               NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost",
               PATH=os.pathsep.join([str(standins), str(VENV_BIN), env.get("PATH", "")]),
               VIRTUAL_ENV=str(VENV_BIN.parent), READMETEST_SERVER_PID=str(root / "server.pid"))
    env.pop("PYTHONHOME", None)
    state = World(work, env, server_pid_file=root / "server.pid")
    try:
        yield state
    finally:
        state.stop_servers()
        hub.close()


# -- the tests ---------------------------------------------------------------------------------------
BLOCKS = readme_blocks()


SKIPPED_COMMANDS = [(c, reason) for b in BLOCKS if b.skip is None for c in b.commands()
                    for reason in [b.skipped(c)] if reason is not None]


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_readme_block_runs(block: Block, world: World) -> None:
    if block.skip is not None:
        pytest.skip(f"{block.id}: {block.skip}")
    cache = os.environ.get("AUDIOCPP_CACHE_DIR")  # tests/conftest.py's, set per test
    if cache:
        world.env["AUDIOCPP_CACHE_DIR"] = cache
    check_block(world, block)


@pytest.mark.parametrize(("command", "reason"), SKIPPED_COMMANDS,
                         ids=[f"README.md:{c.line}-command" for c, _ in SKIPPED_COMMANDS])
def test_readme_command_not_run(command: Command, reason: str) -> None:
    """The commands a block's skip-command marker keeps from running (the rest of the block runs)."""
    pytest.skip(f"README.md line {command.line}: {reason}: {command.flat[:100]}")


def test_the_readme_has_runnable_blocks_and_sound_markers() -> None:
    blocks = readme_blocks()
    assert sum(b.kind == "shell" for b in blocks) >= 5 and sum(b.kind == "python" for b in blocks) >= 1
    for block in blocks:
        commands = block.commands()
        for prefix, reason in block.skip_commands:  # a marker that matches nothing is stale
            assert any(c.flat.startswith(prefix) for c in commands), (block.id, prefix, reason)


# -- the harness itself can fail -----------------------------------------------------------------------
SAMPLE = """# Sample

<!-- readme-test: skip (needs a GPU) -->
```bash
audiocpp --device cuda --text "Hi." --out gpu.wav
```

<!-- readme-test: skip-command "echo never" (a command the test must not run) -->
```bash
echo one > one.txt     # a comment
cat one.txt \\
    missing.txt        # fails: line 12
echo never
```

```python
print(repr(1.5))  # Fraction(3, 2)
```
"""


def test_a_failing_block_fails_with_its_readme_line(tmp_path: Path) -> None:
    blocks = parse_blocks(SAMPLE)
    assert [(b.lang, b.line, b.skip) for b in blocks] == [("bash", 4, "needs a GPU"), ("bash", 9, None),
                                                        ("python", 16, None)]
    shell = blocks[1]
    assert shell.skip_commands == [("echo never", "a command the test must not run")]
    assert [(c.line, c.flat) for c in shell.commands()] == [
        (10, "echo one > one.txt # a comment"), (11, "cat one.txt missing.txt # fails: line 12"),
        (13, "echo never")]
    assert shell.skipped(shell.commands()[2]) == "a command the test must not run"
    world = World(tmp_path, {**os.environ, "READMETEST_SERVER_PID": str(tmp_path / "pid")})
    with pytest.raises(AssertionError) as info:
        check_block(world, shell)
    assert "README.md line 11 (bash block at line 9) failed" in str(info.value)
    assert "missing.txt" in str(info.value) and (tmp_path / "one.txt").read_text() == "one\n"
    with pytest.raises(AssertionError) as info:  # the promised repr is not what it prints
        check_block(world, blocks[2])
    assert "README.md line 17 promises 'Fraction(3, 2)'" in str(info.value)
    blocks[2].code = "raise SystemExit(3)"
    with pytest.raises(AssertionError, match=r"README.md line 17 \(python block at line 16\) failed"):
        check_block(world, blocks[2])
    serve = Command(5, 'audiocpp serve --model vox=v.gguf --host 0.0.0.0 --api-key "$KEY" \\\n'
                       "     --wyoming-port 10200 --wyoming-host 0.0.0.0   # for Home Assistant")
    script = world.serve_command(serve, tmp_path / "serve.log")
    port, wyoming = world.ports[8000], world.ports[10200]
    assert (f"exec audiocpp serve --port {port} --model vox=v.gguf --host 127.0.0.1" in script
            and f"--wyoming-port {wyoming} --wyoming-host 127.0.0.1" in script and "0.0.0.0" not in script)
    assert world.localized("curl http://127.0.0.1:8000/v1 localhost:8000 :9000") == (
        f"curl http://127.0.0.1:{port}/v1 localhost:{port} :9000")
    with pytest.raises(MarkerError):
        parse_blocks("<!-- readme-test: skip -->\n```bash\ntrue\n```\n")  # no reason
    with pytest.raises(MarkerError):
        parse_blocks("<!-- readme-test: skip (why) -->\n\ntext\n```bash\ntrue\n```\n")  # not above a block
