"""tools/setup_env.sh's two modes, run for real with a stand-in python that records what it is asked:
runtime (bin/audiocpp) installs audiocpp with its kokoro extra only, no test extra, and compiles the
kernels in a detached background process that holds the build lock engine.nn.kernels.jit reads (its log in the
cache folder), never in the foreground; test (bin/test) adds the test extras and builds the kernels in
the foreground, waiting for other builds; a test set-up serves runtime, not the other way round; and
every test-only package of pyproject.toml stays out of the runtime set-up's install."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from audiocpp.engine.nn.kernels import jit
from tests.support import REPO, setup_checkout

pytestmark = pytest.mark.skipif(shutil.which("flock") is None or shutil.which("setsid") is None,
                                reason="util-linux's flock and setsid")

# Stands in for python3 and the venv's python (and audiocpp): makes a venv, records every call, with
# AUDIOCPP_KERNEL_WAIT and, for the background build, whether the build lock is held while it runs.
FAKE_PYTHON = """#!/usr/bin/env bash
log="$SETUP_RECORD"
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
  mkdir -p "$3/bin"; cp "$0" "$3/bin/python"; cp "$0" "$3/bin/audiocpp"; exit 0
fi
case "$*" in
  *"background build"*)
    lock="$AUDIOCPP_CACHE_DIR/kernels/build.lock"
    if flock -n "$lock" true; then held=free; else held=held; fi
    echo "background wait=${AUDIOCPP_KERNEL_WAIT:-} lock=$held pid=$$" >> "$log"; exit 0 ;;
esac
echo "$(basename "$0") wait=${AUDIOCPP_KERNEL_WAIT:-} $*" >> "$log"
exit 0
"""


@pytest.fixture
def checkout(tmp_path: Path) -> dict[str, object]:
    root, fake = setup_checkout(tmp_path, FAKE_PYTHON)
    record = tmp_path / "record.txt"
    env = {**os.environ, "PYTHON": str(fake), "SETUP_RECORD": str(record),
           "AUDIOCPP_CACHE_DIR": str(tmp_path / "cache")}
    env.pop(jit.WAIT_ENV, None)
    return {"root": root, "env": env, "record": record, "cache": tmp_path / "cache"}


def _setup(checkout: dict[str, object], *args: str, background: bool = False) -> list[str]:
    """Run the set-up; ``background``: wait until the detached build has recorded itself."""
    record: Path = checkout["record"]  # type: ignore[assignment]
    record.write_text("")
    proc = subprocess.run(["bash", str(Path(checkout["root"]) / "tools" / "setup_env.sh"), *args],
                          capture_output=True, text=True, env=checkout["env"], timeout=120)
    assert proc.returncode == 0, proc.stderr
    deadline = time.monotonic() + 30
    while background and "background " not in record.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    return record.read_text().splitlines()


def _pip_installs(lines: list[str]) -> list[str]:
    return [line for line in lines if " -m pip install " in line]


def test_runtime_installs_the_kokoro_extra_only_and_builds_the_kernels_in_the_background(checkout) -> None:
    lines = _setup(checkout, "--quiet", background=True)  # bin/audiocpp's call, the default mode
    installs = _pip_installs(lines)
    assert any("-e .[kokoro]" in line and "torch==" in line for line in installs), installs
    assert not any("test" in line.split("-e ", 1)[-1] for line in installs if "-e " in line), installs
    assert not any(line.startswith("audiocpp") and " kernels" in line for line in lines), lines  # not here
    background = [line for line in lines if line.startswith("background ")]
    assert len(background) == 1 and "wait=1" in background[0] and "lock=held" in background[0], lines
    cache: Path = checkout["cache"]  # type: ignore[assignment]
    assert (cache / "kernels" / "build.log").exists() and (cache / "kernels" / "build.pid").exists()
    again = _setup(checkout, "runtime")
    assert again == [], again  # the stamp is current
    assert (Path(checkout["root"]) / ".venv" / ".audiocpp-setup-stamp").read_text().split()[-1] == "kokoro"


def test_test_mode_adds_the_test_extras_and_builds_the_kernels_in_the_foreground(checkout) -> None:
    _setup(checkout, "runtime", background=True)
    lines = _setup(checkout, "test")  # after a runtime set-up: installs again, with the test extras
    installs = _pip_installs(lines)
    assert any("-e .[test,kokoro]" in line for line in installs), installs
    kernels = [line for line in lines if line.startswith("audiocpp") and line.endswith(" kernels")]
    assert kernels == ["audiocpp wait=1 kernels"], lines
    assert not any(line.startswith("background ") for line in lines), lines
    assert _setup(checkout, "test") == [] and _setup(checkout, "runtime") == []  # test serves runtime too


def test_a_log_file_keeps_what_came_before_the_kernel_build(checkout, tmp_path: Path) -> None:
    """`bin/test > log 2>&1`: the foreground kernel build wrote to `>/dev/stderr`, which opened the log
    again with O_TRUNC and wiped what the set-up (and .ci/run's first-run figure) had written."""
    log = tmp_path / "setup.log"
    with log.open("w") as handle:
        handle.write("[ci] first run: 80 s\n")
        handle.flush()
        proc = subprocess.run(["bash", str(Path(checkout["root"]) / "tools" / "setup_env.sh"), "test"],
                              stdout=handle, stderr=handle, env=checkout["env"], timeout=120)
    assert proc.returncode == 0
    text = log.read_text()
    assert text.startswith("[ci] first run: 80 s\n") and "\0" not in text, text[:300]
    assert "[setup] building the C++ kernels" in text


def test_a_command_s_extra_is_added_once_to_the_runtime_set_up(checkout) -> None:
    _setup(checkout, "runtime", background=True)
    lines = _setup(checkout, "--quiet", "runtime", "serve", background=True)  # bin/audiocpp serve
    assert any("-e .[kokoro,serve]" in line for line in _pip_installs(lines)), lines
    assert _setup(checkout, "runtime") == [] and _setup(checkout, "runtime", "serve") == []
    lines = _setup(checkout, "runtime", "book", background=True)
    assert any("-e .[kokoro,book]" in line for line in _pip_installs(lines)), lines
    assert _setup(checkout, "runtime", "serve") == [] and _setup(checkout, "runtime", "book") == []
    stamp = Path(checkout["root"]) / ".venv" / ".audiocpp-setup-stamp"
    assert stamp.read_text().split()[-1] == "book,kokoro,serve"
    _setup(checkout, "test")
    assert _setup(checkout, "runtime", "ray") == []  # the test extra holds Ray


def test_bin_audiocpp_names_the_extra_its_command_needs(tmp_path: Path) -> None:
    root = tmp_path / "checkout"
    (root / "bin").mkdir(parents=True)
    (root / "tools").mkdir()
    (root / ".venv" / "bin").mkdir(parents=True)
    shutil.copy(REPO / "bin" / "audiocpp", root / "bin" / "audiocpp")
    record = tmp_path / "record.txt"
    for path, text in ((root / "tools" / "setup_env.sh", f'echo "setup $*" >> {record}\n'),
                       (root / ".venv" / "bin" / "audiocpp", f'echo "cli $*" >> {record}\n')):
        path.write_text("#!/usr/bin/env bash\n" + text)
        path.chmod(0o755)
    cases = {("--text", "Hi.", "--out", "x.wav"): "setup --quiet runtime",
             ("serve", "--port", "8000"): "setup --quiet runtime serve",
             ("book", "a.md"): "setup --quiet runtime book",
             ("batch", "l.jsonl", "--ray"): "setup --quiet runtime ray",
             ("serve", "--ray-address=h:6379"): "setup --quiet runtime serve ray"}
    for args, want in cases.items():
        record.write_text("")
        proc = subprocess.run(["bash", str(root / "bin" / "audiocpp"), *args], capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert record.read_text().splitlines() == [want, "cli " + " ".join(args)]


def test_an_unknown_mode_is_a_usage_error(checkout) -> None:
    for args in (["tests"], ["test", "serve"]):
        proc = subprocess.run(["bash", str(Path(checkout["root"]) / "tools" / "setup_env.sh"), *args],
                              capture_output=True, text=True, env=checkout["env"], timeout=60)
        assert proc.returncode == 2 and "usage: tools/setup_env.sh" in proc.stderr


def test_the_runtime_extra_holds_no_test_only_package() -> None:
    """What the runtime set-up installs (the dependencies and the extras its mode names) includes none of
    the packages pyproject.toml's test extra adds for the suite alone (pytest, ray, playwright, ...)."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]

    def name(requirement: str) -> str:
        return re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0].lower()

    script = (REPO / "tools" / "setup_env.sh").read_text()
    modes = {"runtime": re.search(r'mode=runtime; extras="([a-z,]+)"', script)[1],
             "test": re.search(r'; extras="(test,[a-z,]+)" ;;', script)[1]}
    assert set(modes["test"].split(",")) == {"test", "kokoro"}
    runtime = {name(r) for r in project["dependencies"]}
    for extra in modes["runtime"].split(","):
        runtime |= {name(r) for r in extras[extra]}
    shared = {name(r) for r in project["dependencies"] + extras["kokoro"]}
    test_only = {name(r) for r in extras["test"]} - shared
    assert {"pytest", "ray", "playwright", "transformers", "pipecat-ai", "livekit-agents"} <= test_only
    assert not runtime & test_only, runtime & test_only


def test_the_background_build_script_is_valid_python() -> None:
    """The stand-in above never runs the background build's Python: it compiles, under this Python."""
    script = (REPO / "tools" / "setup_env.sh").read_text()
    code = script.split("\"$venv/bin/python\" -c '", 1)[1].split("' </dev/null", 1)[0]
    assert "kernels_from_cli" in code and "int8_conv.kernel()" in code
    compile(code, "setup_env.sh: the background build", "exec")
