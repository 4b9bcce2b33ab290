"""The process grid of a distributed GNN run.

``P`` ranks hold the event graph. With replication ``c`` (``c = 1`` for the 1D algorithms) the
nodes are split into ``B = P / c`` *blocks*; block ``i`` (its nodes, and the edges whose
destination lies in it) is replicated on the ``c`` ranks of *row group* ``i``::

    rank = i * c + j        i = block (row) in [0, B),  j = replica (column) in [0, c)

    row group i    = {i*c + j : j in [0, c)}     the c replicas of block i
    column group j = {i*c + j : i in [0, B)}     one replica of every block: the whole graph

In CAGNET 1.5D the sum over the ``B`` source blocks is split into ``c`` chunks of ``B / c``
blocks; replica ``j`` handles chunk ``j`` (blocks ``j*B/c .. (j+1)*B/c - 1``), receiving them by
broadcasts inside its column group, and the ``c`` partial results are summed inside the row
group. That needs ``P`` divisible by ``c^2``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ProcessLayout:
    """Where rank ``rank`` of ``world_size`` sits in the (blocks x replicas) grid."""

    world_size: int
    rank: int
    replication: int = 1

    def __post_init__(self) -> None:
        P, c = self.world_size, self.replication
        if P < 1 or not 0 <= self.rank < P:
            raise ValueError(f"rank {self.rank} outside world of size {P}")
        if c < 1 or P % (c * c):
            raise ValueError(f"replication c={c} needs world_size divisible by c^2 = {c * c}, "
                             f"got world_size={P}")

    @property
    def num_blocks(self) -> int:
        """``B = P / c`` node blocks."""
        return self.world_size // self.replication

    @property
    def block(self) -> int:
        """The block (row) ``i`` this rank holds."""
        return self.rank // self.replication

    @property
    def replica(self) -> int:
        """The replica (column) index ``j`` of this rank."""
        return self.rank % self.replication

    def rank_of(self, block: int, replica: int) -> int:
        return block * self.replication + replica

    def row_ranks(self, block: int) -> list[int]:
        """The ``c`` ranks holding ``block``."""
        return [self.rank_of(block, j) for j in range(self.replication)]

    def column_ranks(self, replica: int) -> list[int]:
        """The ``B`` ranks with replica index ``replica`` (together: every block once)."""
        return [self.rank_of(i, replica) for i in range(self.num_blocks)]

    def chunk(self, replica: int) -> range:
        """Source blocks whose contribution replica ``replica`` computes in 1.5D."""
        width = self.num_blocks // self.replication
        return range(replica * width, (replica + 1) * width)

    def chunk_owner(self, block: int) -> int:
        """The replica index whose chunk contains ``block``."""
        return block // (self.num_blocks // self.replication)

    def describe(self) -> str:
        return (f"P={self.world_size} ranks, replication c={self.replication}, "
                f"B={self.num_blocks} blocks; rank {self.rank} = (block {self.block}, "
                f"replica {self.replica}); row group {self.row_ranks(self.block)}, "
                f"column group {self.column_ranks(self.replica)}")
