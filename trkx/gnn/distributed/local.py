"""Local incidence products: the on-rank part of every distributed operator.

An :class:`Incidence` is an ``R x C`` 0/1 matrix ``A`` with exactly one 1 per row
(``A[k, index[k]] = 1``), e.g. the source incidence ``S`` restricted to a rank's edges. Then

    A X    = X[index]                      (row gather, ``index_select``)
    A^T E  = CSR(A^T) @ E                  (column sums, CSR SpMM: the fast scatter on CPU)

Sums of bfloat16/float16 rows are computed and returned in float32 (no low-precision CSR
kernel on CPU). ``A^T`` is stored once in CSR form (rows sorted by column of ``A``) per dtype
and device.
"""

from __future__ import annotations

import warnings

import torch
from torch import Tensor


class Incidence:
    """One-hot-per-row incidence ``A`` (``num_rows x num_cols``) given by ``index``."""

    def __init__(self, index: Tensor, num_cols: int) -> None:
        if index.numel() and (int(index.min()) < 0 or int(index.max()) >= num_cols):
            raise ValueError(f"incidence index outside [0, {num_cols})")
        self.index = index.to(torch.int64).contiguous()
        self.num_cols = int(num_cols)
        order = torch.argsort(self.index, stable=True)
        counts = torch.bincount(self.index, minlength=self.num_cols)
        self._crow = torch.cat([counts.new_zeros(1), torch.cumsum(counts, 0)])
        self._col = order
        self._transposed: dict[tuple[torch.dtype, torch.device], Tensor] = {}

    @property
    def num_rows(self) -> int:
        return self.index.numel()

    def apply(self, x: Tensor) -> Tensor:
        """``A X``: rows ``x[index]``. [num_rows, f]."""
        return x.index_select(0, self.index.to(x.device))

    def apply_transposed(self, e: Tensor) -> Tensor:
        """``A^T E``: for every column the sum of the rows of ``e`` pointing to it."""
        if e.dtype not in (torch.float32, torch.float64):
            e = e.float()       # no low-precision CSR kernel on CPU; sums in float32
        if self.num_rows == 0 or self.num_cols == 0:
            return e.new_zeros(self.num_cols, e.shape[1])
        return torch.sparse.mm(self._csr_t(e.dtype, e.device), e.contiguous())

    def _csr_t(self, dtype: torch.dtype, device: torch.device) -> Tensor:
        key = (dtype, device)
        if key not in self._transposed:
            values = torch.ones(self.num_rows, dtype=dtype, device=device)
            with warnings.catch_warnings():   # "CSR support is in beta"
                warnings.filterwarnings("ignore", message=".*[Ss]parse.*")
                self._transposed[key] = torch.sparse_csr_tensor(
                    self._crow.to(device), self._col.to(device), values,
                    (self.num_cols, self.num_rows), check_invariants=False)
        return self._transposed[key]
