"""engine.nn.kernels.jit and engine.nn.kernels: kernels are built only for CPUs with the flags they need, a
failed build gives None (callers keep torch's kernels) and says why under AUDIOCPP_DEBUG, anything
else a build raises propagates, build names follow the source, flags and torch's version, a build
on a terminal says why the load takes longer, and build_all builds every kernel this CPU runs."""

from __future__ import annotations

import io
import time
from pathlib import Path

import pytest
import torch

from audiocpp.engine.nn import kernels
from audiocpp.engine.nn.kernels import cpu_isa, jit


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _kernel(tmp_path: Path, text: str = "int f() { return 1; }\n", *, flags=(),
            name: str = "jit_test", level: str = "avx2") -> jit.Kernel:
    """A kernel of one variant: ``flags`` at ``level``, or the portable one without flags."""
    source = tmp_path / f"{name}.cpp"
    source.write_text(text)
    variant = jit.Variant(level, tuple(flags)) if flags else jit.GENERIC
    return jit.Kernel(name, str(source), ("f",), (variant,))


@pytest.fixture
def quiet(monkeypatch, tmp_path):
    """An empty extension folder, AUDIOCPP_DEBUG unset, a toolchain (the stubs never run it)."""
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "extensions"))
    monkeypatch.delenv("AUDIOCPP_DEBUG", raising=False)
    monkeypatch.setattr(jit, "toolchain_missing", lambda: None)


def test_a_cpu_without_the_flags_builds_nothing(monkeypatch, tmp_path, quiet) -> None:
    calls = []
    monkeypatch.setattr("torch.utils.cpp_extension.load_inline", lambda *a, **k: calls.append(a) or object())
    kernel = _kernel(tmp_path, flags=[("avx2", "-mavx2"), ("no_such_flag", "-mno-such-flag")])
    assert jit.build(kernel) is None
    assert calls == []  # the compiler never ran
    assert jit.why_not(kernel) == "this CPU cannot run any of its variants (no no_such_flag)"
    assert jit.build(kernel, variant=kernel.variants[0]) is None and calls == []
    assert jit.why_not(kernel, kernel.variants[0]) == "this CPU lacks no_such_flag"


def test_a_turned_off_kernel_builds_nothing(monkeypatch, tmp_path, quiet) -> None:
    calls = []
    monkeypatch.setattr("torch.utils.cpp_extension.load_inline", lambda *a, **k: calls.append(a) or object())
    monkeypatch.setenv("AUDIOCPP_TEST_SWITCH", "0")
    kernel = jit.Kernel("jit_test", str(tmp_path / "none.cpp"), ("f",), switch="AUDIOCPP_TEST_SWITCH")
    assert jit.build(kernel) is None and calls == []
    assert jit.why_not(kernel) == "turned off (AUDIOCPP_TEST_SWITCH=0)"


@pytest.mark.parametrize("error", [AssertionError("a test's stub"), TypeError("a bug"), KeyError("bug")])
def test_what_is_not_a_build_failure_propagates(monkeypatch, tmp_path, quiet, error: Exception) -> None:
    def raising(*args, **kwargs):
        raise error

    monkeypatch.setattr("torch.utils.cpp_extension.load_inline", raising)
    with pytest.raises(type(error)):
        jit.build(_kernel(tmp_path))


@pytest.mark.parametrize("terminal", [True, False])
def test_a_failed_build_gives_none_and_a_terminal_hears_of_it(monkeypatch, tmp_path, quiet,
                                                             terminal: bool) -> None:
    def failing(*args, **kwargs):
        raise RuntimeError("Error building extension 'x': [1/2] c++ -c main.cpp\n"
                           "main.cpp:3:5: error: 'f' was not declared in this scope\nninja: build stopped")

    monkeypatch.setattr("torch.utils.cpp_extension.load_inline", failing)
    err = _Terminal() if terminal else io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    kernel = _kernel(tmp_path, name="jit_failing")
    assert jit.build(kernel) is None
    assert ("building the jit_failing kernel" in err.getvalue()) is terminal
    assert "not declared" not in err.getvalue()  # the reason only under AUDIOCPP_DEBUG
    assert not jit.built(kernel)
    reason = jit.why_not(kernel)
    assert reason.startswith("the build failed: RuntimeError: Error building extension 'x'")
    assert "main.cpp:3:5: error: 'f' was not declared in this scope" in reason


@pytest.mark.parametrize("error", [RuntimeError("Ninja is required to load C++ extensions"),
                                   OSError("No space left on device"), ImportError("undefined symbol: f")])
def test_debug_says_why_a_build_failed(monkeypatch, tmp_path, quiet, error: Exception) -> None:
    def failing(*args, **kwargs):
        raise error

    monkeypatch.setattr("torch.utils.cpp_extension.load_inline", failing)
    monkeypatch.setenv("AUDIOCPP_DEBUG", "1")
    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    assert jit.build(_kernel(tmp_path)) is None
    said = err.getvalue()
    assert "the jit_test kernel is not used: the build failed" in said and str(error) in said


def test_debug_prints_the_tail_of_the_compiler_output(monkeypatch, tmp_path, quiet) -> None:
    output = "\n".join(f"line {i}" for i in range(100))

    def failing(*args, **kwargs):
        raise RuntimeError(f"Error building extension 'x':\n{output}")

    monkeypatch.setattr("torch.utils.cpp_extension.load_inline", failing)
    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    with jit.verbose():
        assert jit.build(_kernel(tmp_path)) is None
    assert "line 99" in err.getvalue() and "line 60\n" in err.getvalue() and "line 59\n" not in err.getvalue()


def test_a_missing_toolchain_is_a_reason_not_an_error(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "extensions"))
    monkeypatch.setattr(jit, "toolchain_missing", lambda: "no C++ compiler (c++; set CXX)")
    calls = []
    monkeypatch.setattr("torch.utils.cpp_extension.load_inline", lambda *a, **k: calls.append(a))
    kernel = _kernel(tmp_path)
    assert jit.build(kernel) is None and calls == []
    assert jit.why_not(kernel) == "no C++ compiler (c++; set CXX)"


def test_a_missing_source_file_is_a_failed_build(tmp_path, quiet) -> None:
    kernel = jit.Kernel("jit_test", str(tmp_path / "gone.cpp"), ("f",))
    assert jit.build(kernel) is None
    assert "FileNotFoundError" in jit.why_not(kernel)


def test_a_build_passes_the_source_functions_and_flags_and_is_timed(monkeypatch, tmp_path, quiet) -> None:
    seen = {}

    def load_inline(**kwargs):
        seen.update(kwargs)
        time.sleep(0.05)
        return "module"

    monkeypatch.setattr("torch.utils.cpp_extension.load_inline", load_inline)
    avx2 = jit.cpu_has(["avx2"]) and cpu_isa.rank("avx2") >= 0
    kernel = _kernel(tmp_path, flags=[("avx2", "-mavx2")] if avx2 else [])
    before = jit.build_seconds()
    assert jit.build(kernel) == "module" and jit.why_not(kernel) is None
    assert jit.build_seconds() - before >= 0.05
    variant = kernel.variants[0]
    assert seen["name"] == kernel.build_name(variant) and seen["cpp_sources"] == [kernel.text()]
    assert seen["extra_include_paths"] == [str(jit.KERNELS_DIR)]  # isa.h
    assert seen["functions"] == ["f"] and seen["extra_cflags"] == kernel.cflags(variant) == [
        "-O3", "-ffp-contract=off", *(["-mavx2"] if avx2 else ["-DAUDIOCPP_GENERIC"]), "-DAUDIOCPP_TORCH",
        "-fopenmp"]


def test_the_build_name_follows_the_source_the_flags_and_torch(monkeypatch, tmp_path) -> None:
    name = _kernel(tmp_path).build_name()
    assert name.startswith("audiocpp_jit_test_") and name == _kernel(tmp_path).build_name()
    assert _kernel(tmp_path, "int f() { return 2; }\n").build_name() != name
    assert _kernel(tmp_path, flags=[("fma", "-mfma")]).build_name() != name
    assert "_generic_" in name and "_avx2_" in _kernel(tmp_path, flags=[("fma", "-mfma")]).build_name()
    monkeypatch.setattr(torch, "__version__", "0.0.0")
    assert _kernel(tmp_path).build_name() != name


def test_disabled_reads_the_switch(monkeypatch) -> None:
    monkeypatch.setenv("AUDIOCPP_TEST_SWITCH", "0")
    assert jit.disabled("AUDIOCPP_TEST_SWITCH")
    monkeypatch.setenv("AUDIOCPP_TEST_SWITCH", "1")
    assert not jit.disabled("AUDIOCPP_TEST_SWITCH")


def test_every_kernel_ships_its_source_and_one_flag_table() -> None:
    found = kernels.kernels()
    assert [k.name for k, _ in found] == ["q8_0_linear", "bf16_linear", "snake", "mt19937", "row_attention",
                                          "q8_block", "adain_act", "int8_conv"]
    for kernel, _ in found:
        assert kernel.path().parent == jit.KERNELS_DIR and kernel.path().is_file()
        assert all(f"{name}(" in kernel.text() for name in kernel.functions)
        assert kernel.variants[-1] == jit.GENERIC or kernel.name == "row_attention"
        for variant in kernel.variants:
            assert all(option.startswith(("-m", "")) for _, option in variant.isa)


def test_build_all_reports_every_kernel() -> None:
    reports = kernels.build_all(verbose=False)
    assert [r.name for r in reports] == ["q8_0_linear", "bf16_linear", "snake", "mt19937", "row_attention",
                                         "q8_block", "adain_act", "int8_conv"]
    for (kernel, load), report in zip(kernels.kernels(), reports):
        assert report.supported == (kernel.unsupported() is None)
        assert report.built == (load() is not None) and report.seconds >= 0
        assert (report.reason is None) == report.built
        if report.supported and jit.toolchain_missing() is None and not kernel.off():
            assert report.built, report.reason  # this CPU runs it and can build it: it must build


def test_build_all_does_not_build_a_kernel_turned_off(monkeypatch) -> None:
    monkeypatch.setenv("AUDIOCPP_Q8_0_KERNEL", "0")
    report = {r.name: r for r in kernels.build_all(verbose=False)}["q8_0_linear"]
    assert not report.built and report.seconds == 0
    if report.supported:
        assert report.reason == "turned off (AUDIOCPP_Q8_0_KERNEL=0)"


def test_a_build_whose_check_finds_a_problem_is_rejected(monkeypatch, tmp_path, quiet) -> None:
    monkeypatch.setattr("torch.utils.cpp_extension.load_inline", lambda **kwargs: "module")
    kernel = _kernel(tmp_path)
    assert jit.build_checked(kernel, lambda module: None) == "module"
    assert jit.build_checked(kernel, lambda module: "disagrees with its reference") is None
    assert jit.why_not(kernel) == "disagrees with its reference"
    assert jit.build_checked(kernel, lambda module: None, level="no-such-level") is None
