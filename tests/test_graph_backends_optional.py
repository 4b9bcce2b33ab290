"""``graph backend: auto`` must not need faiss (CUDA embeddings then use the torch search) nor
numba (CPU embeddings then use cKDTree)."""

from __future__ import annotations

import builtins

import torch

from trkx.embedding import graph


def test_auto_without_faiss_on_cuda_tensors(monkeypatch) -> None:
    real_import = builtins.__import__

    def no_faiss(name, *args, **kwargs):
        if name == "faiss":
            raise ImportError("No module named 'faiss'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_faiss)
    assert graph.faiss_sees_gpu() is False

    class CudaLike(torch.Tensor):          # a CPU tensor that reports CUDA placement
        @property
        def is_cuda(self) -> bool:
            return True

    fake = torch.zeros(4, 3).as_subclass(CudaLike)
    assert graph.resolve_backend("auto", fake) == "torch"
    assert graph.resolve_backend("auto", torch.zeros(4, 3)) == "bucket"


def test_auto_without_numba_is_the_kdtree(monkeypatch) -> None:
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "numba" else real_find_spec(name, *a))
    assert graph.resolve_backend("auto", torch.zeros(4, 3)) == "kdtree"
