"""What every CLI process pays before synthesis stays small: building networks on the meta device
(every family does, to load them strictly) neither initializes their weights nor imports
torch._dynamo (its first use on meta costs 1.2 s of start-up; tools/startup_bench.py measures)."""

from __future__ import annotations

import subprocess
import sys

from tests.support import REPO

PROBE = """
import sys
import torch
from audiocpp.engine.nn.build import build_on_meta
net = build_on_meta(lambda: torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Embedding(10, 8),
                                                torch.nn.Conv1d(8, 8, 3), torch.nn.LayerNorm(8)))
assert all(p.is_meta for p in net.parameters())
assert torch.nn.init.normal_.__name__ == "normal_" and not hasattr(torch.nn.init.normal_, "__wrapped_init__")
import audiocpp.engine as ac
model = ac.load(sys.argv[1])
model.session("tts")
assert "torch._dynamo" not in sys.modules, "loading imported torch._dynamo"
print("ok")
"""


def test_loading_a_model_imports_no_compiler() -> None:
    tiny = REPO / "tests" / "data" / "audio8_tts" / "tiny"
    proc = subprocess.run([sys.executable, "-c", PROBE, str(tiny)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]
