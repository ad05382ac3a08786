"""The real default model, loaded offline in a fresh process, under each thread setting."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # fresh interpreters load torch

_PROBE = """
import json, sys, torch
if sys.argv[1]:
    torch.set_num_threads(int(sys.argv[1]))  # the user's own choice, before the model loads
import joblib
from langchain_knowledge_inject._store.embeddings import default_embeddings
model = default_embeddings()
vector = model.embed_query("How many days of annual leave do I get?")
cores = joblib.cpu_count()
print(json.dumps({"threads": torch.get_num_threads(), "dim": len(vector),
                  "default": 1 if cores <= 2 else min(cores, torch.get_num_threads())}))
"""


def _probe(user_threads: int | None = None, **env: str) -> dict:
    clean = {k: v for k, v in os.environ.items() if not k.endswith("NUM_THREADS")}
    clean.pop("KINJECT_TORCH_THREADS", None)
    clean.update(HF_HUB_OFFLINE="1", **env)  # nothing may come from a model hub
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, str(user_threads or "")],
        env=clean,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_offline_load_uses_the_package_default_when_nobody_set_threads():
    result = _probe()
    assert result["dim"] == 384
    assert result["threads"] == result["default"]


def test_a_thread_count_set_in_torch_before_loading_is_kept():
    assert _probe(3)["threads"] == 3


def _torch_alone(**env: str) -> int:
    """Torch's own thread count in a fresh process with ``env`` and no package."""
    clean = {k: v for k, v in os.environ.items() if not k.endswith("NUM_THREADS")}
    clean.update(env)
    code = "import torch; print(torch.get_num_threads())"
    out = subprocess.run(
        [sys.executable, "-c", code], env=clean, capture_output=True, text=True, check=True
    )
    return int(out.stdout)


def test_omp_num_threads_is_kept_and_the_pinned_count_wins():
    assert _probe(OMP_NUM_THREADS="2")["threads"] == _torch_alone(OMP_NUM_THREADS="2")
    assert _probe(OMP_NUM_THREADS="2", KINJECT_TORCH_THREADS="3")["threads"] == 3


def test_torchs_own_default_is_joblibs_physical_core_count():
    """What tells a count the user chose from torch's own default."""
    import joblib

    assert _torch_alone() == joblib.cpu_count(only_physical_cores=True)
