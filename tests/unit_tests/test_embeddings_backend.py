"""Choosing the default model's inference backend (no model is loaded here)."""

from __future__ import annotations

import re

import pytest

from langchain_knowledge_inject.errors import ConfigurationError, KnowledgeBaseOpenError
from langchain_knowledge_inject.store import embeddings as emb


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
    (tmp_path / "onnx" / "model_int8dense_avx2.onnx").write_bytes(b"x")
    assert emb._onnx_file(tmp_path, "avx2") == "onnx/model_int8dense_avx2.onnx"


def test_quantization_target_is_a_name_sentence_transformers_accepts():
    assert emb._quantization_target() in ("arm64", "avx2", "avx512", "avx512_vnni")


def test_onnx_sessions_take_the_given_thread_count_and_do_not_spin():
    options = emb._onnx_session_options(3)
    assert options.intra_op_num_threads == 3
    assert options.inter_op_num_threads == 1
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"


def test_int8_quantizes_only_weight_matmuls_and_keeps_the_ffn_output_in_fp32():
    from langchain_knowledge_inject.store import embedding_quantization as quant

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
    # what earlier versions exported (every operator quantized): not used, re-exported
    (tmp_path / "onnx" / "model_quint8_avx2.onnx").write_bytes(b"x")
    assert emb._onnx_file(tmp_path, "avx2") is None
    (tmp_path / "onnx" / "model_int8dense_avx2.onnx").write_bytes(b"x")
    assert emb._onnx_file(tmp_path, "avx2") == "onnx/model_int8dense_avx2.onnx"
    assert emb._onnx_file(tmp_path, "avx512_vnni") is None


def test_quantization_config_names_the_chosen_nodes_of_a_real_graph(tmp_path):
    pytest.importorskip("optimum.onnxruntime")
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from langchain_knowledge_inject.store import embedding_quantization as quant

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
