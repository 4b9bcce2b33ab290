"""Track building from an event graph record: one track id per hit.

``TrackBuilder`` is the stage's small typed config (one-to-one with ``configs/tracks.yaml``):

- ``method="walkthrough"`` (default): see :mod:`trkx.tracks.builder.walkthrough`, over edges with
  ``score >= walk_cut``, up to ``max_layer_hits`` hits per layer, siblings admitted by
  ``sibling_ratio``. On a 110k-hit overlay of the sample event with GNN-like scores
  (``benchmarks/tracks.py``; these figures from its predecessor ``track_building.py``, commit
  0eb1b96) the defaults (0.3, 3, 0.7) gave TrackML score 0.947, efficiency 0.984 and
  fake rate 0.070, against 0.782 / 0.902 / 0.259 for the best connected-components cut (0.7);
- ``method="components"``: connected components of edges with ``score >= cc_cut``
  (:mod:`trkx.tracks.builder.components`).

With ``stitch`` (default) and hit positions, pieces of one particle that a missing edge split
apart are then joined by their helix (:mod:`trkx.tracks.builder.stitching`, tolerances
``stitch_window``, ``stitch_gap``, ``stitch_curvature``, ``stitch_angle``). On the shipped
pile-up-200 filter graphs with truth scores it lifts the efficiency at fake rate <= 0.05 from
0.896 (length 6) to 0.928 (length 5) on two validation events (findable share 0.943).

Candidates with fewer than ``L(t)`` hits are dissolved: each of their hits becomes a track of
its own (one hit, so never a candidate in evaluation). The minimum length depends on the
track's region, by its pseudorapidity ``eta_t = mean_{i in t} asinh(z_i / r_i)`` (the track
eta of :mod:`trkx.tracks.evaluate.metrics`; hits at ``pos = (r, phi, z)``):

    L(t) = min_length_forward   if |eta_t| >= forward_eta and min_length_forward is set,
           min_length           otherwise (and when the record has no ``pos``).

A real particle above the signal pT leaves ~10 hits here, while pieces of particles that the
graph stages broke apart hold 3-5, so ``L`` trades a little efficiency (particles with few
hits) for far fewer fake tracks; the GNN chooses both lengths with the cut on validation
events (trkx.tracks.tune.tuning).

A short candidate the GNN is sure of stays. With ``short_score`` set, a track ``t`` with at
least 3 hits (the fewest a track is matched with, MetricCuts.min_track_hits) but fewer than
``L(t)`` is kept when the mean score of the graph edges that join its hits,

    s_t = mean { s_ij : (i, j) in G, s_ij >= cut, track(i) = track(j) = t },

has ``s_t >= short_score``: the signal particles with few hits (forward, or produced late)
have edges the GNN scores near 1, while the broken pieces of low-pT particles, which make most
short fakes, do not (on the cells set's test events the short signal tracks' median ``s_t`` is
0.985, the short fakes' 0.80-0.87; docs/levers.md). With ``short_quality_cut`` and a
``short_quality`` model (the working point's, trkx.tracks.fit.quality) in place of that rule, such
a track stays when the model's ``q_t >= short_quality_cut``, and it answers to that model
alone: the quality cut below judges the tracks of at least ``L(t)`` hits.

A candidate the quality score doubts goes too. With ``quality_cut`` and a ``quality`` model
(both from the GNN's working point, tuned on validation events: trkx.tracks.fit.quality), every
remaining track of >= 3 hits with ``q_t < quality_cut`` is dissolved, ``q_t`` the model's
probability that the track is a particle's, from its length, edge scores, junctions and helix
fit (trkx.tracks.fit.track_table). It needs hit positions and layers; without them it is skipped.

A track takes the lone hits on its helix last. With ``extend_window_xy`` set and hit positions
and layers, every track of >= ``extend_min_hits`` hits takes the hits left alone (tracks of
one hit) that lie within ``extend_window_xy`` (transverse) and ``extend_window_z`` (along the
beam, mm) of its fitted helix, on layers it has no hit on (trkx.tracks.builder.extension; with
``extend_overlap_xy`` also a layer's second hit, where two modules overlap, whose residuals
differ from the held hit's by less than ``extend_overlap_xy`` and ``extend_overlap_z``; the
pixel hits within ``extend_pixel_xy`` / ``extend_pixel_z`` when set): the hits
whose edges the graph lost, in the pixel layers so that the track's pixel part is the
particle's, in the strips so that a piece of a particle becomes its track (on the cells set's
8 validation events: pixel hits only, the anchors' count 0.926 -> 0.941; every hit, fake rate
0.0337 -> 0.0148; docs/levers.md). The helices are the quality step's, so each track is
fitted once, and the tracks that grew once more.

With ``split_chi2_ratio`` a candidate holding a close pair that the walk's siblings took
together is split in two (trkx.tracks.builder.pair_split). Before the extension, with
``swap_chi2_ratio``, a track whose hits on a pixel layer lie off the helix of its other hits
gives them back for the lone hit of that layer on it, when the swap lowers the track's fit
chi2 by that ratio (trkx.tracks.builder.layer_swap; the windows are the
extension's pixel windows, else 1.0 / 3.0 mm): another particle's hit taken in its place.

With ``second_cut`` and its model the hits still alone are walked again below the cut
(trkx.tracks.builder.second_pass). Track ids are renumbered 0..T-1 in order of first appearance, so
they are stable and compact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from trkx.arrays import as_numpy
from trkx.tracks.builder.components import connected_component_tracks
from trkx.tracks.builder.extension import extend_tracks
from trkx.tracks.builder.graph import ScoredGraph, graph_from_record
from trkx.tracks.builder.layer_swap import SWAP_WINDOWS, swap_layer_hits
from trkx.tracks.builder.pair_split import split_pairs
from trkx.tracks.builder.second_pass import WalkOptions, second_pass
from trkx.tracks.builder.stitching import stitch_pieces
from trkx.tracks.builder.track_labels import compact_labels, dissolve_short, track_mean_score
from trkx.tracks.builder.walkthrough import walkthrough_tracks
from trkx.tracks.fit.field_map import check_field_map
from trkx.tracks.fit.helix_fit import fit_helices
from trkx.tracks.fit.quality import QualityModel
from trkx.tracks.fit.track_table import refit_rows, track_table

METHODS = ("walkthrough", "components")


@dataclass(frozen=True)
class TrackBuilder:
    """How to turn scored edges into tracks."""

    method: str = "walkthrough"
    cc_cut: float = 0.5
    walk_cut: float = 0.3
    max_layer_hits: int = 3
    sibling_ratio: float = 0.7
    min_length: int = 1
    min_length_forward: int | None = None   # |eta_t| >= forward_eta; None: min_length
    forward_eta: float = 2.0
    stitch: bool = True                  # join pieces split by a missing edge (stitching.py)
    stitch_window: float = 0.3           # |(eta, cos phi, sin phi)| between end and start
    stitch_gap: float = 350.0            # mm, transverse distance of end and start
    stitch_curvature: float = 3e-4       # 1/mm, curvature change across the gap
    stitch_angle: float = 0.05           # rad, polar-angle change across the gap
    short_score: float | None = None     # a shorter track stays at mean edge score >= this
    quality_cut: float | None = None     # tracks of quality q_t < this are dissolved
    quality: QualityModel | None = None  # its model (a config names the model's JSON file)
    short_quality_cut: float | None = None  # a shorter track stays at short-track quality >= this
    short_quality: QualityModel | None = None  # its model (a config: the file)
    extend_window_xy: float | None = None  # mm: lone hits this close to a helix join it
    extend_window_z: float = 3.0         # mm, the same along the beam
    extend_min_hits: int = 4             # tracks that extend have at least this many hits
    extend_overlap_xy: float | None = None  # mm: a layer's second hit joins when its residual
    extend_overlap_z: float = 1.0        # differs from the held hit's by less (None: never)
    extend_pixel_xy: float | None = None  # mm: the pixel hits' windows (None: the windows')
    extend_pixel_z: float | None = None
    extend_rounds: int | None = None     # extensions, each from the last refit (None: 1)
    extend_weighted_z: bool | None = None  # the helices' lines weighted by hit resolution
    swap_chi2_ratio: float | None = None  # off-helix pixel hits swapped if chi2 falls this much
    split_chi2_ratio: float | None = None  # a close pair's track split if one helix fits worse
    second_cut: float | None = None      # the second pass walks the lone hits' edges >= this
    second_quality_cut: float | None = None  # and keeps its candidates of q2_t >= this
    second_min_hits: int | None = None   # and of at least this many hits (None: 3)
    second_quality: QualityModel | None = None  # its model (a config: the file)
    field_map: str = "solenoid"          # the parameters' field (trkx.tracks.fit.field_map)

    def __post_init__(self) -> None:
        check_field_map(self.field_map)
        for name in ("quality", "short_quality", "second_quality"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, QualityModel):
                raise ValueError(f"{name} must be a quality model (a tracks config names its "
                                 "JSON file: trkx.tracks.stage_config), got "
                                 f"{type(value).__name__}")
        if self.method not in METHODS:
            raise ValueError(f"track building method {self.method!r} is not one of "
                             f"{', '.join(METHODS)}")
        for name in ("cc_cut", "walk_cut", "sibling_ratio", "short_score", "quality_cut",
                     "short_quality_cut", "second_cut", "second_quality_cut"):
            value = getattr(self, name)
            if value is not None and not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must lie in [0, 1], got {value}")
        if self.max_layer_hits < 1:
            raise ValueError(f"max_layer_hits must be >= 1, got {self.max_layer_hits}")
        for name in ("min_length", "min_length_forward"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if self.extend_window_xy is not None and (self.extend_window_xy <= 0
                                                  or self.extend_window_z <= 0):
            raise ValueError("extend_window_xy and extend_window_z must be > 0, got "
                             f"{self.extend_window_xy} and {self.extend_window_z}")
        for name in ("extend_pixel_xy", "extend_pixel_z"):
            if getattr(self, name) is not None and getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        for name in ("swap_chi2_ratio", "split_chi2_ratio"):
            if getattr(self, name) is not None and getattr(self, name) < 1.0:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.extend_rounds is not None and self.extend_rounds < 1:
            raise ValueError(f"extend_rounds must be >= 1, got {self.extend_rounds}")
        if self.extend_min_hits < 3:
            raise ValueError(f"extend_min_hits must be >= 3, got {self.extend_min_hits}")
        if self.extend_overlap_xy is not None and min(self.extend_overlap_xy,
                                                      self.extend_overlap_z) <= 0:
            raise ValueError("extend_overlap_xy and extend_overlap_z must be > 0, got "
                             f"{self.extend_overlap_xy} and {self.extend_overlap_z}")
        if self.forward_eta < 0:
            raise ValueError(f"forward_eta must be >= 0, got {self.forward_eta}")
        if self.second_min_hits is not None and self.second_min_hits < 3:
            raise ValueError(f"second_min_hits must be >= 3, got {self.second_min_hits}")
        if self.second_cut is not None and self.second_cut >= self.edge_cut:
            raise ValueError(f"second_cut must lie below the first pass's cut {self.edge_cut}, "
                             f"got {self.second_cut}")

    @property
    def lowest_cut(self) -> float:
        """The lowest score any step follows: the second pass's cut when it runs."""
        return self.edge_cut if self._second is None else min(self.edge_cut, self.second_cut)

    @property
    def _second(self) -> tuple[float, QualityModel, float, int] | None:
        """The second pass's (cut, model, model cut, fewest hits), when it runs."""
        if None in (self.second_cut, self.second_quality_cut, self.second_quality):
            return None
        return (self.second_cut, self.second_quality, self.second_quality_cut,
                self.second_min_hits or 3)

    def walk_options(self) -> WalkOptions:
        """How this builder walks and stitches (the second pass walks the same way)."""
        return WalkOptions(self.max_layer_hits, self.sibling_ratio, self.stitch,
                           self.stitch_window, self.stitch_gap, self.stitch_curvature,
                           self.stitch_angle)

    @property
    def edge_cut(self) -> float:
        """The score from which the method follows an edge: ``cc_cut`` (components) or
        ``walk_cut`` (walkthrough); edges below it are never used."""
        return self.cc_cut if self.method == "components" else self.walk_cut

    def build_graph(self, graph: ScoredGraph, pos: np.ndarray | None = None) -> np.ndarray:
        """Track id of every hit of ``graph`` (int64, compact, in order of first hit);
        ``pos`` [N, 3] = (r, phi, z) stitches pieces and places tracks in their region."""
        return self.build_graph_with_table(graph, pos)[0]

    def build_graph_with_table(self, graph: ScoredGraph, pos: np.ndarray | None = None,
                               ) -> tuple[np.ndarray, pd.DataFrame | None]:
        """:meth:`build_graph`'s track ids, and the track table (trkx.tracks.fit.track_table,
        with its ``quality``) of the final tracks of >= 3 hits, under their final ids, when
        the quality step made one (None without it). The quality step's table holds every
        candidate; a track it keeps is the same hits with the same edges after the doubted
        ones are dissolved, so its row is the final track's: one helix fit per event (and one
        more for each track the extension grows)."""
        pos = None if pos is None else np.asarray(as_numpy(pos), dtype=np.float64)
        return self.finish(self.candidates(graph, pos), graph, pos)

    def candidates(self, graph: ScoredGraph, pos: np.ndarray | None = None) -> np.ndarray:
        """The candidate tracks before any is shortened, doubted or extended: the method's
        tracks over edges at or above :attr:`edge_cut`, stitched when ``stitch`` and ``pos``,
        the close pairs split with ``split_chi2_ratio`` (and hit layers)."""
        if self.method == "components":
            labels = connected_component_tracks(graph, self.cc_cut)
        else:
            labels = walkthrough_tracks(graph, self.walk_cut, self.max_layer_hits,
                                        self.sibling_ratio)
        pos = None if pos is None else np.asarray(as_numpy(pos), dtype=np.float64)
        if pos is not None and self.stitch:
            labels = stitch_pieces(labels, pos, graph.rank, self.stitch_window, self.stitch_gap,
                                   self.stitch_curvature, self.stitch_angle, graph.layer)
        if self.split_chi2_ratio is not None and pos is not None and graph.layer is not None:
            labels = split_pairs(labels, graph, pos, self.edge_cut, self.split_chi2_ratio,
                                 self.sibling_ratio)
        return labels

    def finish(self, labels: np.ndarray, graph: ScoredGraph, pos: np.ndarray | None = None,
               candidates_table: pd.DataFrame | None = None,
               ) -> tuple[np.ndarray, pd.DataFrame | None]:
        """From :meth:`candidates`' ``labels``: the short tracks dissolved (but the sure
        ones), the doubted ones dissolved, the rest extended; the compact track ids and the
        track table (:meth:`build_graph_with_table`). The tuner (trkx.tracks.tune.tuning) finishes
        one set of candidates at many working points, so it may pass ``candidates_table``, the
        track table (trkx.tracks.fit.track_table) of ``labels`` on the edges at or above
        :attr:`edge_cut`, made once: dissolving a track leaves the rows of the others as they
        were (a row reads its own hits, the edges that touch them and the hits around its
        helix), so the quality step reads those rows instead of fitting every track again."""
        hit_eta = None
        if pos is not None:
            pos = np.asarray(as_numpy(pos), dtype=np.float64)
            hit_eta = np.arcsinh(pos[:, 2] / np.maximum(pos[:, 0], 1e-9))
        sure, table, judged = None, None, pos is not None and graph.layer is not None
        if self.short_quality_cut is not None and self.short_quality is not None and judged:
            table = (scored_track_table(labels, pos, graph, self.edge_cut, self.quality)
                     if candidates_table is None else _scored(candidates_table, self.quality))
            sure = self._sure_by_model(labels, table)
        elif self.short_score is not None:
            above = graph.score >= self.edge_cut
            sure = track_mean_score(labels, graph.src[above], graph.dst[above],
                                    graph.score[above]) >= self.short_score
        kept = dissolve_short(labels, self.min_length, self.min_length_forward,
                              self.forward_eta, hit_eta, sure)
        spared = None
        if table is not None:   # the short tracks the model kept answer to it, not to the cut
            short = dissolve_short(labels, self.min_length, self.min_length_forward,
                                   self.forward_eta, hit_eta) != labels
            spared = np.unique(labels[short & (kept == labels)])
        labels = kept
        if self.quality_cut is not None and self.quality is not None and judged:
            if table is None and candidates_table is not None:
                table = _scored(candidates_table, self.quality)
            labels, table = self._drop_doubted(labels, pos, graph, table, spared)
        elif table is not None:
            table = table[np.isin(table["track_id"].to_numpy(), labels)
                          & (table["n_hits"].to_numpy() >= 3)].reset_index(drop=True)
        if self.swap_chi2_ratio is not None and pos is not None and graph.layer is not None:
            labels, table = self._swap(labels, pos, graph.layer, table)
        if self.extend_window_xy is not None and pos is not None and graph.layer is not None:
            labels, table = self._extend(labels, pos, graph.layer, table)
        if self._second is not None and judged:   # the lone hits walked again (second_pass.py)
            labels, added = second_pass(labels, graph, pos, *self._second, self.walk_options())
            if table is not None:       # without a quality step the table stays None
                table = pd.concat([table, added], ignore_index=True)
        final = compact_labels(labels)
        if table is None:
            return final, None
        ids, first_hit = np.unique(labels, return_index=True)
        table["track_id"] = final[first_hit[np.searchsorted(ids, table["track_id"].to_numpy())]]
        return final, table.sort_values("track_id", ignore_index=True)

    def _sure_by_model(self, labels: np.ndarray, table: pd.DataFrame) -> np.ndarray:
        """Per hit, whether its candidate track has >= 3 hits and short-track quality
        ``>= short_quality_cut`` (``table``: the candidates' track table)."""
        good = table["track_id"].to_numpy()[(table["n_hits"].to_numpy() >= 3) & (
            self.short_quality.score(table) >= self.short_quality_cut)]
        return np.isin(labels, good)

    def _drop_doubted(self, labels: np.ndarray, pos: np.ndarray, graph: ScoredGraph,
                      table: pd.DataFrame | None = None, spared: np.ndarray | None = None,
                      ) -> tuple[np.ndarray, pd.DataFrame]:
        """Dissolve the tracks of >= 3 hits with ``q_t < quality_cut`` but those of ``spared``
        (ids); the track table of the others (ids of the returned labels). ``table``: the
        candidates' table, whose rows of the tracks still in ``labels`` are theirs."""
        if table is None:
            table = scored_track_table(labels, pos, graph, self.edge_cut, self.quality)
        else:
            table = table[np.isin(table["track_id"].to_numpy(), labels)]
        long = table["n_hits"].to_numpy() >= 3
        ids = table["track_id"].to_numpy()
        spared = np.isin(ids, spared) if spared is not None else np.zeros(len(ids), bool)
        doubted_ids = ids[long & ~spared & (table["quality"].to_numpy() < self.quality_cut)]
        doubted = np.isin(labels, doubted_ids)
        labels = labels.copy()
        labels[doubted] = labels.max() + 1 + np.arange(int(doubted.sum()))
        kept = table[long & ~np.isin(table["track_id"].to_numpy(), doubted_ids)]
        return labels, kept.reset_index(drop=True)

    def _extend(self, labels: np.ndarray, pos: np.ndarray, layer: np.ndarray,
                table: pd.DataFrame | None) -> tuple[np.ndarray, pd.DataFrame | None]:
        """Extension (module docstring) from the helices of ``table`` (fitted here when the
        quality step made none), ``extend_rounds`` times: the grown tracks' rows of ``table``
        are fitted again, and the next round extends from them."""
        x, y = pos[:, 0] * np.cos(pos[:, 1]), pos[:, 0] * np.sin(pos[:, 1])
        for _ in range(self.extend_rounds or 1):
            helices = table
            if table is None:
                size = np.bincount(labels)[labels]
                helices = fit_helices(np.where(size >= self.extend_min_hits, labels, -1), x, y,
                                      pos[:, 2], layer // 1000).frame()
            labels, grown = extend_tracks(labels, pos, layer, helices, self.extend_window_xy,
                                          self.extend_window_z, min_hits=self.extend_min_hits,
                                          overlap=None if self.extend_overlap_xy is None else
                                          (self.extend_overlap_xy, self.extend_overlap_z),
                                          pixel_windows=self._pixel_windows(),
                                          weighted_z=bool(self.extend_weighted_z))
            if len(grown) == 0:
                break
            if table is not None:
                table = refit_rows(table, labels, x, y, pos[:, 2], layer, grown)
        return labels, table

    def _swap(self, labels: np.ndarray, pos: np.ndarray, layer: np.ndarray,
              table: pd.DataFrame | None) -> tuple[np.ndarray, pd.DataFrame | None]:
        """The layer swap (trkx.tracks.builder.layer_swap) in the pixel hits' windows (else
        layer_swap.SWAP_WINDOWS); the rows of ``table`` of the tracks that changed refitted."""
        windows = self._pixel_windows() or SWAP_WINDOWS
        labels, swapped = swap_layer_hits(labels, pos, layer, windows, self.swap_chi2_ratio)
        if table is not None and len(swapped):
            x, y = pos[:, 0] * np.cos(pos[:, 1]), pos[:, 0] * np.sin(pos[:, 1])
            table = refit_rows(table, labels, x, y, pos[:, 2], layer, swapped)
        return labels, table

    def _pixel_windows(self) -> tuple[float, float] | None:
        """The pixel hits' extension windows (None: the same as every hit's)."""
        if self.extend_pixel_xy is None and self.extend_pixel_z is None:
            return None
        return (self.extend_window_xy if self.extend_pixel_xy is None else self.extend_pixel_xy,
                self.extend_window_z if self.extend_pixel_z is None else self.extend_pixel_z)

    def build(self, record) -> np.ndarray:
        """Track id of every hit of an event record with ``edge_index`` and ``scores`` (edges
        below the method's cut are dropped before the graph is sorted: they are never used)."""
        return self.build_with_table(record)[0]

    def build_with_table(self, record) -> tuple[np.ndarray, pd.DataFrame | None]:
        """:meth:`build`'s track ids and :meth:`build_graph_with_table`'s track table."""
        return self.build_graph_with_table(
            graph_from_record(record, min_score=self.lowest_cut),
            getattr(record, "pos", None))


def scored_track_table(labels: np.ndarray, pos: np.ndarray, graph: ScoredGraph, cut: float,
                       quality: QualityModel | None) -> pd.DataFrame:
    """The track table of ``labels``' tracks of >= 3 hits (the builder judges no other; their
    rows are the same without the others') on the edges of ``graph`` at or above ``cut``, with
    each track's quality ``q_t`` (module docstring; 1 without a model)."""
    labels = np.asarray(labels, dtype=np.int64)
    if len(labels):
        labels = np.where(np.bincount(labels)[labels] >= 3, labels, -1)
    above = graph.score >= cut
    return _scored(track_table(labels, pos, graph.layer // 1000, graph.layer % 1000,
                               graph.src[above], graph.dst[above], graph.score[above]), quality)


def _scored(table: pd.DataFrame, quality: QualityModel | None) -> pd.DataFrame:
    """A copy of the track table with each track's quality ``q_t`` (1 without a model)."""
    return table.assign(quality=quality.score(table) if quality is not None else 1.0)
