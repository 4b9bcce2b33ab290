"""The bit fields of TrackML particle ids.

A TrackML ``particle_id`` packs, from the most significant bits down,

    vertex_id (12 bits) | primary_id (16) | generation (12) | secondary_id (12) | process (12)

so a primary particle has zeros in its low 36 bits, and a particle produced in the detector
material (a secondary) does not. The challenge gives the hits of secondaries zero score weight:
on the real sample event every particle with non-zero low bits has weight 0 and every other
weight follows the phase-1 formula (see ``trkx.data.weights``).
"""

from __future__ import annotations

import numpy as np

FIELDS: tuple[tuple[str, int], ...] = (
    ("vertex_id", 12), ("primary_id", 16), ("generation", 12), ("secondary_id", 12),
    ("process", 12),
)
_SHIFTS = {"process": 0, "secondary_id": 12, "generation": 24, "primary_id": 36,
           "vertex_id": 52}
_BITS = dict(FIELDS)


def encode_particle_id(vertex_id: np.ndarray, primary_id: np.ndarray,
                       generation: np.ndarray | int = 0, secondary_id: np.ndarray | int = 0,
                       process: np.ndarray | int = 0) -> np.ndarray:
    """Pack the fields into int64 particle ids (each field must fit its bit width)."""
    values = {"vertex_id": vertex_id, "primary_id": primary_id, "generation": generation,
              "secondary_id": secondary_id, "process": process}
    packed = np.zeros(np.broadcast(*values.values()).shape, dtype=np.uint64)
    for name, value in values.items():
        value = np.asarray(value, dtype=np.int64)
        if (value < 0).any() or (value >= (1 << _BITS[name])).any():
            raise ValueError(f"particle-id field {name} out of range [0, {1 << _BITS[name]})")
        packed |= value.astype(np.uint64) << np.uint64(_SHIFTS[name])
    if (packed >= np.uint64(1 << 63)).any():
        raise ValueError("vertex_id too large for a signed 64-bit particle id")
    return packed.astype(np.int64)


def decode_particle_id(particle_id: np.ndarray) -> dict[str, np.ndarray]:
    """The fields of int64 particle ids, as int64 arrays."""
    packed = np.asarray(particle_id, dtype=np.int64).astype(np.uint64)
    return {name: ((packed >> np.uint64(_SHIFTS[name]))
                   & np.uint64((1 << bits) - 1)).astype(np.int64) for name, bits in FIELDS}


def is_secondary(particle_id: np.ndarray) -> np.ndarray:
    """True for particles created in the detector (non-zero generation/secondary/process)."""
    low = np.uint64((1 << 36) - 1)
    return (np.asarray(particle_id, dtype=np.int64).astype(np.uint64) & low) != 0
