"""Column names and dtypes of the TrackML event files.

The schema follows the TrackML challenge's data description (and the reference ``trackml``
library's reader), except that identifiers are 64-bit: ``hit_id`` is stored as int64 so that
tensors built from it match the event record of docs/design.md without a cast.
"""

from __future__ import annotations

import numpy as np

PARTS: tuple[str, ...] = ("hits", "cells", "particles", "truth")

SCHEMAS: dict[str, dict[str, np.dtype]] = {
    "hits": {
        "hit_id": np.dtype("int64"),
        "x": np.dtype("float32"),
        "y": np.dtype("float32"),
        "z": np.dtype("float32"),
        "volume_id": np.dtype("int32"),
        "layer_id": np.dtype("int32"),
        "module_id": np.dtype("int32"),
    },
    "cells": {
        "hit_id": np.dtype("int64"),
        "ch0": np.dtype("int32"),
        "ch1": np.dtype("int32"),
        "value": np.dtype("float32"),
    },
    "particles": {
        "particle_id": np.dtype("int64"),
        "particle_type": np.dtype("int32"),
        "vx": np.dtype("float32"),
        "vy": np.dtype("float32"),
        "vz": np.dtype("float32"),
        "px": np.dtype("float32"),
        "py": np.dtype("float32"),
        "pz": np.dtype("float32"),
        "q": np.dtype("int32"),
        "nhits": np.dtype("int32"),
    },
    "truth": {
        "hit_id": np.dtype("int64"),
        "particle_id": np.dtype("int64"),
        "tx": np.dtype("float32"),
        "ty": np.dtype("float32"),
        "tz": np.dtype("float32"),
        "tpx": np.dtype("float32"),
        "tpy": np.dtype("float32"),
        "tpz": np.dtype("float32"),
        "weight": np.dtype("float32"),
    },
}

#: Columns that real files may lack (the Kaggle particle tables have no ``particle_type``).
OPTIONAL_COLUMNS: dict[str, frozenset[str]] = {
    "hits": frozenset(),
    "cells": frozenset(),
    "particles": frozenset({"particle_type"}),
    "truth": frozenset(),
}

#: Columns that must never be NaN (positions; truth momenta of noise hits may be anything).
NAN_FORBIDDEN: dict[str, tuple[str, ...]] = {
    "hits": ("x", "y", "z"),
    "cells": ("value",),
    "particles": ("vx", "vy", "vz", "px", "py", "pz"),
    "truth": ("tx", "ty", "tz", "weight"),
}

#: mm: a hit coordinate beyond this is no detector's (TrackML's: r < 1.1 m, |z| < 3 m).
MAX_HIT_COORDINATE_MM = 100_000.0

#: Columns whose values must be unique within one file.
UNIQUE_KEYS: dict[str, str | None] = {
    "hits": "hit_id",
    "cells": None,
    "particles": "particle_id",
    "truth": "hit_id",
}
