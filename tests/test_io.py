"""TrackML event I/O: real files, round trips, zip archives and every bad-input case."""

from __future__ import annotations

import gzip
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from trkx.data.io import frames_equal, iter_events, load_event, read_part, write_event
from trkx.data.schema import SCHEMAS
from trkx.files.errors import EventFileNotFoundError, TrackMLFormatError


def test_reads_the_complete_sample_event(sample_prefix: Path) -> None:
    hits, cells, particles, truth = load_event(sample_prefix)
    assert (len(hits), len(cells), len(particles), len(truth)) == (5527, 18564, 548, 5527)
    for frame, part in [(hits, "hits"), (cells, "cells"), (particles, "particles"),
                        (truth, "truth")]:
        assert list(frame.columns) == list(SCHEMAS[part])
        assert dict(frame.dtypes) == SCHEMAS[part]
    assert hits["hit_id"].is_unique


def test_reads_every_real_hit_file_on_the_detector(trackml_dir: Path) -> None:
    files = sorted((trackml_dir / "kaggle_hits").glob("event*-hits.csv.gz"))
    assert len(files) == 11
    for path in files:
        hits = read_part(path, "hits")
        assert 90_000 < len(hits) < 120_000, path
    events = list(iter_events(trackml_dir / "kaggle_hits", parts=["hits"]))
    assert [e[0] for e in events] == [2, 3, 5, 6, 1001, 1003, 1005, 1009, 1010, 1012, 1013]


def test_reads_every_real_particle_table(trackml_dir: Path) -> None:
    files = sorted((trackml_dir / "kaggle_particles").glob("event*-particles.csv.gz"))
    assert len(files) == 18
    for path in files:
        particles = read_part(path, "particles")
        assert "particle_type" not in particles.columns  # optional, absent in Kaggle tables
        assert 8_000 < len(particles) < 15_000
        assert set(np.unique(particles["q"])) <= {-1, 1}


def test_round_trip_preserves_values(tmp_path: Path, sample_prefix: Path) -> None:
    original = load_event(sample_prefix)
    parts = dict(zip(["hits", "cells", "particles", "truth"], original))
    written = write_event(tmp_path / "event000000042", **parts)
    assert sorted(p.name for p in written) == sorted(
        f"event000000042-{p}.csv.gz" for p in parts)
    again = load_event(tmp_path / "event000000042")
    for a, b in zip(original, again):
        assert frames_equal(a, b, rtol=0)  # float32 written with 9 digits round-trips exactly
    assert not list(tmp_path.glob(".*tmp"))


def test_plain_csv_and_zip_archives(tmp_path: Path, sample_prefix: Path) -> None:
    hits, truth = load_event(sample_prefix, ["hits", "truth"])
    write_event(tmp_path / "plain" / "event000000007", hits=hits, truth=truth, compress=False)
    assert (tmp_path / "plain" / "event000000007-hits.csv").is_file()
    archive = tmp_path / "events.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for path in (tmp_path / "plain").iterdir():
            z.write(path, f"train/{path.name}")
    (event_id, zhits, ztruth), = list(iter_events(archive, parts=["hits", "truth"]))
    assert event_id == 7
    assert frames_equal(zhits, hits) and frames_equal(ztruth, truth)


# ---------------------------------------------------------------------------- bad input
def _write_text(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as handle:
        handle.write(text)
    return path


GOOD_HITS = ("hit_id,x,y,z,volume_id,layer_id,module_id\n"
             "1,-69.2717,-0.812497,-1502.5,7,2,1\n"
             "2,-73.309,-8.30235,-1502.5,7,2,1\n")


def test_missing_file_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(EventFileNotFoundError, match=r"event000000001-hits\.csv.*no such file"):
        load_event(tmp_path / "event000000001", ["hits"])


def test_missing_or_misspelled_column(tmp_path: Path) -> None:
    path = _write_text(tmp_path / "event000000001-hits.csv.gz",
                       GOOD_HITS.replace("volume_id", "volum_id"))
    with pytest.raises(TrackMLFormatError,
                       match=r"hits\.csv\.gz: missing column\(s\) 'volume_id' "
                             r"\(found 'volum_id' instead\?\)"):
        read_part(path, "hits")
    path = _write_text(tmp_path / "b-hits.csv.gz", GOOD_HITS.replace(",module_id", ""))
    with pytest.raises(TrackMLFormatError, match="more fields than the header"):
        read_part(path, "hits")
    without_module = "\n".join(line.rsplit(",", 1)[0] for line in GOOD_HITS.splitlines())
    path = _write_text(tmp_path / "c-hits.csv.gz", without_module + "\n")
    with pytest.raises(TrackMLFormatError, match=r"missing column.*'module_id'"):
        read_part(path, "hits")


def test_non_numeric_value_names_column_line_and_value(tmp_path: Path) -> None:
    path = _write_text(tmp_path / "event000000001-hits.csv.gz",
                       GOOD_HITS.replace("-73.309", "abc"))
    with pytest.raises(TrackMLFormatError,
                       match=r"non-numeric value 'abc' in column 'x' at line 3"):
        read_part(path, "hits")


def test_nan_coordinates_are_rejected(tmp_path: Path) -> None:
    path = _write_text(tmp_path / "event000000001-hits.csv.gz",
                       GOOD_HITS.replace("-8.30235", "nan"))
    with pytest.raises(TrackMLFormatError, match=r"NaN value in column 'y' at line 3"):
        read_part(path, "hits")
    path = _write_text(tmp_path / "c-hits.csv.gz", GOOD_HITS.replace("-8.30235", ""))
    with pytest.raises(TrackMLFormatError, match=r"column 'y' at line 3"):
        read_part(path, "hits")


def test_hits_far_beyond_a_detector_or_none_are_named(tmp_path: Path) -> None:
    path = _write_text(tmp_path / "event000000001-hits.csv.gz",
                       GOOD_HITS.replace("-73.309", "1e30"))
    with pytest.raises(TrackMLFormatError,
                       match=r"x = 1e\+30 mm at line 3 lies beyond any detector"):
        read_part(path, "hits")
    path = _write_text(tmp_path / "event000000002-hits.csv.gz", GOOD_HITS.splitlines()[0] + "\n")
    with pytest.raises(TrackMLFormatError, match=r"no hits \(the file holds its header only\)"):
        read_part(path, "hits")


def test_duplicate_hit_id(tmp_path: Path) -> None:
    path = _write_text(tmp_path / "event000000001-hits.csv.gz",
                       GOOD_HITS.replace("\n2,", "\n1,"))
    with pytest.raises(TrackMLFormatError, match=r"duplicate hit_id 1 at line 3"):
        read_part(path, "hits")


def test_truth_rows_for_unknown_hits(tmp_path: Path) -> None:
    prefix = tmp_path / "event000000001"
    _write_text(Path(f"{prefix}-hits.csv.gz"), GOOD_HITS)
    _write_text(Path(f"{prefix}-truth.csv.gz"),
                "hit_id,particle_id,tx,ty,tz,tpx,tpy,tpz,weight\n"
                "1,0,-69.2,-0.8,-1502.5,0,0,0,0\n"
                "3,0,-73.3,-8.3,-1502.5,0,0,0,0\n")
    with pytest.raises(TrackMLFormatError,
                       match=r"truth: hit_id 3 at line 3 is not in the hits table"):
        load_event(prefix, ["hits", "truth"])


def test_hits_on_modules_absent_from_the_detector(tmp_path: Path) -> None:
    prefix = tmp_path / "event000000001"
    _write_text(Path(f"{prefix}-hits.csv.gz"), GOOD_HITS.replace(",7,2,1\n2", ",7,2,9999\n2"))
    with pytest.raises(TrackMLFormatError,
                       match=r"hit_id 1 at line 2 lies on module \(volume 7, layer 2, "
                             r"module 9999\), which is not in the detector"):
        load_event(prefix, ["hits"])
    assert len(load_event(prefix, ["hits"], detector=None)[0]) == 2


def test_unreadable_file(tmp_path: Path) -> None:
    path = tmp_path / "event000000001-hits.csv.gz"
    path.write_bytes(b"\x1f\x8b this is not gzip")
    with pytest.raises(TrackMLFormatError, match="not a readable CSV file"):
        read_part(path, "hits")


def test_failed_write_leaves_nothing_behind(tmp_path: Path, sample_prefix: Path) -> None:
    hits, truth = load_event(sample_prefix, ["hits", "truth"])
    bad_truth = truth.copy()
    bad_truth.loc[3, "hit_id"] = 10**9
    with pytest.raises(TrackMLFormatError, match="not in the hits table"):
        write_event(tmp_path / "event000000001", hits=hits, truth=bad_truth)
    assert list(tmp_path.iterdir()) == []
    bad_hits = hits.copy()
    bad_hits.loc[0, "x"] = np.nan
    with pytest.raises(TrackMLFormatError, match="column 'x'"):
        write_event(tmp_path / "event000000001", hits=bad_hits)
    assert list(tmp_path.iterdir()) == []


def test_write_rejects_a_bad_prefix_or_part(tmp_path: Path) -> None:
    frame = pd.read_csv(_write_text(tmp_path / "x.csv.gz", GOOD_HITS))
    with pytest.raises(TrackMLFormatError, match="must end in 'event' and digits"):
        write_event(tmp_path / "run1", hits=frame)
    with pytest.raises(ValueError, match="unknown event part"):
        write_event(tmp_path / "event000000001", tracks=frame)


def test_written_files_are_readable_by_others(tmp_path: Path, sample_prefix: Path) -> None:
    import os
    (hits,) = load_event(sample_prefix, ["hits"])
    old = os.umask(0o022)
    try:
        (path,) = write_event(tmp_path / "event000000001", hits=hits)
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644


def test_the_same_event_is_the_same_bytes(tmp_path: Path, sample_prefix: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A written event does not depend on when or through which temporary file it was
    written: gzip's header time is the epoch and its name the final file's (so two runs of a
    seeded simulation give byte-identical files)."""
    import time

    frames = dict(zip(["hits", "cells", "particles", "truth"], load_event(sample_prefix)))
    first = write_event(tmp_path / "a" / "event000000001", **frames)
    monkeypatch.setattr(time, "time", lambda: 2e9)       # another clock for the second write
    second = write_event(tmp_path / "b" / "event000000001", **frames)
    assert [p.read_bytes() for p in first] == [p.read_bytes() for p in second]
    with gzip.open(first[0], "rt") as handle:            # and still a gzip CSV pandas reads
        assert handle.readline().startswith("hit_id,x,y,z")
    assert frames_equal(load_event(tmp_path / "a" / "event000000001")[0], frames["hits"],
                        rtol=0)
