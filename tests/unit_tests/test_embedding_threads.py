"""The default model's thread policy: 1 thread up to 2 cores, and a user's own count is kept."""

from __future__ import annotations

import pytest
import torch

from langchain_knowledge_inject._store import embedding_threads as th
from langchain_knowledge_inject.errors import ConfigurationError


@pytest.fixture
def torch_threads(monkeypatch):
    """Restore torch's thread count and start each test with no thread setting in the env."""
    before = torch.get_num_threads()
    for name in (th.THREADS_ENV, "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(th, "_applied", None)
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize(("cores", "expected"), [(1, 1), (2, 1), (3, 3), (8, 8), (0, 1)])
def test_default_is_one_thread_up_to_two_cores(cores, expected):
    assert th.default_thread_count(cores) == expected


def test_pinned_count_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv(th.THREADS_ENV, raising=False)
    assert th.pinned_threads() is None
    monkeypatch.setenv(th.THREADS_ENV, " 3 ")
    assert th.pinned_threads() == 3
    assert th.embedding_threads() == 3


@pytest.mark.parametrize("raw", ["0", "-2", "two", "1.5"])
def test_a_bad_pinned_count_is_refused_naming_what_is_allowed(monkeypatch, raw):
    monkeypatch.setenv(th.THREADS_ENV, raw)
    with pytest.raises(ConfigurationError, match="positive integer") as info:
        th.pinned_threads()
    assert info.value.option == th.THREADS_ENV


def test_unset_threads_on_a_small_machine_become_one(monkeypatch, torch_threads):
    monkeypatch.setattr(th, "usable_cores", lambda: 2)
    monkeypatch.setattr(th, "torch_default_threads", lambda: 2)
    torch.set_num_threads(2)  # torch's own default here: nobody chose it
    assert th.configure_torch_threads() == 1
    assert torch.get_num_threads() == 1
    # loading a second backend re-applies the package's own count, not a "user" one
    assert th.user_thread_setting(1) is None
    assert th.configure_torch_threads() == 1


def test_unset_threads_on_a_larger_machine_follow_usable_cores(monkeypatch, torch_threads):
    monkeypatch.setattr(th, "usable_cores", lambda: 3)
    monkeypatch.setattr(th, "torch_default_threads", lambda: 4)
    torch.set_num_threads(4)
    assert th.configure_torch_threads() == 3


def test_a_count_the_user_set_in_torch_is_kept(monkeypatch, torch_threads):
    monkeypatch.setattr(th, "usable_cores", lambda: 2)
    monkeypatch.setattr(th, "torch_default_threads", lambda: 2)
    torch.set_num_threads(3)
    assert th.user_thread_setting(3) == "torch.set_num_threads(3)"
    assert th.configure_torch_threads() == 3
    assert torch.get_num_threads() == 3


@pytest.mark.parametrize("name", ["OMP_NUM_THREADS", "MKL_NUM_THREADS"])
def test_a_count_the_user_set_in_the_environment_is_kept(monkeypatch, torch_threads, name):
    monkeypatch.setattr(th, "usable_cores", lambda: 2)
    monkeypatch.setattr(th, "torch_default_threads", lambda: 2)
    torch.set_num_threads(2)
    monkeypatch.setenv(name, "2")
    assert th.user_thread_setting(2) == f"{name}=2"
    assert th.configure_torch_threads() == 2


def test_the_pinned_count_wins_over_everything(monkeypatch, torch_threads):
    monkeypatch.setattr(th, "usable_cores", lambda: 2)
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    monkeypatch.setenv(th.THREADS_ENV, "2")
    torch.set_num_threads(1)
    assert th.configure_torch_threads() == 2
    assert th.configure_torch_threads(1) == 1  # an explicit argument wins over the env


def test_usable_cores_respects_a_cgroup_quota(monkeypatch):
    monkeypatch.setattr(th.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3, 4, 5, 6, 7})
    monkeypatch.setattr(th, "_cgroup_quota", lambda: 1.5)
    assert th.usable_cores() == 2
    monkeypatch.setattr(th, "_cgroup_quota", lambda: None)
    assert th.usable_cores() == 8


def test_torch_default_estimate_counts_physical_cores(monkeypatch, tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    blocks = [
        f"processor\t: {i}\nphysical id\t: 0\ncore id\t\t: {i % 2}\n" for i in range(4)
    ]  # 2 cores, 2 hyperthreads each
    cpuinfo.write_text("\n".join(blocks), encoding="utf-8")
    real_path = th.Path
    monkeypatch.setattr(
        th, "Path", lambda p: real_path(cpuinfo) if p == "/proc/cpuinfo" else real_path(p)
    )
    assert th.torch_default_threads() == 2
