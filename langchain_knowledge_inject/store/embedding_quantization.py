"""int8 dynamic quantization of the default model's ONNX export: which MatMuls, which config.

sentence-transformers' string targets (``"avx2"``, ``"avx512"``, ...) quantize
every operator Optimum's dynamic mode knows: all 48 MatMuls of
all-MiniLM-L6-v2, including the 12 that multiply two activations (attention
scores and their product with the values), and the ``Gather`` of the three
embedding tables. Those extra quantizations cost quality and save little time
(the activation-by-activation products are about 5% of the multiply-adds, and a
quantized ``Gather`` is dequantized again at once). Measured on SciFact
(``benchmarks/int8_variants.py``; docs/performance.md), the export here
quantizes only the MatMuls that multiply by a weight matrix, and keeps in fp32
those in :data:`FP32_MATMULS` (the feed-forward output projections, whose input
is the GELU output with its outliers, the most sensitive to per-tensor activation
scales). Weights are per channel, symmetric; activations asymmetric, per tensor.

The file is ``onnx/model_int8dense_<target>.onnx``. Exports by earlier versions
(``onnx/model_quint8_<target>.onnx``, every operator quantized) are not loaded
any more: the first ``onnx-int8`` load after an upgrade quantizes the fp32
export already in the folder again (seconds) and leaves the old file in place.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

QUANTIZED_FILE_TAG = "int8dense"
"""Middle part of the quantized file's name: ``onnx/model_int8dense_<target>.onnx``."""

FP32_MATMULS = re.compile(r"/layer\.\d+/output/dense/")
"""MatMuls left in fp32 (matched against node names): the feed-forward output projections."""


def quantized_file_name(target: str) -> str:
    """The quantized model file for a CPU target, relative to the export folder."""
    return f"onnx/model_{QUANTIZED_FILE_TAG}_{target}.onnx"


def weight_matmuls(
    nodes: Iterable[tuple[str, str, Sequence[str]]],
    initializers: Iterable[str],
    *,
    keep_fp32: re.Pattern[str] = FP32_MATMULS,
) -> list[str]:
    """Names of the MatMul nodes to quantize: those with a weight matrix, minus ``keep_fp32``.

    Args:
        nodes: ``(name, op_type, inputs)`` of every node of the graph.
        initializers: Names of the graph's constant tensors (the weights).
        keep_fp32: Node names matching it stay in fp32.

    Returns:
        The node names, in graph order.
    """
    weights = set(initializers)
    return [
        name
        for name, op_type, inputs in nodes
        if op_type == "MatMul"
        and any(value in weights for value in inputs)
        and not keep_fp32.search(name)
    ]


def quantization_config(target: str, model_file: Path) -> Any:
    """Optimum's dynamic int8 ``QuantizationConfig`` for ``target``: :func:`weight_matmuls` only.

    Args:
        target: ``"arm64"``, ``"avx2"``, ``"avx512"`` or ``"avx512_vnni"`` (an
            ``AutoQuantizationConfig`` constructor; its defaults are kept).
        model_file: The fp32 ONNX model whose nodes are chosen.
    """
    import onnx
    from optimum.onnxruntime.configuration import AutoQuantizationConfig

    graph = onnx.load(str(model_file), load_external_data=False).graph
    nodes = [(node.name, node.op_type, list(node.input)) for node in graph.node]
    chosen = weight_matmuls(nodes, (tensor.name for tensor in graph.initializer))
    factory = getattr(AutoQuantizationConfig, target)
    return factory(
        is_static=False,
        per_channel=True,
        nodes_to_quantize=chosen,
        operators_to_quantize=["MatMul"],
    )


def export_quantized(model: Any, target: str, folder: Path) -> None:
    """Write :func:`quantized_file_name` of ``target`` into ``folder`` (an fp32 export).

    Args:
        model: The ``SentenceTransformer`` loaded with ``backend="onnx"`` from ``folder``.
        target: The CPU target (see :func:`quantization_config`).
        folder: The export folder; its ``onnx/model.onnx`` is quantized.
    """
    from sentence_transformers.backend import export_dynamic_quantized_onnx_model

    config = quantization_config(target, folder / "onnx" / "model.onnx")
    export_dynamic_quantized_onnx_model(
        model, config, str(folder), file_suffix=f"{QUANTIZED_FILE_TAG}_{target}"
    )
