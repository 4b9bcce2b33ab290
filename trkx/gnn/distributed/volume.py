"""Analytic communication volume of each algorithm, per rank and operation.

For a rank with node block ``n_p`` (of ``N``), owned edges ``E_p`` and ``r = f * bytes`` bytes
per feature row, one exchange costs (``B`` blocks, replication ``c``, ``P = B c``):

| algorithm | gather.forward received | aggregate.forward received |
|---|---|---|
| oblivious-1d | ``(N - n_p) r`` (broadcasts) | ``(P - 1) n_p r`` (reduce to owner) |
| sparse-1d | ``|H_p| r`` (halo) | ``|R_p| r``: rows of ``V_p`` in other blocks' halos |
| 1.5d | ``sum_{q in chunk, q != i} n_q r + 2 (c-1)/c |U_i| r`` | see :func:`onefive` |

Backward passes are the transposes (broadcast <-> reduce). CAGNET's per-process words for an
``n x n`` operator with ``f`` columns: 1D ``n f``, 1.5D ``n f / c + 2 n f c / P`` (here the
row all_reduce runs over the distinct sources ``U_i`` of a block's edges, ``~ n c / P``).
"""

from __future__ import annotations

import numpy as np
from torch import Tensor

from .comm import OpCounter
from .layout import ProcessLayout

OPS = ("gather.forward", "gather.backward", "aggregate.forward", "aggregate.backward")


def _add(counter: OpCounter, sent: int = 0, received: int = 0, ms: int = 0, mr: int = 0) -> None:
    counter.bytes_sent += sent
    counter.bytes_received += received
    counter.messages_sent += ms
    counter.messages_received += mr


def oblivious(block_sizes: list[int], block: int, row_bytes: int) -> dict[str, OpCounter]:
    """Per-op traffic of block ``block`` in ``oblivious-1d``."""
    P, n_p, N = len(block_sizes), block_sizes[block], sum(block_sizes)
    spread = OpCounter()          # one broadcast of every block
    _add(spread, sent=(P - 1) * n_p * row_bytes, received=(N - n_p) * row_bytes,
         ms=P - 1, mr=P - 1)
    collect = OpCounter()         # one reduce onto every block's owner
    _add(collect, sent=(N - n_p) * row_bytes, received=(P - 1) * n_p * row_bytes,
         ms=P - 1, mr=P - 1)
    return {"gather.forward": spread, "aggregate.backward": _copy(spread),
            "gather.backward": collect, "aggregate.forward": _copy(collect)}


def sparse1d(edge_index: Tensor, owner: Tensor, num_blocks: int,
             row_bytes: int) -> list[dict[str, OpCounter]]:
    """Per-op traffic of every block in ``sparse-1d``: a gather fetches the halo ``H_p``
    (``|H_p|`` rows from the blocks owning them, one message per non-empty source block) and
    returns ``|R_p|`` rows; an aggregate does the reverse (partial sums back to the owners)."""
    src, dst = edge_index[0].numpy().astype(np.int64), edge_index[1].numpy().astype(np.int64)
    own = owner.numpy().astype(np.int64)
    cross = own[src] != own[dst]
    pairs = np.unique(own[dst[cross]] * own.size + src[cross])     # (needing block, source)
    needer, holder = pairs // own.size, own[pairs % own.size]
    fetched = np.bincount(needer, minlength=num_blocks)
    returned = np.bincount(holder, minlength=num_blocks)
    links = np.unique(needer * num_blocks + holder)                 # (needer, holder) pairs
    msgs_in = np.bincount(links // num_blocks, minlength=num_blocks)
    msgs_out = np.bincount(links % num_blocks, minlength=num_blocks)
    out = []
    for p in range(num_blocks):
        fetch, give = OpCounter(), OpCounter()
        _add(fetch, sent=int(returned[p]) * row_bytes, received=int(fetched[p]) * row_bytes,
             ms=int(msgs_out[p]), mr=int(msgs_in[p]))
        _add(give, sent=int(fetched[p]) * row_bytes, received=int(returned[p]) * row_bytes,
             ms=int(msgs_in[p]), mr=int(msgs_out[p]))
        out.append({"gather.forward": fetch, "aggregate.backward": _copy(fetch),
                    "gather.backward": give, "aggregate.forward": _copy(give)})
    return out


def onefive(block_sizes: list[int], layout: ProcessLayout, num_sources: int,
            row_bytes: int) -> dict[str, OpCounter]:
    """Per-op traffic of rank ``layout.rank`` in ``1.5d`` (``num_sources``: its ``|U_i|``,
    the distinct sources of the edges into its block)."""
    B, c, i = layout.num_blocks, layout.replication, layout.block
    chunk = layout.chunk(layout.replica)
    spread, collect = OpCounter(), OpCounter()    # column broadcasts / column reduces
    for q in chunk:
        if q == i:
            _add(spread, sent=(B - 1) * block_sizes[i] * row_bytes, ms=B - 1)
            _add(collect, received=(B - 1) * block_sizes[i] * row_bytes, mr=B - 1)
        else:
            _add(spread, received=block_sizes[q] * row_bytes, mr=1)
            _add(collect, sent=block_sizes[q] * row_bytes, ms=1)
    ring = 2 * (c - 1) * num_sources * row_bytes // c if c > 1 else 0
    row_root = layout.chunk_owner(i) == layout.replica
    row_block = block_sizes[i] * row_bytes
    gather_fwd, gather_bwd = _copy(spread), _copy(collect)
    agg_fwd, agg_bwd = _copy(collect), _copy(spread)
    if c > 1:
        for counter in (gather_fwd, gather_bwd):
            _add(counter, sent=ring, received=ring, ms=2 * (c - 1), mr=2 * (c - 1))
        if row_root:
            _add(agg_fwd, sent=(c - 1) * row_block, ms=c - 1)
            _add(agg_bwd, received=(c - 1) * row_block, mr=c - 1)
        else:
            _add(agg_fwd, received=row_block, mr=1)
            _add(agg_bwd, sent=row_block, ms=1)
    return {"gather.forward": gather_fwd, "gather.backward": gather_bwd,
            "aggregate.forward": agg_fwd, "aggregate.backward": agg_bwd}


def _copy(counter: OpCounter) -> OpCounter:
    return OpCounter(**vars(counter))
