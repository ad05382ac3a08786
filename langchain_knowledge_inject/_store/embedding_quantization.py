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

Before quantizing, the MatMuls whose input is a LayerNorm output (the
attention's query, key and value projections and the feed-forward input
projection, :data:`SMOOTH_MATMULS`) are smoothed (SmoothQuant, Xiao et al.
2023): a few channels of those activations are far larger than the rest, and
one per-tensor scale made for them rounds the other channels coarsely. Each
such input ``X`` is divided per channel by ``s = max|X|^a / max|W|^(1-a)``
(``a`` = :data:`SMOOTH_ALPHA`) in a ``Mul`` node, and the rows of the weights
that read it are multiplied by ``s``: ``(X / s)(s W) = X W`` in fp32, while the
int8 rounding of ``X / s`` loses less. ``max|X|`` per channel comes from the
fp32 export run on :data:`CALIBRATION_TEXTS` at export time (16 short texts;
no data file). The ``Mul`` cannot be folded into the LayerNorm, whose output is
also the residual stream. Measured on SciFact chunks: cosine to fp32 0.9994
mean instead of 0.9975, at the same CPU time; nDCG@10 through the default path
moved as much as before (within a few thousandths of fp32 either way), so
``onnx-int8`` stays an option (docs/performance.md).

The file is ``onnx/model_int8smooth_<target>.onnx``. Exports by earlier
versions (``onnx/model_quint8_<target>.onnx``, every operator quantized;
``onnx/model_int8dense_<target>.onnx``, not smoothed) are not loaded any more:
the first ``onnx-int8`` load after an upgrade quantizes the fp32 export already
in the folder again (about a minute) and leaves the old file in place.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

QUANTIZED_FILE_TAG = "int8smooth"
"""Middle part of the quantized file's name: ``onnx/model_int8smooth_<target>.onnx``."""

FP32_MATMULS = re.compile(r"/layer\.\d+/output/dense/")
"""MatMuls left in fp32 (matched against node names): the feed-forward output projections."""

SMOOTH_MATMULS = re.compile(r"/attention/self/(query|key|value)/|/intermediate/dense/")
"""MatMuls whose input is smoothed before quantizing: those that read a LayerNorm output."""

SMOOTH_ALPHA = 0.65
"""Migration strength ``a`` of the smoothing: chosen by cosine to fp32 on SciFact train chunks
(0.35 / 0.5 / 0.65 / 0.75 / 0.85: mean 0.9990 / 0.9993 / 0.9994 / 0.9994 / 0.9992)."""

CALIBRATION_TEXTS = (
    "The committee approved the annual budget on Tuesday after a long debate about funding "
    "for public schools, road repairs and the new library.",
    "Mitochondria produce most of the cell's supply of adenosine triphosphate, which is used "
    "as a source of chemical energy.",
    "To reset your password, open Settings, choose Account, and follow the link sent to the "
    "email address on file.",
    "Patients receiving the higher dose showed a 23% reduction in systolic blood pressure "
    "compared with placebo (p < 0.01), with no serious adverse events reported.",
    "def load_config(path):\n    with open(path) as fh:\n        return json.load(fh)",
    "I told her I'd be there by seven, but the train was delayed and I didn't get home until "
    "almost nine.",
    "The tenant shall pay rent on the first day of each month; late payments incur a fee of "
    "five percent of the amount due.",
    "Quantum entanglement describes correlations between particles that cannot be explained "
    "by any local hidden-variable theory.",
    "Our return policy allows exchanges within 30 days of purchase, provided the item is "
    "unused and in its original packaging.",
    "In 1492, Columbus sailed across the Atlantic, reaching islands in the Caribbean that he "
    "believed were part of Asia.",
    "What is the capital of Australia? Many people guess Sydney, but it is Canberra.",
    "The error 'connection refused' usually means no process is listening on that port, or a "
    "firewall blocks it.",
    "Expression of the transcription factor was upregulated in tumour samples relative to "
    "matched normal tissue, suggesting a role in proliferation.",
    "Preheat the oven to 180 degrees, whisk the eggs with sugar until pale, then fold in the "
    "flour and bake for 25 minutes.",
    "The central bank raised interest rates by a quarter point, citing persistent inflation "
    "in services and a tight labour market.",
    "Hey, are we still on for lunch tomorrow? Let me know if noon works or if you'd rather "
    "meet later.",
)
"""Texts whose activations set the smoothing scales: varied English, none from a benchmark."""


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

    graph = onnx.load(str(model_file), load_external_data=False).graph
    nodes = [(node.name, node.op_type, list(node.input)) for node in graph.node]
    return _config(target, weight_matmuls(nodes, (tensor.name for tensor in graph.initializer)))


def _config(target: str, nodes: list[str]) -> Any:
    from optimum.onnxruntime.configuration import AutoQuantizationConfig

    factory = getattr(AutoQuantizationConfig, target)
    return factory(
        is_static=False,
        per_channel=True,
        nodes_to_quantize=nodes,
        operators_to_quantize=["MatMul"],
    )


def smoothing_scales(
    activation_max: np.ndarray, weights: Sequence[np.ndarray], alpha: float = SMOOTH_ALPHA
) -> np.ndarray:
    """Per-channel divisors ``s = max|X|^a / max|W|^(1-a)`` of one MatMul input ``X``.

    Args:
        activation_max: ``max|X|`` per input channel (calibration).
        weights: The ``(in, out)`` weight matrices of every MatMul reading ``X``.
        alpha: Migration strength ``a``: 0 leaves the activations as they are
            (weights only), 1 divides each channel by its own maximum.

    Returns:
        ``s``, float32, one per input channel, at least ``1e-5``.
    """
    weight_max = np.max([np.abs(w).max(axis=1) for w in weights], axis=0).astype(np.float32)
    activation = np.asarray(activation_max, np.float32)
    scales = activation**alpha / np.clip(weight_max, 1e-5, None) ** (1 - alpha)
    return np.clip(scales.astype(np.float32), 1e-5, None)


def _weight_matmul_nodes(graph: Any) -> list[Any]:
    names = {tensor.name for tensor in graph.initializer}
    return [
        node
        for node in graph.node
        if node.op_type == "MatMul" and any(value in names for value in node.input)
    ]


def activation_maxima(model: Any, texts: Iterable[str], tokenize: Any) -> dict[str, np.ndarray]:
    """``max|X|`` per channel of every weight MatMul's input, the fp32 ``model`` run on ``texts``.

    Args:
        model: The fp32 ``onnx.ModelProto`` (left unchanged).
        texts: Calibration texts, run one at a time.
        tokenize: Maps a text to the model's feeds (name -> int64 array).
    """
    import onnx
    import onnxruntime as ort

    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    inputs = sorted({node.input[0] for node in _weight_matmul_nodes(probe.graph)})
    for name in inputs:
        probe.graph.output.append(
            onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None)
        )
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(
        probe.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    maxima: dict[str, np.ndarray] = {}
    for text in texts:
        for name, value in zip(inputs, session.run(inputs, tokenize(text)), strict=True):
            peak = np.abs(value).reshape(-1, value.shape[-1]).max(axis=0)
            maxima[name] = np.maximum(maxima[name], peak) if name in maxima else peak
    return maxima


def smooth_model(
    model: Any,
    maxima: Mapping[str, np.ndarray],
    *,
    alpha: float = SMOOTH_ALPHA,
    pattern: re.Pattern[str] = SMOOTH_MATMULS,
) -> Any:
    """Smooth the inputs of the MatMuls matching ``pattern`` in ``model`` (in place; returned).

    The MatMuls that read the same input share one ``Mul`` by ``1 / s``
    (:func:`smoothing_scales` over all their weights); each of their weight
    matrices is multiplied row-wise by ``s``. In fp32 the model computes the
    same function (to float rounding).
    """
    from onnx import helper, numpy_helper

    graph = model.graph
    initializers = {tensor.name: tensor for tensor in graph.initializer}
    readers: dict[str, list[Any]] = {}
    for node in _weight_matmul_nodes(graph):
        if pattern.search(node.name):
            readers.setdefault(node.input[0], []).append(node)
    for index, (source, nodes) in enumerate(readers.items()):
        weights = [numpy_helper.to_array(initializers[node.input[1]]) for node in nodes]
        scales = smoothing_scales(maxima[source], weights, alpha)
        divisor, smoothed = f"smooth_inv_{index}", f"{source}_smoothed"
        graph.initializer.append(numpy_helper.from_array((1 / scales).astype(np.float32), divisor))
        position = min(list(graph.node).index(node) for node in nodes)
        graph.node.insert(
            position,
            helper.make_node("Mul", [source, divisor], [smoothed], name=f"/smooth/{index}/Mul"),
        )
        for node, weight in zip(nodes, weights, strict=True):
            node.input[0] = smoothed
            initializers[node.input[1]].CopyFrom(
                numpy_helper.from_array(
                    (weight * scales[:, None]).astype(np.float32), node.input[1]
                )
            )
    return model


def export_quantized(model: Any, target: str, folder: Path) -> None:
    """Write :func:`quantized_file_name` of ``target`` into ``folder`` (an fp32 export).

    Args:
        model: The ``SentenceTransformer`` loaded with ``backend="onnx"`` from
            ``folder`` (its tokenizer makes the calibration feeds).
        target: The CPU target (see :func:`quantization_config`).
        folder: The export folder; its ``onnx/model.onnx`` is quantized.
    """
    window = int(getattr(model, "max_seq_length", 256) or 256)
    write_quantized(
        folder / "onnx" / "model.onnx",
        folder / quantized_file_name(target),
        target,
        tokenizer=model.tokenizer,
        window=window,
    )


def write_quantized(
    fp32_file: Path,
    out_file: Path,
    target: str,
    *,
    tokenizer: Any,
    window: int = 256,
    keep_fp32: re.Pattern[str] = FP32_MATMULS,
    smooth: re.Pattern[str] | None = SMOOTH_MATMULS,
) -> None:
    """Quantize ``fp32_file`` into ``out_file``: smoothed (unless ``smooth`` is None), then int8.

    The fp32 model is smoothed (:func:`smooth_model`, scales from
    :data:`CALIBRATION_TEXTS`) into a temporary file, which Optimum's
    ``ORTQuantizer`` quantizes with :func:`quantization_config`.

    Args:
        fp32_file: The fp32 ONNX export.
        out_file: Where the quantized model goes.
        target: The CPU target (see :func:`quantization_config`).
        tokenizer: The model's Hugging Face tokenizer (calibration feeds).
        window: Word pieces the model reads.
        keep_fp32: MatMuls left in fp32.
        smooth: MatMuls whose input is smoothed first; None: none.
    """
    import onnx
    from optimum.onnxruntime import ORTQuantizer

    def tokenize(text: str) -> dict[str, np.ndarray]:
        encoded = tokenizer(
            text.replace("\n", " ").strip(), truncation=True, max_length=window, return_tensors="np"
        )
        ids = np.asarray(encoded["input_ids"], np.int64)
        return {
            "input_ids": ids,
            "attention_mask": np.asarray(encoded["attention_mask"], np.int64),
            "token_type_ids": np.zeros_like(ids),
        }

    fp32 = onnx.load(str(fp32_file))
    if smooth is not None:
        smooth_model(fp32, activation_maxima(fp32, CALIBRATION_TEXTS, tokenize), pattern=smooth)
    work = Path(tempfile.mkdtemp(prefix=".quantize-", dir=out_file.parent))
    try:
        onnx.save(fp32, str(work / "model.onnx"))
        graph = fp32.graph
        nodes = [(node.name, node.op_type, list(node.input)) for node in graph.node]
        chosen = weight_matmuls(
            nodes, (tensor.name for tensor in graph.initializer), keep_fp32=keep_fp32
        )
        config = _config(target, chosen)
        quantizer = ORTQuantizer.from_pretrained(str(work), file_name="model.onnx")
        quantizer.quantize(config, str(work), file_suffix="int8")
        shutil.move(str(work / "model_int8.onnx"), str(out_file))
    finally:
        shutil.rmtree(work, ignore_errors=True)
