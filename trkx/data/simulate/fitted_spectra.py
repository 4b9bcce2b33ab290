"""The particle spectra fitted to 18 real TrackML particle tables, as the simulator reads them.

``FIT`` is the packaged fit (``trkx/data/resources/fitted_spectra.json``, written by
``python -m trkx.data.simulate.spectra DIR``; :mod:`trkx.data.simulate.spectra` says what each
entry means): numbers, and lists of numbers for the quantile tables and the displaced
particles' production-point histogram. ``FIT["source"]`` names the tables it was fitted to.
"""

from __future__ import annotations

import json
from importlib import resources

FIT: dict[str, object] = json.loads(
    resources.files("trkx.data").joinpath("resources/fitted_spectra.json").read_text())
