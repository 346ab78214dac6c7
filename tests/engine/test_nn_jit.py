"""engine.nn.jit: kernels are built only for CPUs with the flags they need, a failed build gives
None (callers keep torch's kernels), and a build on a terminal says why the load takes longer."""

from __future__ import annotations

import io

import pytest

from audiocpp.engine.nn import jit


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_cpu_without_the_flags_builds_nothing(monkeypatch) -> None:
    def must_not_build(*args, **kwargs):
        raise AssertionError("built on a CPU without the flags")

    monkeypatch.setattr("torch.utils.cpp_extension.load_inline", must_not_build)
    assert jit.build("audiocpp_test_never_v1", "", ["f"], cpu_flags_needed=("no_such_flag",), cflags=[]) is None


@pytest.mark.parametrize("terminal", [True, False])
def test_a_failed_build_gives_none_and_a_terminal_hears_of_it(monkeypatch, tmp_path, terminal: bool) -> None:
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))

    def failing(*args, **kwargs):
        raise RuntimeError("no compiler")

    monkeypatch.setattr("torch.utils.cpp_extension.load_inline", failing)
    err = _Terminal() if terminal else io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    assert jit.build("audiocpp_test_failing_v1", "", ["f"], cpu_flags_needed=(), cflags=[]) is None
    assert ("building the audiocpp_test_failing_v1 kernel" in err.getvalue()) is terminal
    assert not jit.built("audiocpp_test_failing_v1")


def test_disabled_reads_the_switch(monkeypatch) -> None:
    monkeypatch.setenv("AUDIOCPP_TEST_SWITCH", "0")
    assert jit.disabled("AUDIOCPP_TEST_SWITCH")
    monkeypatch.setenv("AUDIOCPP_TEST_SWITCH", "1")
    assert not jit.disabled("AUDIOCPP_TEST_SWITCH")
