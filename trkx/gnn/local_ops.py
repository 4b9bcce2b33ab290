"""Single-process :class:`~trkx.gnn.graph_ops.GraphOps`: CSR SpMM and index scatter.

Both compute, for ``E`` edges ``k = (s_k -> d_k)`` over ``N`` nodes with ``E x N`` incidence
matrices ``S`` and ``D``,

    gather(X)    = (S X, D X)           [E, f] each
    aggregate(E) = (D^T E, S^T E)       [N, f] each

and differ only in the kernels:

* :class:`CsrGraphOps` stores ``D^T`` and ``S^T`` once per graph as ``N x E`` CSR matrices and
  computes every *sum* (``D^T E``, ``S^T E`` forward; ``S^T G + D^T G'`` in the backward of the
  gather) with ``torch.sparse.mm``. The products with ``S`` and ``D`` themselves have exactly
  one non-zero per row, so ``S X`` *is* the row selection ``X[s]``; it is computed as
  ``index_select`` (the same product, and 5-6x faster here than an ``E x N`` CSR ``sparse.mm``:
  measured by ``benchmarks/gnn.py`` of commit 0eb1b96). Gradients are the adjoint products,
  written out in a custom :class:`torch.autograd.Function` (torch's own autograd does not
  differentiate ``sparse.mm`` through a CSR operand's transpose efficiently).
* :class:`ScatterGraphOps` uses ``index_select`` / ``index_add_`` and torch autograd: the way
  PyG ``MessagePassing`` with sum aggregation works.
"""

from __future__ import annotations

import warnings

import torch
from torch import Tensor

# torch's MKL CSR kernel has no bfloat16/float16 path on CPU: sums of low-precision edge rows
# are computed in float32 (also the more accurate choice) and returned as float32.
_SPMM_DTYPES = (torch.float32, torch.float64)


def check_edge_index(edge_index: Tensor, num_nodes: int) -> None:
    """Raise ``ValueError`` naming the problem if ``edge_index`` is not a valid [2, E] index."""
    if edge_index.dim() != 2 or edge_index.shape[0] != 2:
        raise ValueError(f"edge_index must have shape [2, E], got {tuple(edge_index.shape)}")
    if edge_index.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"edge_index must be an integer tensor, got {edge_index.dtype}")
    if edge_index.numel() and (int(edge_index.min()) < 0 or int(edge_index.max()) >= num_nodes):
        raise ValueError(f"edge_index holds node ids outside [0, {num_nodes}): "
                         f"min {int(edge_index.min())}, max {int(edge_index.max())}")


def transposed_incidence_csr(index: Tensor, num_nodes: int, dtype: torch.dtype,
                             rows: Tensor | None = None, total_rows: int | None = None) -> Tensor:
    """``A^T`` as an ``N x E`` CSR matrix, for the ``E x N`` incidence ``A[k, index[k]] = 1``.

    Row ``n`` of ``A^T`` lists the edges whose endpoint is ``n`` (columns sorted), so
    ``A^T E`` sums the edge rows of every node. With ``rows`` (ascending), ``A`` has a one only
    in rows ``rows[k]`` (``A[rows[k], index[k]] = 1``) of ``total_rows``: ``A^T E`` then sums
    just those rows of the whole ``E`` (no copy of the selected rows).
    """
    order = torch.argsort(index, stable=True)
    columns = order if rows is None else rows.to(index.device)[order]
    num_cols = index.numel() if total_rows is None else int(total_rows)
    counts = torch.bincount(index, minlength=num_nodes)
    crow = torch.zeros(num_nodes + 1, dtype=torch.int64, device=index.device)
    torch.cumsum(counts, dim=0, out=crow[1:])
    values = torch.ones(index.numel(), dtype=dtype, device=index.device)
    with warnings.catch_warnings():  # "CSR support is in beta": we test what we use
        warnings.filterwarnings("ignore", message=".*[Ss]parse.*")
        return torch.sparse_csr_tensor(crow, columns, values, (num_nodes, num_cols),
                                       check_invariants=False)


class Incidence:
    """A one-hot-per-row ``R x C`` incidence matrix ``A`` (``A[k, index[k]] = 1``) and its two
    products:

        A X    = X[index]                 (row gather, ``index_select``)
        A^T E  = CSR(A^T) @ E             (column sums, CSR SpMM: the fast scatter on CPU)

    ``A^T`` is built once per dtype and device (:func:`transposed_incidence_csr`). Sums of
    bfloat16/float16 rows are computed and returned in float32 (no low-precision CSR kernel
    on CPU; also the more accurate choice), with autocast off. Used whole-graph by
    :class:`CsrGraphOps` (``S`` and ``D``) and per rank by ``trkx.gnn.distributed``.

    A *row block* of a taller incidence (``rows`` given) is the restriction to the rows
    ``rows`` of a ``total_rows x C`` matrix: ``A X`` returns only those R rows, and ``A^T E``
    takes the whole ``[total_rows, f]`` edge tensor and sums only those rows (the split of the
    source incidence into own and halo parts, ``trkx.gnn.distributed.sparse1d``).

    Args:
        index: [R] column of the 1 in every row.
        num_cols: C.
        validate: check that every index lies in ``[0, C)`` (callers that checked already
            skip the device synchronisation).
        rows: [R] ascending row positions of a row block, or None (all rows, R of them).
        total_rows: rows of the whole matrix (with ``rows``).
    """

    def __init__(self, index: Tensor, num_cols: int, validate: bool = True,
                 rows: Tensor | None = None, total_rows: int | None = None) -> None:
        if validate and index.numel() and (int(index.min()) < 0
                                           or int(index.max()) >= num_cols):
            raise ValueError(f"incidence index outside [0, {num_cols})")
        if (rows is None) != (total_rows is None):
            raise ValueError("a row block needs both rows and total_rows")
        if rows is not None and rows.numel() != index.numel():
            raise ValueError(f"{rows.numel()} rows for {index.numel()} index entries")
        self.index = index.to(torch.int64).contiguous()
        self.num_cols = int(num_cols)
        self.rows = None if rows is None else rows.to(torch.int64).contiguous()
        self.total_rows = self.index.numel() if total_rows is None else int(total_rows)
        self._transposed: dict[tuple[torch.dtype, torch.device], Tensor] = {}

    @property
    def num_rows(self) -> int:
        return self.index.numel()

    def apply(self, x: Tensor) -> Tensor:
        """``A X``: rows ``x[index]``. [R, f]."""
        return x.index_select(0, self.index.to(x.device))

    def apply_transposed(self, e: Tensor) -> Tensor:
        """``A^T E``: for every column the sum of the rows of ``e`` pointing to it. [C, f];
        ``e`` has ``total_rows`` rows."""
        compute = e.dtype if e.dtype in _SPMM_DTYPES else torch.float32
        if self.num_rows == 0 or self.num_cols == 0:
            return e.new_zeros(self.num_cols, e.shape[1], dtype=compute)
        key = (compute, e.device)
        if key not in self._transposed:
            self._transposed[key] = transposed_incidence_csr(
                self.index.to(e.device), self.num_cols, compute, self.rows, self.total_rows)
        with torch.autocast(e.device.type, enabled=False):  # autocast would cast it to bf16
            return torch.sparse.mm(self._transposed[key], e.to(compute).contiguous())


class _CsrGather(torch.autograd.Function):
    """``(S X, D X)``; backward ``dX = S^T G_src + D^T G_dst`` (two CSR SpMMs)."""

    @staticmethod
    def forward(ctx, x: Tensor, ops: CsrGraphOps) -> tuple[Tensor, Tensor]:  # type: ignore[override]
        ctx.ops = ops
        ctx.x_dtype = x.dtype
        return ops.src.apply(x), ops.dst.apply(x)

    @staticmethod
    def backward(ctx, grad_src: Tensor, grad_dst: Tensor):  # type: ignore[override]
        ops = ctx.ops
        grad = ops.src.apply_transposed(grad_src).add_(ops.dst.apply_transposed(grad_dst))
        return grad.to(ctx.x_dtype), None


class _CsrAggregate(torch.autograd.Function):
    """``(D^T E, S^T E)`` (two CSR SpMMs); backward ``dE = D G_in + S G_out`` (row selections)."""

    @staticmethod
    def forward(ctx, e: Tensor, ops: CsrGraphOps) -> tuple[Tensor, Tensor]:  # type: ignore[override]
        ctx.ops = ops
        ctx.e_dtype = e.dtype
        return ops.dst.apply_transposed(e), ops.src.apply_transposed(e)

    @staticmethod
    def backward(ctx, grad_in: Tensor, grad_out: Tensor):  # type: ignore[override]
        ops = ctx.ops
        grad = ops.dst.apply(grad_in).add_(ops.src.apply(grad_out))
        return grad.to(ctx.e_dtype), None


class _EdgeListOps:
    """Sizes shared by the single-process GraphOps: ``num_nodes`` N and ``num_edges`` E, and
    the edge endpoints ``(s, d)`` (``endpoints``: the model's blocked inference path gathers
    row blocks itself, trkx.gnn.model)."""

    _num_nodes: int
    _num_edges: int

    def endpoints(self) -> tuple[Tensor, Tensor]:
        """``(s, d)``: int64 [E] sources and destinations."""
        raise NotImplementedError

    @property
    def num_nodes(self) -> int:
        return self._num_nodes

    @property
    def num_edges(self) -> int:
        return self._num_edges


class CsrGraphOps(_EdgeListOps):
    """GraphOps with CSR ``torch.sparse.mm`` for every sum (the fast path on CPU).

    Args:
        edge_index: [2, E] integer tensor, row 0 sources ``s``, row 1 destinations ``d``.
        num_nodes: N.
    """

    kind = "csr"

    def __init__(self, edge_index: Tensor, num_nodes: int) -> None:
        check_edge_index(edge_index, num_nodes)
        self._num_nodes = int(num_nodes)
        self._num_edges = int(edge_index.shape[1])
        self.src = Incidence(edge_index[0], self._num_nodes, validate=False)   # S
        self.dst = Incidence(edge_index[1], self._num_nodes, validate=False)   # D

    def endpoints(self) -> tuple[Tensor, Tensor]:
        return self.src.index, self.dst.index

    def gather(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """``(S X, D X)``."""
        return _CsrGather.apply(x, self)

    def aggregate(self, e: Tensor) -> tuple[Tensor, Tensor]:
        """``(D^T E, S^T E)``."""
        return _CsrAggregate.apply(e, self)


class ScatterGraphOps(_EdgeListOps):
    """GraphOps with ``index_select`` / ``index_add_`` (scatter-sum) and torch autograd.

    Args:
        edge_index: [2, E] integer tensor, row 0 sources ``s``, row 1 destinations ``d``.
        num_nodes: N.
    """

    kind = "scatter"

    def __init__(self, edge_index: Tensor, num_nodes: int) -> None:
        check_edge_index(edge_index, num_nodes)
        self._src = edge_index[0].long().contiguous()
        self._dst = edge_index[1].long().contiguous()
        self._num_nodes = int(num_nodes)
        self._num_edges = int(self._src.numel())

    def endpoints(self) -> tuple[Tensor, Tensor]:
        return self._src, self._dst

    def gather(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """``(S X, D X) = (X[s], X[d])``."""
        return x.index_select(0, self._src), x.index_select(0, self._dst)

    def aggregate(self, e: Tensor) -> tuple[Tensor, Tensor]:
        """``(D^T E, S^T E)``: scatter-sums of edge rows into destinations and sources."""
        shape = (self._num_nodes, e.shape[1])
        m_in = e.new_zeros(shape).index_add(0, self._dst, e)
        m_out = e.new_zeros(shape).index_add(0, self._src, e)
        return m_in, m_out
