"""The operator interface through which the interaction network touches the graph.

For ``E`` directed edges ``k = (s_k -> d_k)`` over ``N`` nodes let ``S`` and ``D`` be the
``E x N`` incidence matrices (``S[k, s_k] = 1``, ``D[k, d_k] = 1``). Every graph step of the
interaction network is one of four sparse products:

    gather:     X_src = S X,        X_dst = D X            (node rows -> edge rows)
    aggregate:  M_in  = D^T E',     M_out = S^T E'         (edge rows -> node rows, sums)

A :class:`GraphOps` object is built once per graph and exposes exactly these products, fused in
pairs (``gather`` returns both gathers and ``aggregate`` both sums), so that a distributed
implementation can serve each pair with a single exchange. The model code calls nothing else,
which is what lets the same ``InteractionGNN`` run on a single process (CSR SpMM or index
scatter) or split across ranks (CA SpMM: ``trkx.gnn.distributed``) without change.

Shapes are *local*: on one process ``num_nodes = N`` and ``num_edges = E``; on a rank of a
distributed run they are the rank's own node block and the edges it owns.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from torch import Tensor


@runtime_checkable
class GraphOps(Protocol):
    """Gather and aggregate operators of one (local part of a) graph. All are differentiable.

    The adjoint relations hold and define the backward passes:
    ``d(S X)/dX`` applied to ``G`` is ``S^T G`` and ``d(D^T E)/dE`` applied to ``G`` is ``D G``.
    """

    @property
    def num_nodes(self) -> int:
        """Rows of the node matrices this object consumes and produces (local nodes)."""
        ...

    @property
    def num_edges(self) -> int:
        """Rows of the edge matrices this object consumes and produces (local edges)."""
        ...

    def gather(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """``(S X, D X)``: the source and destination rows of every local edge. [E, f] each."""
        ...

    def aggregate(self, e: Tensor) -> tuple[Tensor, Tensor]:
        """``(D^T E, S^T E)``: the sums of edge rows into their destination (``M_in``) and
        source (``M_out``) nodes. [N, f] each."""
        ...
