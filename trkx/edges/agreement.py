"""How well an edge agrees with its best continuation: the triplet cue, as edge inputs.

In the barrel of a wide luminous region (sigma_z 50 mm) one edge's own geometry no longer
separates a track's edges from the fakes: every straight line from the beam line is plausible.
What the edges of one track share is their trajectory (trkx.edges.geometry.edge_trajectory):
the same z0 at the beam line and the same turning rate phislope ~ 1 / (2R). A fake edge between
hits of two tracks rarely has a neighbour edge that continues it with the same z0 and phislope.
Message passing could learn that comparison, but a summed aggregation over 10-20 edges per hit,
most of them fakes, dilutes the one continuation that agrees; this module computes it.

At a hit h with position p_h = (r_h, z_h) [mm], an edge with other hit a points outward when
(p_a - p_h) . p_h >= 0 (away from the beam spot: larger r in the barrel, larger |z| on a disk)
and inward otherwise. An inward edge e and an outward edge f at the same hit form a
continuation (a triplet a - h - b). Their disagreement, from the trajectories (z0 [m], phislope
[rad/m], the same for i -> j as for j -> i):

    d(e, f) = sqrt( ((z0_e - z0_f) / Z0_SCALE)^2 + ((phislope_e - phislope_f) / SLOPE_SCALE)^2 )

The agreement inputs of an edge e = (i, j) are, for h = i then h = j,

    g_h(e) = min(CLIP, min_f d(e, f)) / CLIP        over the continuations f of e at h

in [0, 1]: 0 for a perfect continuation, 1 where none is within CLIP or none exists (the first
and last hit of a track). A track's edges have a small g at every hit but its ends; a fake
edge between two tracks' hits has a continuation that agrees only by chance.

Along the track (:func:`along_track_agreement`). z0 and phislope are measured from the beam
line, so the edges of a secondary made 50 mm out disagree as a fake's do (docs/levers.md: the
GNN's cut loses the secondaries there). What a helix keeps wherever it starts is its dip and its
curvature. With each edge of a continuation oriented along the track, v_e = p_h - p_a and
v_f = p_b - p_h in 3D, its dip cot = v_z / |v_xy| (clipped to [-COT_CLIP, COT_CLIP]; constant
along a helix, dz over the transverse arc) and its transverse direction psi = atan2(v_y, v_x):

    d'(e, f) = sqrt( ((cot_e - cot_f) / COT_SCALE)^2 + (kappa / CURVATURE_SCALE)^2 ),
    kappa = 2 sin(wrap(psi_f - psi_e)) / |v_e + v_f|_xy        (the three hits' circle, 1/mm)

and g'_h(e) as g_h(e) with d' for d. A signal track above 1 GeV turns by less than 6e-4 mm^-1
in the 2 T field; a random triplet rarely has both a small dip change and a small curvature.
(The dip as a polar angle separated worse: its changes shrink by sin^2 theta in the forward
region, where fakes then pass as easily; docs/levers.md.)

The continuations at a hit with d_in inward and d_out outward edges number d_in d_out (about 9
million on a pile-up-200 event's filter-stage graph of 1 million edges). On the CPU a compiled
kernel (trkx.edges.agreement_kernels) visits each once per hit and keeps the minima (0.09 s on event
21001's 1.07M edges, 2 threads); elsewhere (the GPU's path) torch enumerates them in chunks of
at most ``chunk_pairs``, so that memory stays bounded, and reduces each chunk (0.32 s on the
same graph on the CPU in float32). Both compute in float64 from the float32 positions and
round g once to float32, so they give the same values.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from trkx.edges.geometry import edge_trajectory
from trkx.runtime.device import runs_compiled

#: Columns of :func:`edge_agreement`: the best continuation's disagreement at each hit.
AGREEMENT_FEATURES = 2
#: The scale of a z0 difference [m]: 10 mm, about a barrel strip hit's z uncertainty.
Z0_SCALE = 0.01
#: The scale of a phislope difference [rad/m]: a sixth of the turning rate at pT = 1 GeV.
SLOPE_SCALE = 0.05
#: The scale of a change of the dip cot(theta) = v_z / |v_xy| between consecutive segments.
COT_SCALE = 0.02
#: Dips beyond this (segments within 1/50 of the beam axis's direction) are clipped.
COT_CLIP = 50.0
#: The scale of a three-hit curvature [1/mm]: a third of the curvature at pT = 1 GeV in 2 T.
CURVATURE_SCALE = 2e-4
#: Disagreements beyond this many scales read as "no continuation".
CLIP = 10.0
DEFAULT_CHUNK_PAIRS = 4_000_000


def _chunk_bounds(pair_counts: Tensor, chunk_pairs: int) -> list[tuple[int, int]]:
    """Consecutive slices of entries whose pair counts sum to <= chunk_pairs (or one entry)."""
    ends = torch.cumsum(pair_counts, 0)
    bounds, start, done = [], 0, 0
    n = int(pair_counts.numel())
    while start < n:
        stop = max(int(torch.searchsorted(ends, done + chunk_pairs, right=True)), start + 1)
        bounds.append((start, stop))
        done = int(ends[stop - 1])
        start = stop
    return bounds


Cue = tuple[Callable[[Tensor, Tensor, Tensor, Tensor], Tensor], Callable[[Tensor, Tensor], Tensor]]


#: Devices whose agreements come from the compiled kernel (trkx.edges.agreement_kernels: each
#: continuation visited once, nothing materialised); elsewhere (a GPU), or without numba, the
#: torch enumeration below. Both compute in float64 and round g once to float32. Tests empty it
#: to run the GPU's path on the CPU.
COMPILED_DEVICES: tuple[str, ...] = ("cpu",)


def compiled(pos: Tensor) -> bool:
    """Whether the agreements of hits on ``pos``'s device come from the compiled kernel."""
    return runs_compiled(pos, COMPILED_DEVICES)


def edge_agreement(pos: Tensor, edge_index: Tensor,
                   chunk_pairs: int = DEFAULT_CHUNK_PAIRS) -> Tensor:
    """[E, 2] float32 agreement (g_i, g_j) of each edge i -> j of ``edge_index`` [2, E] with
    its best continuation at each of its hits (the module docstring), for hits at ``pos``
    [N, 3] = (r, phi, z) in mm and rad, on the device of ``pos`` (``chunk_pairs``: the torch
    path's bound on the continuations held at once)."""
    return _agreements(pos, edge_index, chunk_pairs, beam_line=True, along_track=False)


def along_track_agreement(pos: Tensor, edge_index: Tensor,
                          chunk_pairs: int = DEFAULT_CHUNK_PAIRS) -> Tensor:
    """[E, 2] float32 agreement (g'_i, g'_j) of each edge with its best continuation measured
    along the track (dip and three-hit curvature: the module docstring), as
    :func:`edge_agreement` for the same arguments."""
    return _agreements(pos, edge_index, chunk_pairs, beam_line=False, along_track=True)


def both_agreements(pos: Tensor, edge_index: Tensor,
                    chunk_pairs: int = DEFAULT_CHUNK_PAIRS) -> Tensor:
    """[E, 4]: :func:`edge_agreement` then :func:`along_track_agreement`, the same values, from
    one enumeration of the continuations (the sort and the pairs are shared)."""
    return _agreements(pos, edge_index, chunk_pairs, beam_line=True, along_track=True)


def _agreements(pos: Tensor, edge_index: Tensor, chunk_pairs: int, beam_line: bool,
                along_track: bool) -> Tensor:
    """The cues asked for, by the compiled kernel on the CPU, else by the torch enumeration;
    both in float64 from the float32 positions, g rounded once to float32."""
    if chunk_pairs < 1:
        raise ValueError(f"chunk_pairs must be >= 1, got {chunk_pairs}")
    pos = pos.float().double()          # the float32 positions, exactly, in float64
    edge_index = edge_index.long()
    if compiled(pos):
        from trkx.edges.agreement_kernels import agreements

        src, dst = edge_index.contiguous().numpy()
        trajectory = (edge_trajectory(pos, edge_index) if beam_line
                      else pos.new_zeros((0, 2)))
        g = agreements(src, dst, pos.contiguous().numpy(), trajectory.contiguous().numpy(),
                       beam_line, along_track, Z0_SCALE, SLOPE_SCALE, COT_SCALE, COT_CLIP,
                       CURVATURE_SCALE, CLIP)
        return torch.from_numpy(g).float()
    cues = ([_beam_line_cue(pos, edge_index)] if beam_line else []) + \
        ([_along_track_cue(pos)] if along_track else [])
    return _best_continuations(pos, edge_index, chunk_pairs, cues).float()


def _beam_line_cue(pos: Tensor, edge_index: Tensor) -> Cue:
    """Entry rows (z0, phislope) scaled, and d^2 of the module docstring (``pos``'s dtype)."""
    trajectory = edge_trajectory(pos, edge_index)

    def per_entry(edge: Tensor, hits: Tensor, others: Tensor, outward: Tensor) -> Tensor:
        return torch.stack([trajectory[edge, 0] / Z0_SCALE,
                            trajectory[edge, 1] / SLOPE_SCALE], dim=1)

    def disagreement(inner: Tensor, outer: Tensor) -> Tensor:
        return (inner[:, 0] - outer[:, 0]) ** 2 + (inner[:, 1] - outer[:, 1]) ** 2

    return per_entry, disagreement


def _along_track_cue(pos: Tensor) -> Cue:
    """Entry rows (dip scaled, psi, v_x, v_y) of each edge oriented along the track, and d'^2
    (``pos``'s dtype)."""
    xyz = torch.stack([pos[:, 0] * torch.cos(pos[:, 1]),
                       pos[:, 0] * torch.sin(pos[:, 1]), pos[:, 2]], dim=1)

    def per_entry(edge: Tensor, hits: Tensor, others: Tensor, outward: Tensor) -> Tensor:
        sign = outward.to(pos.dtype) * 2 - 1               # along the track: inner -> outer
        v = (xyz[others] - xyz[hits]) * sign[:, None]
        dip = (v[:, 2] / torch.hypot(v[:, 0], v[:, 1]).clamp_min(1e-3)).clamp(-COT_CLIP, COT_CLIP)
        return torch.stack([dip / COT_SCALE, torch.atan2(v[:, 1], v[:, 0]), v[:, 0], v[:, 1]],
                           dim=1)

    def disagreement(inner: Tensor, outer: Tensor) -> Tensor:
        turn = torch.remainder(outer[:, 1] - inner[:, 1] + math.pi, 2 * math.pi) - math.pi
        chord = torch.hypot(inner[:, 2] + outer[:, 2], inner[:, 3] + outer[:, 3])
        kappa = 2 * torch.sin(turn) / chord.clamp_min(1e-3)
        return (inner[:, 0] - outer[:, 0]) ** 2 + (kappa / CURVATURE_SCALE) ** 2

    return per_entry, disagreement


def _best_continuations(pos: Tensor, edge_index: Tensor, chunk_pairs: int,
                        cues: list[Cue]) -> Tensor:
    """[E, 2 C] g per edge end and cue: ``min(CLIP, min_f sqrt(d^2)) / CLIP`` over the
    continuations, the two columns of each cue side by side.

    An entry is an edge at one of its hits; a cue's ``per_entry(edge, hit, other hit,
    outward)`` gives each entry's feature row (entries sorted by hit, inward before outward),
    and its ``disagreement(inner rows, outer rows)`` the squared disagreement d^2 of the
    continuations (inward entry, outward entry) at the same hit. The sort and the pairs are
    made once for all cues."""
    n_edges, n_hits = edge_index.shape[1], pos.shape[0]
    device = pos.device
    best = torch.full((len(cues), 2 * n_edges), CLIP * CLIP, device=device, dtype=pos.dtype)
    if n_edges:
        rz = pos[:, [0, 2]]
        # entry k: edge k mod E at hit hits[k] (k < E: its source, else its target), sorted
        # by hit and, within a hit, inward entries before outward ones
        hits = torch.cat([edge_index[0], edge_index[1]])
        others = torch.cat([edge_index[1], edge_index[0]])
        outward = ((rz[others] - rz[hits]) * rz[hits]).sum(1) >= 0
        key = 2 * hits + outward.long()
        order = torch.argsort(key, stable=True)
        count = torch.bincount(key, minlength=2 * n_hits)
        first = torch.cumsum(count, 0) - count
        rows = [per_entry(order % n_edges, hits[order], others[order], outward[order])
                for per_entry, _ in cues]
        inward = torch.nonzero(~outward[order]).squeeze(1)     # sorted positions
        hit_in = hits[order[inward]]
        partners = count[2 * hit_in + 1]                        # outward edges at its hit
        out_first = first[2 * hit_in + 1]
        best_sorted = torch.full((len(cues), 2 * n_edges), CLIP * CLIP, device=device,
                                 dtype=pos.dtype)
        for start, stop in _chunk_bounds(partners, chunk_pairs):
            counts = partners[start:stop]
            ahead = torch.cumsum(counts, 0) - counts
            at_out = torch.arange(int(counts.sum()), device=device) + torch.repeat_interleave(
                out_first[start:stop] - ahead, counts)
            at_in = inward[start:stop]
            for c, (_, disagreement) in enumerate(cues):
                d2 = disagreement(torch.repeat_interleave(rows[c][at_in], counts, dim=0),
                                  rows[c][at_out])
                best_sorted[c, at_in] = torch.segment_reduce(
                    d2, "min", lengths=counts, unsafe=True, initial=CLIP * CLIP)
                best_sorted[c].scatter_reduce_(0, at_out, d2, reduce="amin")
        best[:, order] = best_sorted
    g = best.clamp(max=CLIP * CLIP).sqrt() / CLIP               # [C, 2E]
    return g.view(len(cues), 2, n_edges).permute(2, 0, 1).reshape(n_edges, 2 * len(cues)) \
        .contiguous()
