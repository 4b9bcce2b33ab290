"""Embedding-stage inference: a record in, the record with its candidate graph out.

Pure (tensors in, tensors out): embed every hit, build the radius graph of
:mod:`trkx.embedding.graph` at the working point, and label the edges when truth exists.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch_geometric.data import Data

from trkx.embedding.graph import BACKENDS, build_edges
from trkx.embedding.labels import label_edges
from trkx.embedding.model import EmbeddingMLP
from trkx.precision import dense_precision, resolve_precision


@dataclass(frozen=True)
class GraphBuilding:
    """The working point (config section ``graph``); None takes the model's trained value."""

    radius: float | None = None
    max_neighbours: int | None = None
    backend: str = "auto"

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"unknown graph backend {self.backend!r}; expected one of "
                             f"{', '.join(BACKENDS)}")


@torch.no_grad()
def embed(network: EmbeddingMLP, x: torch.Tensor, chunk_size: int = 262144,
          precision: str = "fp32") -> torch.Tensor:
    """Embeddings [N, d] float32 of all hits, in chunks of ``chunk_size`` rows, the dense layers
    at ``precision`` (fp32, bf16 or auto: :mod:`trkx.precision`)."""
    network.eval()
    if not len(x):
        return x.new_zeros((0, network.net[-1].out_features))
    chosen = resolve_precision(precision, x.device, network.net[0].out_features)
    with dense_precision(chosen, x.device):
        parts = [network(part) for part in x.split(chunk_size)]
    return torch.cat(parts).float()


def embedding_graph(network: EmbeddingMLP, record: Data, radius: float, max_neighbours: int,
                    backend: str = "auto") -> Data:
    """A copy of ``record`` with ``edge_index`` (and ``y``, ``y_pid``, ``signal`` with truth)."""
    out = record.clone()
    embedding = embed(network, record.x)
    out.edge_index = build_edges(embedding, radius, max_neighbours, backend,
                                 pos=record.pos).cpu()
    if getattr(record, "particle_id", None) is not None:
        out.y, out.y_pid, out.signal = label_edges(record, out.edge_index)
    return out
