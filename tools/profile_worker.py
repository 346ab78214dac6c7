#!/usr/bin/env python3
"""One weight type of ``tools/bench.py <family> --profile`` (tools/profile_bench.py runs it), in its
own process: measure the machine (GEMM rate, read bandwidth), load the package, warm up, time the
stages of one fixed-length request (or of ``--batch N`` requests run as one batch, each stage call
then one batched call), then count what each stage does; print one JSON line.

    python tools/profile_worker.py FAMILY PACKAGE [--threads 2] [--compute-dtype auto] [--batch 1]
           [--duration 5 --steps 16] [--patches 16] [--frames 48] [--repeats 2]

Stages are methods of the family's objects, wrapped on the instance (:data:`STAGES`); a stage's
time is its calls' wall time, the rest of the request's wall is ``other`` (text, prompt, the loop's
Python). The counting run repeats the request under a ``TorchDispatchMode`` that gives each aten
op, its FLOPs (torch's own formulas) and bytes (the op's tensors, in and out) to the running
stages (a stage's counts include those of the stages inside it); the custom kernels (Q8_0,
bf16-weight and packed linears) are counted at their module's call: ``2 * rows * in * out`` FLOPs,
the stored weight plus input and output bytes. The time a stage's work would take at the measured
rates (``max(flops / GEMM rate, bytes / bandwidth)``) is printed beside what it took, which says
what bounds it: compute, memory or neither (overhead).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

warnings.filterwarnings("ignore")
REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script
    sys.path.append(str(REPO))
from tools import bench_requests  # noqa: E402
from tools.batch_worker import requests  # noqa: E402
from tools.bench_common import gemm_rate, read_bandwidth  # noqa: E402

#: Per family: (stage, object getter from the session, method name). Stages may nest (a stage's
#: counts include its inner stages'); the table lists them outermost first.
Getter = Callable[[Any], Any]
STAGES: dict[str, list[tuple[str, Getter, str]]] = {
    "audio8_tts": [
        ("slow AR prefill", lambda s: s.network.slow, "prefill"),
        ("slow AR step", lambda s: s.network.slow, "step_rows"),
        ("semantic head", lambda s: s.generator.scorer, "logits"),
        ("semantic sampling", lambda s: s.generator, "_sample_semantic_rows"),
        ("fast AR (codebooks)", lambda s: s.generator, "_codebooks"),
        ("fast AR network", lambda s: s.network.fast, "start"),
        ("fast AR network", lambda s: s.network.fast, "logits"),
        ("codebook sampling", lambda s: sys.modules[type(s.generator).__module__], "_draw_code_rows"),
        ("codec decode", lambda s: s.codec, "decode"),
    ],
    "voxcpm2": [
        ("prefill (LMs, LocEnc)", lambda s: s.generator, "_prefill"),
        ("base LM step", lambda s: s.generator.model.base_lm, "step"),
        ("residual LM step", lambda s: s.generator.model.residual_lm, "step"),
        ("DiT / CFM solve", lambda s: s.generator.model.feat_decoder, "forward"),
        ("AudioVAE decode", lambda s: s.generator.vae, "decode"),
    ],
    "omnivoice": [
        ("LM backbone", lambda s: s.decoder.lm, "hidden"),
        ("LM heads", lambda s: s.decoder.lm, "heads"),
        ("MaskGIT sampling", lambda s: s.decoder, "predict"),
        ("codec decode", lambda s: s.model.codec, "decode"),
    ],
}
STAGES["voxcpm1"] = STAGES["voxcpm2"]
STAGES["kokoro"] = [
    ("durations (PL-BERT, LSTMs)", lambda s: s.net, "durations"),
    ("acoustics (F0, energy)", lambda s: s.net, "acoustics"),
    ("decoder: features", lambda s: s.net.decoder, "features"),
    ("decoder: generator", lambda s: s.net.decoder.generator, "forward"),
]


class Stages:
    """The wrapped stages: seconds and calls per stage, and which stages are running (for counting)."""

    def __init__(self, session: Any, table: list[tuple[str, Getter, str]]) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: Counter[str] = Counter()
        self.stack: list[str] = []
        self.inside: set[str] = set()  # stages seen running inside another
        self.names = list(dict.fromkeys(name for name, _, _ in table))
        for name, get, attr in table:
            owner = get(session)
            self._wrap(owner, attr, name)

    def _wrap(self, owner: Any, attr: str, name: str) -> None:
        inner = getattr(owner, attr)

        def timed(*args: Any, **kwargs: Any) -> Any:
            if self.stack:
                self.inside.add(name)
            self.stack.append(name)
            start = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - start
                self.calls[name] += 1
                self.stack.pop()

        setattr(owner, attr, timed)

    def active(self) -> set[str]:
        """The running stages (a stage's counts include its inner stages'), or ``other``."""
        return set(self.stack) if self.stack else {"other"}

    def reset(self) -> None:
        self.seconds.clear()
        self.calls.clear()


def machine_rates(threads: int) -> dict[str, float]:
    """GEMM rates (FLOP/s, float32 and bfloat16, 2048^3) and read bandwidth (B/s, a 512 MiB sum)."""
    import torch

    torch.set_num_threads(threads)
    from audiocpp.engine.nn.kernels.cpu_isa import native_bf16

    # emulated bfloat16 (no AVX512-BF16 / AMX at this level) runs at well under 1 GFLOP/s: a smaller
    # product measures it in seconds rather than minutes
    return {"gemm_float32": gemm_rate("float32"),
            "gemm_bfloat16": gemm_rate("bfloat16", 2048 if native_bf16() else 256),
            "read_bandwidth": read_bandwidth(0.5)}


class Count:
    """Ops, FLOPs and bytes per stage under a ``TorchDispatchMode`` plus the custom linears' hooks."""

    def __init__(self, stages: Stages, modules: list[Any]) -> None:
        self.stages = stages
        self.ops: Counter[str] = Counter()
        self.flops: Counter[str] = Counter()  # float32 math
        self.half_flops: Counter[str] = Counter()  # bfloat16 / float16 (and the int8 kernels' inputs)
        self.bytes: Counter[str] = Counter()
        self.inside_kernel = 0
        self.hooks = []
        for module in modules:
            self.hooks.append(module.register_forward_pre_hook(self._enter))
            self.hooks.append(module.register_forward_hook(self._leave))
        # layers sharing an input, and whole stacks of Q8_0 blocks, run as one kernel call when timed;
        # counted one by one (the layers' hooks, the blocks' Python: the same work)
        from audiocpp.engine.nn.layers import q8_block
        from audiocpp.engine.nn.linear.q8_0_linear import Q8_0Linear

        self._shared = Q8_0Linear.__dict__["shared_input"]
        Q8_0Linear.shared_input = staticmethod(lambda layers, x: None)
        self._run_stack = q8_block.run_stack
        q8_block.run_stack = lambda *args, **kwargs: None

    def _enter(self, module: Any, args: tuple) -> None:
        self.inside_kernel += 1

    def _leave(self, module: Any, args: tuple, output: Any) -> None:
        self.inside_kernel -= 1
        x = args[0]
        if hasattr(module, "in_features"):  # a linear: 2 * rows * in * out
            flops = 2 * (x.numel() // module.in_features) * module.in_features * module.out_features
        else:  # an int8 convolution: 2 * batch * out channels * out frames * in channels * taps
            flops = 2 * output.numel() * x.shape[1] * module.k
        nbytes = weight_bytes(module) + x.nbytes + output.nbytes
        for stage in self.stages.active():
            self.add_flops(stage, flops, x.dtype)
            self.bytes[stage] += nbytes
            self.ops[stage] += 1

    def add_flops(self, stage: str, flops: int, dtype: Any) -> None:
        import torch

        half = dtype in (torch.bfloat16, torch.float16)
        (self.half_flops if half else self.flops)[stage] += flops

    def mode(self) -> Any:
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils._pytree import tree_flatten
        from torch.utils.flop_counter import flop_registry

        count = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                formula = flop_formula(func._overloadpacket, flop_registry)
                if formula is None:  # a composite op: count its parts
                    with self:
                        out = func.decompose(*args, **kwargs)
                    if out is not NotImplemented:
                        return out
                out = func(*args, **kwargs)
                stages = count.stages.active()
                for stage in stages:
                    count.ops[stage] += 1
                if count.inside_kernel:
                    return out
                inputs = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
                if not inputs:  # a factory (empty, zeros, arange): nothing read
                    return out
                flops = int(formula(*args, **kwargs, out_val=out)) if formula is not None else 0
                seen: set[int] = set()
                total = 0
                if func._overloadpacket is torch.ops.aten.embedding:  # reads the looked-up rows only
                    inputs = inputs[1:]
                    total += out.nbytes
                for t in [*inputs, *tree_flatten(out)[0]]:
                    if isinstance(t, torch.Tensor) and t.device.type != "meta":
                        key = t.data_ptr() if t.layout == torch.strided else id(t)
                        if key not in seen:
                            seen.add(key)
                            total += t.numel() * t.element_size()
                for stage in stages:
                    count.add_flops(stage, flops, inputs[0].dtype)
                    count.bytes[stage] += total
                return out

        return Mode()

    def remove(self) -> None:
        from audiocpp.engine.nn.layers import q8_block
        from audiocpp.engine.nn.linear.q8_0_linear import Q8_0Linear

        for hook in self.hooks:
            hook.remove()
        Q8_0Linear.shared_input = self._shared
        q8_block.run_stack = self._run_stack


def flop_formula(packet: Any, registry: dict) -> Any:
    """torch's FLOP formula of an aten op; an in-place op (``addmm_``) does its out-of-place op's math."""
    import torch

    formula = registry.get(packet)
    name = getattr(packet, "__name__", "")
    if formula is None and name.endswith("_"):
        formula = registry.get(getattr(torch.ops.aten, name[:-1], None))
    return formula


def weight_bytes(module: Any) -> int:
    """The bytes a layer reads for its weight: its parameters, buffers and tensor attributes (the
    packed layouts are plain attributes)."""
    import torch

    tensors = {id(t): t for t in (*module.parameters(recurse=False), *module.buffers(recurse=False),
                                  *(v for v in vars(module).values() if isinstance(v, torch.Tensor)))}
    total = 0
    for t in tensors.values():
        try:
            total += t.nbytes
        except (RuntimeError, NotImplementedError):  # an opaque (mkldnn) layout
            total += t.numel() * t.element_size()
    return total


def custom_linears(*owners: Any) -> list[Any]:
    """The linear and convolution layers that compute outside aten's counted ops, in the networks reachable
    from ``owners`` (the session, the loaded model: their attributes, dicts and lists, a few levels deep)."""
    from torch import nn

    from audiocpp.engine.nn.kernels.int8_conv import Int8Conv1d

    roots: dict[int, nn.Module] = {}
    seen: set[int] = set()
    frontier: list[Any] = list(owners)
    for _ in range(4):
        found: list[Any] = []
        for obj in frontier:
            if id(obj) in seen or isinstance(obj, (str, bytes, int, float)):
                continue
            seen.add(id(obj))
            if isinstance(obj, nn.Module):
                roots[id(obj)] = obj
                continue
            if isinstance(obj, dict):
                found += list(obj.values())
            elif isinstance(obj, (list, tuple)):
                found += list(obj)
            elif hasattr(obj, "__dict__"):
                found += list(vars(obj).values())
        frontier = found
    layers: dict[int, nn.Module] = {}
    for root in roots.values():
        for module in root.modules():
            if isinstance(module, Int8Conv1d) or (
                    not isinstance(module, nn.Linear) and hasattr(module, "in_features")
                    and hasattr(module, "out_features")):
                layers[id(module)] = module
    return list(layers.values())


def counted(count: Count, stage: str) -> dict[str, int]:
    return {"ops": count.ops[stage], "flops": count.flops[stage], "half_flops": count.half_flops[stage],
            "bytes": count.bytes[stage]}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("family", choices=sorted(STAGES))
    ap.add_argument("path", type=Path)
    ap.add_argument("--threads", type=int, default=2)
    bench_requests.add_session_options(ap)
    bench_requests.add_request_size(ap)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--batch", type=int, default=1, help="requests run as one batch (run_batch)")
    ap.add_argument("--text", help="every request's text (default: the batch benchmark's sentences)")
    args = ap.parse_args(argv)
    if args.batch < 1:
        ap.error("--batch must be at least 1")
    from audiocpp.engine import load

    rates = machine_rates(args.threads)
    model = load(args.path, family=args.family)
    session = model.session("tts", **bench_requests.session_options(args))
    batch = requests(args.family, args.batch, args)
    if args.text:
        batch = [replace(r, text=args.text) for r in batch]

    def synthesize() -> float:
        """Seconds of audio of one run of the request(s), in this thread (``run_batch``: the counting mode
        is the thread's, and an executor's worker thread would run the ops outside it)."""
        return sum(result.audio.duration for result in model.run_batch([(session, r) for r in batch]))

    synthesize()  # warm-up, before the stages are wrapped (lazy per-dtype networks)
    stages = Stages(session, STAGES[args.family])
    walls, per_stage, audio_s = [], defaultdict(list), 0.0
    for _ in range(args.repeats):
        stages.reset()
        start = time.perf_counter()
        audio_s = synthesize()
        walls.append(time.perf_counter() - start)
        for name in stages.names:
            per_stage[name].append(stages.seconds[name])
    calls = dict(stages.calls)
    count = Count(stages, custom_linears(session, model))
    with count.mode():
        synthesize()
    count.remove()
    print(json.dumps({
        **bench_requests.worker_fields(args.family, args.path, session), "rates": rates, "audio_s": audio_s,
        "batch": args.batch,
        "wall": statistics.median(walls), "walls": walls,
        "stages": [{"name": name, "seconds": statistics.median(per_stage[name]), "calls": calls.get(name, 0),
                    **counted(count, name)} for name in stages.names],
        "other": counted(count, "other"),
        "nested": sorted(stages.inside),
    }))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
