"""Distributed interaction-GNN: the event graph split across ranks, CA SpMM behind ``GraphOps``.

Modules (one concept each):

- :mod:`.layout`     the process grid: P ranks, replication c, row and column groups;
- :mod:`.partition`  node partitioners ``contiguous``, ``sector``, ``balanced``;
- :mod:`.shard`      a rank's part of the graph (own nodes, own edges = edges into own nodes);
- :mod:`.local`      the local incidence products (index gather, CSR SpMM scatter);
- :mod:`.comm`       counted collectives: bytes and messages per rank per operation;
- :mod:`.oblivious`  ``oblivious-1d`` (CAGNET 1D, every block broadcast in turn);
- :mod:`.sparse1d`   ``sparse-1d`` (halo rows only, one ``all_to_all_single`` per exchange);
- :mod:`.onefive`    ``1.5d`` (CAGNET 1.5D with replication c);
- :mod:`.volume`     the analytic communication volume of each algorithm;
- :mod:`.projection` alpha-beta projection of a step to many ranks from the exact plans;
- :mod:`.geometric_graph` a realistic layer-neighbour detector graph (benchmarks, tests);
- :mod:`.factory`    ``build_graph_ops(algorithm, ...)``;
- :mod:`.bookkeeping` loss scaling and gradient reduction (distributed = single-process function);
- :mod:`.train`      the ``torchrun`` training entry; :mod:`.lightning` the Lightning strategy.

Import the submodules directly; this package imports nothing heavy at import time.
"""

ALGORITHMS: tuple[str, ...] = ("oblivious-1d", "sparse-1d", "1.5d")
PARTITIONERS: tuple[str, ...] = ("contiguous", "sector", "balanced")
