"""engine.nn.kernels.jit does not wait for a kernel another process is building: while the set-up's background
build holds its lock (a real ``flock`` held by another process) or another process compiles that kernel
(torch's lock file in the build folder), :func:`jit.build` gives None at once and says why, so that the
caller keeps torch's path; ``AUDIOCPP_KERNEL_WAIT=1`` builds (or waits) instead; a kernel already built
is used whatever the locks; a torch lock left by a killed build is removed rather than waited on; once
the holder is gone the kernel builds (here: really compiled, imported and called)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from audiocpp.engine.nn.kernels import jit

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="flock is POSIX")

HOLDER = """
import fcntl, sys, time
f = open(sys.argv[1], "w")
fcntl.flock(f, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(120)
"""


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def isolated(monkeypatch, tmp_path):
    """Empty extension and cache folders, no wait switch, a toolchain, a fresh 'said once' flag."""
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "extensions"))
    monkeypatch.setenv("AUDIOCPP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(jit.WAIT_ENV, raising=False)
    monkeypatch.delenv("AUDIOCPP_DEBUG", raising=False)
    monkeypatch.setattr(jit, "_told_busy", False)
    return tmp_path


@pytest.fixture
def background_build(isolated):
    """Another process holding the background build's lock, as tools/setup_env.sh's build does."""
    lock = jit.background_lock()
    lock.parent.mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        yield holder
    finally:
        holder.kill()
        holder.wait()


def _kernel(tmp_path: Path, name: str = "jit_busy") -> jit.Kernel:
    source = tmp_path / f"{name}.cpp"
    source.write_text("int64_t f(int64_t x) { return x + 41; }\n")
    return jit.Kernel(name, str(source), ("f",))


def _no_build(*args, **kwargs):
    raise AssertionError("load_inline ran: the build did not fall back")


def test_the_background_build_lock_falls_back_at_once(monkeypatch, background_build, isolated) -> None:
    monkeypatch.setattr("torch.utils.cpp_extension.load_inline", _no_build)
    monkeypatch.setattr(jit, "toolchain_missing", lambda: None)
    err = _Terminal()
    monkeypatch.setattr("sys.stderr", err)
    kernel = _kernel(isolated)
    start = time.perf_counter()
    assert jit.build(kernel) is None
    assert time.perf_counter() - start < 5  # no wait
    reason = jit.why_not(kernel)
    assert reason.startswith("not built yet: the set-up is building the kernels in the background")
    assert str(jit.background_lock().with_name("build.log")) in reason
    assert jit.build(kernel) is None  # a second kernel or load: the same, said once on a terminal
    said = err.getvalue()
    assert said.count("a C++ kernel is not ready yet") == 1 and "keeps torch's own path" in said


def test_the_wait_switch_builds_despite_the_lock(monkeypatch, background_build, isolated) -> None:
    calls = []
    monkeypatch.setattr("torch.utils.cpp_extension.load_inline", lambda **kw: calls.append(kw) or "module")
    monkeypatch.setattr(jit, "toolchain_missing", lambda: None)
    monkeypatch.setenv(jit.WAIT_ENV, "1")
    kernel = _kernel(isolated)
    assert jit.build(kernel) == "module" and len(calls) == 1 and jit.why_not(kernel) is None


def test_a_lock_nobody_holds_is_no_reason(monkeypatch, isolated) -> None:
    """The lock file stays after its build ends (flock is released with the process): not a reason."""
    lock = jit.background_lock()
    lock.parent.mkdir(parents=True)
    lock.write_text("")
    calls = []
    monkeypatch.setattr("torch.utils.cpp_extension.load_inline", lambda **kw: calls.append(kw) or "module")
    monkeypatch.setattr(jit, "toolchain_missing", lambda: None)
    assert jit.building_elsewhere("anything") is None
    assert jit.build(_kernel(isolated)) == "module" and len(calls) == 1


def test_another_process_compiling_the_kernel_falls_back(monkeypatch, isolated) -> None:
    monkeypatch.setattr("torch.utils.cpp_extension.load_inline", _no_build)
    monkeypatch.setattr(jit, "toolchain_missing", lambda: None)
    kernel = _kernel(isolated)
    baton = isolated / "extensions" / kernel.build_name() / "lock"
    baton.parent.mkdir(parents=True)
    baton.write_text("")  # what torch's FileBaton creates while it compiles
    assert jit.build(kernel) is None
    assert jit.why_not(kernel) == f"not built yet: another process is building it ({baton})"
    assert baton.exists()  # someone else's: left alone


def test_a_stale_torch_lock_is_removed_not_waited_on(monkeypatch, isolated) -> None:
    calls = []
    monkeypatch.setattr("torch.utils.cpp_extension.load_inline", lambda **kw: calls.append(kw) or "module")
    monkeypatch.setattr(jit, "toolchain_missing", lambda: None)
    kernel = _kernel(isolated)
    baton = isolated / "extensions" / kernel.build_name() / "lock"
    baton.parent.mkdir(parents=True)
    baton.write_text("")
    old = time.time() - jit.STALE_LOCK_SECONDS - 60
    os.utime(baton, (old, old))
    assert jit.build(kernel) == "module" and len(calls) == 1
    assert not baton.exists()


@pytest.mark.slow
@pytest.mark.skipif(jit.toolchain_missing() is not None, reason="no C++ toolchain")
def test_a_real_build_falls_back_while_held_then_builds_and_a_built_kernel_ignores_the_lock(
        monkeypatch, isolated) -> None:
    kernel = _kernel(isolated, "jit_busy_real")
    lock = jit.background_lock()
    lock.parent.mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert jit.build(kernel) is None and not jit.built(kernel)  # nothing compiled here
    finally:
        holder.kill()
        holder.wait()
    module = jit.build(kernel)  # the holder is gone: this process compiles it (real torch extension)
    assert module is not None, jit.why_not(kernel)
    assert module.f(1) == 42 and jit.built(kernel)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert jit.build(kernel) is module  # already built: used, whatever is being built elsewhere
    finally:
        holder.kill()
        holder.wait()
