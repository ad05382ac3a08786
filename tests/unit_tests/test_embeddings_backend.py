"""Choosing the default model's inference backend (no model is loaded here)."""

from __future__ import annotations

import re

import pytest

from langchain_knowledge_inject._store import embeddings as emb
from langchain_knowledge_inject.errors import ConfigurationError, KnowledgeBaseOpenError


def test_auto_is_onnx_exactly_when_the_extra_is_installed(monkeypatch):
    monkeypatch.delenv("KINJECT_EMBEDDINGS_BACKEND", raising=False)
    monkeypatch.setattr(emb, "onnx_available", lambda: True)
    assert emb.resolve_backend() == "onnx"
    assert emb.resolve_backend("auto") == "onnx"
    monkeypatch.setattr(emb, "onnx_available", lambda: False)
    assert emb.resolve_backend() == "torch"
    assert emb.resolve_backend("onnx-int8") == "onnx-int8"


def test_environment_variable_picks_the_backend(monkeypatch):
    monkeypatch.setenv("KINJECT_EMBEDDINGS_BACKEND", "torch")
    monkeypatch.setattr(emb, "onnx_available", lambda: True)
    assert emb.resolve_backend() == "torch"
    assert emb.resolve_backend("onnx") == "onnx"  # an explicit argument wins


@pytest.mark.parametrize("name", ["cuda", "ONNX", "", "int8"])
def test_unknown_backend_is_refused_naming_the_allowed_ones(monkeypatch, name):
    monkeypatch.setenv("KINJECT_EMBEDDINGS_BACKEND", "auto")
    with pytest.raises(ConfigurationError, match="auto, torch, onnx, onnx-int8"):
        emb.resolve_backend(name)
    monkeypatch.setenv("KINJECT_EMBEDDINGS_BACKEND", name)
    with pytest.raises(ConfigurationError):
        emb.default_embeddings()


def test_onnx_without_the_extra_names_the_install(monkeypatch, tmp_path):
    monkeypatch.setattr(emb, "onnx_available", lambda: False)
    with pytest.raises(KnowledgeBaseOpenError, match=r"langchain-knowledge-inject\[onnx\]"):
        emb.default_embeddings(backend="onnx", cache_dir=tmp_path)
    assert not (tmp_path / "models").exists()


def test_export_folder_lives_in_the_store_directory(tmp_path):
    assert emb._export_folder(tmp_path) == tmp_path / "models" / emb.ONNX_EXPORT_DIR


def test_onnx_file_finds_the_export_and_the_quantized_file(tmp_path):
    assert emb._onnx_file(tmp_path, None) is None
    assert emb._onnx_file(tmp_path, "avx2") is None
    (tmp_path / "onnx").mkdir()
    (tmp_path / "onnx" / "model.onnx").write_bytes(b"x")
    assert emb._onnx_file(tmp_path, None) == "onnx/model.onnx"
    assert emb._onnx_file(tmp_path, "avx2") is None
    (tmp_path / "onnx" / "model_int8smooth_avx2.onnx").write_bytes(b"x")
    assert emb._onnx_file(tmp_path, "avx2") == "onnx/model_int8smooth_avx2.onnx"


def test_quantization_target_is_a_name_sentence_transformers_accepts():
    assert emb._quantization_target() in ("arm64", "avx2", "avx512", "avx512_vnni")


def test_onnx_sessions_take_the_given_thread_count_and_do_not_spin():
    options = emb._onnx_session_options(3)
    assert options.intra_op_num_threads == 3
    assert options.inter_op_num_threads == 1
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"


def test_int8_quantizes_only_weight_matmuls_and_keeps_the_ffn_output_in_fp32():
    from langchain_knowledge_inject._store import embedding_quantization as quant

    weights = ["w_q", "w_ffn_in", "w_ffn_out", "w_attn_out", "word_table"]
    nodes = [
        ("/embeddings/word_embeddings/Gather", "Gather", ["word_table", "ids"]),
        ("/encoder/layer.0/attention/self/query/MatMul", "MatMul", ["h", "w_q"]),
        ("/encoder/layer.0/attention/self/MatMul", "MatMul", ["q", "k"]),  # scores: 2 activations
        ("/encoder/layer.0/attention/output/dense/MatMul", "MatMul", ["a", "w_attn_out"]),
        ("/encoder/layer.0/intermediate/dense/MatMul", "MatMul", ["h", "w_ffn_in"]),
        ("/encoder/layer.11/output/dense/MatMul", "MatMul", ["g", "w_ffn_out"]),
        ("/encoder/layer.0/output/Add", "Add", ["g", "w_ffn_out"]),
    ]
    assert quant.weight_matmuls(nodes, weights) == [
        "/encoder/layer.0/attention/self/query/MatMul",
        "/encoder/layer.0/attention/output/dense/MatMul",
        "/encoder/layer.0/intermediate/dense/MatMul",
    ]
    everything = re.compile(r"(?!)")
    assert len(quant.weight_matmuls(nodes, weights, keep_fp32=everything)) == 4


def test_quantized_file_is_found_under_its_own_name_not_the_earlier_export(tmp_path):
    (tmp_path / "onnx").mkdir()
    (tmp_path / "onnx" / "model.onnx").write_bytes(b"x")
    # what earlier versions exported: every operator quantized, then weight MatMuls
    # without smoothing; neither is used: the first onnx-int8 load quantizes again
    (tmp_path / "onnx" / "model_quint8_avx2.onnx").write_bytes(b"x")
    (tmp_path / "onnx" / "model_int8dense_avx2.onnx").write_bytes(b"x")
    assert emb._onnx_file(tmp_path, "avx2") is None
    (tmp_path / "onnx" / "model_int8smooth_avx2.onnx").write_bytes(b"x")
    assert emb._onnx_file(tmp_path, "avx2") == "onnx/model_int8smooth_avx2.onnx"
    assert emb._onnx_file(tmp_path, "avx512_vnni") is None


def test_smoothing_scales_move_activation_range_into_the_weights_exactly():
    import numpy as np

    from langchain_knowledge_inject._store import embedding_quantization as quant

    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 3)).astype(np.float32) * np.array([40.0, 1.0, 0.0], np.float32)
    w_q = rng.standard_normal((3, 4)).astype(np.float32)
    w_k = rng.standard_normal((3, 4)).astype(np.float32) * 3
    scales = quant.smoothing_scales(np.abs(x).max(axis=0), [w_q, w_k], alpha=0.5)
    assert scales.dtype == np.float32
    # s = max|X|^a / max|W|^(1-a), the weight maximum taken over every reader of X
    weight_max = np.maximum(np.abs(w_q).max(axis=1), np.abs(w_k).max(axis=1))
    expected = np.sqrt(np.abs(x).max(axis=0)) / np.sqrt(weight_max)
    assert np.allclose(scales[:2], expected[:2], rtol=1e-6)
    assert scales[2] == pytest.approx(1e-5)  # a channel that is always 0: clipped, not 0
    for w in (w_q, w_k):
        assert np.allclose((x / scales) @ (w * scales[:, None]), x @ w, atol=1e-4)
    # the smoothed input's channels are closer in range than the raw ones
    smoothed = np.abs(x / scales).max(axis=0)[:2]
    assert (
        smoothed.max() / smoothed.min()
        < np.abs(x).max(axis=0)[:2].max() / np.abs(x).max(axis=0)[:2].min()
    )


def test_smoothed_graph_computes_the_same_function_in_fp32(tmp_path):
    pytest.importorskip("onnx")
    import numpy as np
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    from langchain_knowledge_inject._store import embedding_quantization as quant

    rng = np.random.default_rng(1)
    names = {
        "wq": "/encoder/layer.0/attention/self/query/MatMul",
        "wk": "/encoder/layer.0/attention/self/key/MatMul",
        "wo": "/encoder/layer.0/output/dense/MatMul",  # reads x too, but is not smoothed
    }
    weights = [
        numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32), name)
        for name in names
    ]
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", w], [f"y_{w}"], name=n) for w, n in names.items()],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info(f"y_{w}", TensorProto.FLOAT, [2, 3]) for w in names],
        initializer=weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    feeds = {
        text: {"x": (rng.standard_normal((2, 4)) * [30, 1, 1, 0.1]).astype(np.float32)}
        for text in ("a", "b")
    }
    maxima = quant.activation_maxima(model, feeds, lambda text: feeds[text])
    assert np.allclose(maxima["x"], np.max([np.abs(f["x"]).max(axis=0) for f in feeds.values()], 0))

    def run(proto, x):
        session = ort.InferenceSession(
            proto.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        return session.run(None, {"x": x})

    probe = rng.standard_normal((2, 4)).astype(np.float32)
    before = run(model, probe)
    smoothed = quant.smooth_model(model, maxima)
    muls = [node for node in smoothed.graph.node if node.op_type == "Mul"]
    assert len(muls) == 1  # one Mul shared by query and key, which read the same input
    readers = {node.name: node.input[0] for node in smoothed.graph.node if node.op_type == "MatMul"}
    assert readers[names["wq"]] == readers[names["wk"]] == muls[0].output[0]
    assert readers[names["wo"]] == "x"
    for a, b in zip(before, run(smoothed, probe), strict=True):
        assert np.allclose(a, b, rtol=1e-5, atol=1e-5)


def test_quantization_config_names_the_chosen_nodes_of_a_real_graph(tmp_path):
    pytest.importorskip("optimum.onnxruntime")
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from langchain_knowledge_inject._store import embedding_quantization as quant

    weight = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["h"], name="/encoder/layer.0/query/MatMul"),
            helper.make_node("MatMul", ["h", "x"], ["s"], name="/encoder/layer.0/self/MatMul"),
            helper.make_node(
                "MatMul", ["s", "w"], ["y"], name="/encoder/layer.0/output/dense/MatMul"
            ),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])],
        initializer=[weight],
    )
    path = tmp_path / "model.onnx"
    onnx.save(helper.make_model(graph), str(path))
    config = quant.quantization_config("avx2", path)
    assert config.nodes_to_quantize == ["/encoder/layer.0/query/MatMul"]
    assert config.operators_to_quantize == ["MatMul"]
    assert config.per_channel and not config.is_static
