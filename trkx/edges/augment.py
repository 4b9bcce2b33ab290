"""Training augmentation of the filter and the GNN: the whole event moved along the beam.

A prompt particle from a vertex at ``z_v`` leaves its hits where one from ``z_v + dz`` of the
same momentum would leave them shifted by ``dz`` (the solenoid field is uniform along z over
the luminous region). A graph whose hits all move by ``dz``,

    pos'_i = (r_i, phi_i, z_i + dz),        x'_i[z] = x_i[z] + dz / s_z,

keeps every difference between hits (dr, dphi, dz of an edge) and moves each edge's beam-line
intercept ``z0`` and the hits' pseudorapidities as a vertex ``dz`` further along would: the
network cannot learn the luminous region's extent as a prior of where tracks start. (The
layers do not move with the hits: an endcap hit lands off its disk by ``dz``, which the node
inputs see; the edge inputs, which the classifier leans on, do not.) Only the inputs move; the
filter's scores, the labels and the truth stay as they were, so a GNN moved alone still reads
the filter's view of where tracks start in its ``filter_score`` input: moving the filter's
training events too is what removes that prior from both (docs/levers.md).
The clusters' shapes (the cell features) give the track's direction, which a shift keeps.

``dz`` is drawn per training step from a normal distribution of width ``sigma`` (mm) by
torch's global generator, which the training driver seeds.
"""

from __future__ import annotations

import copy

import torch

from trkx.data.features import FEATURE_SCALES, POSITION_FEATURES
from trkx.data.record_type import Record

_Z = POSITION_FEATURES.index("z")


def shifted_along_beam(data: Record, dz: float) -> Record:
    """A shallow copy of ``data`` whose ``pos`` z (mm) and model input column ``z`` (scaled,
    trkx.data.features) are moved by ``dz``; every other field is shared, nothing is written in
    place."""
    out = copy.copy(data)                  # a new store over the same tensors
    offset = torch.zeros(data.pos.shape[1], dtype=data.pos.dtype, device=data.pos.device)
    offset[_Z] = dz
    out.pos = data.pos + offset
    column = torch.zeros(data.x.shape[1], dtype=data.x.dtype, device=data.x.device)
    column[_Z] = dz / FEATURE_SCALES["z"]
    out.x = data.x + column
    return out


def random_shift(data: Record, sigma: float) -> Record:
    """``data`` moved along the beam by ``dz ~ N(0, sigma^2)`` mm (unchanged when sigma is 0)."""
    if sigma <= 0:
        return data
    return shifted_along_beam(data, float(torch.randn(()) * sigma))
