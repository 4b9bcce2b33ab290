"""Embedding-stage inference: a record in, the record with its candidate graph out.

Pure (tensors in, tensors out): embed every hit, build the radius graph of
:mod:`trkx.embedding.graph` at the working point, and label the edges when truth exists.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

import torch

from trkx.data.record_type import Record
from trkx.embedding.graph import BACKENDS, build_edges
from trkx.embedding.labels import label_edges
from trkx.embedding.model import EmbeddingMLP
from trkx.runtime.block_threads import for_blocks
from trkx.runtime.device import row_blocked
from trkx.runtime.precision import check_precision, dense_precision


@dataclass(frozen=True)
class EmbeddingInference:
    """Config section ``inference``: the graph's working point (None takes the model's
    trained value), the neighbour-search backend, the precision of the dense layers, and
    ``other_layers_only``: each hit proposes its k nearest hits of other layers
    (:func:`trkx.embedding.graph.build_edges` with ``layer``)."""

    radius: float | None = None
    max_neighbours: int | None = None
    backend: str = "auto"
    precision: str = "fp32"
    other_layers_only: bool = False

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"unknown graph backend {self.backend!r}; expected one of "
                             f"{', '.join(BACKENDS)}")
        check_precision(self.precision)

    def working_point(self, trained: dict) -> tuple[float, int]:
        """``(radius, max_neighbours)``: this section's values, else the trained ones
        (trkx.files.checkpoint.with_working_point)."""
        from trkx.files.checkpoint import with_working_point

        values = with_working_point(
            {"radius": self.radius, "max_neighbours": self.max_neighbours}, trained,
            "the embedding checkpoint's working point has none; set it under inference")
        return float(values["radius"]), int(values["max_neighbours"])


def layer_key(record: Record) -> torch.Tensor:
    """One integer per detector layer of each hit: ``1000 volume_id + layer_id``."""
    for key in ("volume_id", "layer_id"):
        if getattr(record, key, None) is None:
            raise ValueError(f"event record has no {key!r}: other_layers_only needs the layers")
    return record.volume_id.long() * 1000 + record.layer_id.long()


@torch.no_grad()
def embed(network: EmbeddingMLP, x: torch.Tensor, chunk_size: int = 262144,
          precision: str = "fp32") -> torch.Tensor:
    """Embeddings [N, d] float32 of all hits, in chunks of ``chunk_size`` rows, the dense layers
    at ``precision`` (fp32 or bf16: :mod:`trkx.runtime.precision`)."""
    network.eval()
    if not len(x):
        return x.new_zeros((0, network.net[-1].out_features))
    with dense_precision(precision, x.device):
        if row_blocked(x):
            return _embed_blocked(network, x)
        parts = [network(part) for part in x.split(chunk_size)]
    return torch.cat(parts).float()


#: Hits per block on the CPU: a multiple of the BLAS row tile (trkx.gnn.model
#: INFERENCE_BLOCK_ROWS), so every row's product, norm and tanh are the unblocked network's
#: bit for bit.
BLOCK_ROWS = 6720


def _embed_blocked(network: EmbeddingMLP, x: torch.Tensor) -> torch.Tensor:
    """The network on ``BLOCK_ROWS`` hits at a time, the blocks shared out between the threads
    (trkx.runtime.block_threads): each block's 128-wide layers stay in its core's cache. On
    event 21001 (2-core EPYC, fp32) 0.56 s for the whole event at once."""
    out = torch.empty(x.shape[0], network.net[-1].out_features, device=x.device)

    def block(start: int, stop: int, worker: int) -> None:
        out[start:stop] = network(x[start:stop])

    for_blocks(x.shape[0], BLOCK_ROWS, block)
    return out


def embedding_graph(network: EmbeddingMLP, record: Record, radius: float, max_neighbours: int,
                    backend: str = "auto", precision: str = "fp32", edge_labels: bool = True,
                    lap: Callable[[str], None] | None = None,
                    other_layers_only: bool = False) -> Record:
    """A shallow copy of ``record`` with the candidate graph ``edge_index`` [2, E]:

        E = { (i, j) : j among the max_neighbours nearest to i, |e_i - e_j| < radius },
        e = embed(x) at ``precision``,

    with ``other_layers_only`` j among the max_neighbours nearest of the hits on another
    (volume, layer) than i (``layer_key``),

    on the device of ``record.x`` (the network's), plus the edge labels ``y``, ``y_pid``,
    ``signal`` (computed from the truth on the CPU, returned beside the edges) when
    ``edge_labels`` and the record carries truth (labelling is evaluation: inference itself
    never needs it). ``lap(name)``, when given, is called after the embedding
    (``"embedding"``) and after the graph search (``"graph"``), so a caller can time the two
    apart."""
    lap = lap or (lambda name: None)
    out = copy.copy(record)             # shallow: the hit tensors are shared, not copied
    embedding = embed(network, record.x, precision=precision)
    lap("embedding")
    # on the embedding's device (build_edges: the search runs there, or on the CPU for the
    # numba/cKDTree/FAISS-CPU backends, and the edges come back once)
    layer = layer_key(record) if other_layers_only else None
    out.edge_index = build_edges(embedding, radius, max_neighbours, backend, pos=record.pos,
                                 layer=layer)
    lap("graph")
    if edge_labels and getattr(record, "particle_id", None) is not None:
        out.y, out.y_pid, out.signal = label_edges(record, out.edge_index)
    return out
