"""Distributed interaction-GNN: the event graph split across ranks, CA SpMM behind ``GraphOps``.

Modules (one concept each):

- :mod:`.layout`     the process grid: P ranks, replication c, row and column groups;
- :mod:`.block_counts` what a partition gives each block: owned edges, halo, edge imbalance;
- :mod:`.partition`  node partitioners ``contiguous``, ``sector``, ``balanced`` (edge-balanced);
- :mod:`.graph_partition` graph partitioners: greedy refinement of the cut, METIS (``pymetis``);
- :mod:`.figures`    what a partition costs: edge balance and analytic traffic per algorithm;
- :mod:`.shard`      a rank's part of the graph (own nodes, own edges = edges into own nodes);
- :mod:`.blocks`     whole-block broadcasts / reduces (shared by oblivious-1d and 1.5d);
- :mod:`.comm`       counted collectives: bytes and messages per rank per operation;
- :mod:`.oblivious`  ``oblivious-1d`` (CAGNET 1D, every block broadcast in turn);
- :mod:`.sparse1d`   ``sparse-1d`` (halo rows only, one ``all_to_all_single`` per exchange);
- :mod:`.onefive`    ``1.5d`` (CAGNET 1.5D with replication c);
- :mod:`.volume`     the analytic communication volume of each algorithm;
- :mod:`.factory`    ``build_graph_ops(algorithm, ...)``;
- :mod:`.bookkeeping` loss scaling and gradient reduction (distributed = single-process function);
- :mod:`.train`      the ``torchrun`` training entry; :mod:`.lightning` the Lightning strategy.

The local incidence products (index gather, CSR SpMM) are :class:`trkx.gnn.local_ops.Incidence`,
the same kernels as single-process training. Import the submodules directly; this package
imports nothing heavy at import time and registers nothing (Lightning strategy names are
registered by :func:`.lightning.register_graph_parallel_strategy`).
"""

ALGORITHMS: tuple[str, ...] = ("oblivious-1d", "sparse-1d", "1.5d")
PARTITIONERS: tuple[str, ...] = ("contiguous", "sector", "balanced", "refined", "metis")
