"""``audiocpp kernels``: build the C++ kernels this CPU supports now (set-up runs it), so that a
first synthesis does not pay for the compiler, and say for each which ISA variant it runs and why
(``AUDIOCPP_CPU_ISA`` holds them to a lower level)."""

from __future__ import annotations

import json
import sys


def kernels_from_cli(*, as_json: bool = False, verbose: bool = False) -> int:
    """Build and report; the exit status is 1 when a kernel this CPU supports failed to build
    (the engine then uses its slower fallback), else 0."""
    from audiocpp.engine.nn.kernels import build_all, cpu_isa

    cpu = cpu_isa.describe()  # an unknown AUDIOCPP_CPU_ISA is a usage error, before any build
    reports = build_all(verbose=verbose)
    if as_json:
        print(json.dumps({"cpu": {"arch": cpu_isa.arch(), "best": cpu_isa.host_level(), "cap": cpu_isa.cap(),
                                  "level": cpu_isa.level(), "native_bf16": cpu_isa.native_bf16()},
                          "kernels": [report.__dict__ for report in reports]}, indent=2))
    else:
        print(f"CPU: {cpu}")
        for report in reports:
            if report.built:
                state = f"ready ({report.seconds:.1f} s): {report.variant} ({report.why})"
            elif not report.supported:
                state = f"not used on this machine: {report.reason}"
            else:
                state = f"not built: {report.reason}"
            print(f"{report.name}: {state}; written for {', '.join(report.variants)}")
    failed = [r for r in reports
              if r.supported and not r.built and not (r.reason or "").startswith("turned off")]
    if failed:
        print("warning: " + ", ".join(r.name for r in failed) + " did not build; audiocpp runs without "
              "(slower). AUDIOCPP_DEBUG=1 audiocpp kernels --verbose shows the compiler's output",
              file=sys.stderr)
    return 1 if failed else 0
