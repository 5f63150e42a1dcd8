"""The message frame's columns, fetched as numpy arrays, against the rows they replace."""

from __future__ import annotations

from typing import Any

import duckdb
import numpy as np

from structrag.store.duckdb.reader import _object_column, _timestamp_column


def _rows_frame(rows: list[tuple[Any, ...]]) -> tuple[np.ndarray, np.ndarray]:
    """What message_frame built from fetchall() rows before."""
    speakers = np.empty(len(rows), dtype=object)
    speakers[:] = [r[0] for r in rows]
    stamps = np.array(
        [np.datetime64(r[1], "s") if r[1] is not None else np.datetime64("NaT") for r in rows],
        dtype="datetime64[s]",
    )
    return speakers, stamps


def test_columns_match_the_rows_they_replace() -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE m (speaker VARCHAR, ts TIMESTAMP)")
    con.execute(
        "INSERT INTO m VALUES ('Ann', '2023-05-01 10:11:12.999999'), (NULL, NULL), "
        "('Bé 🎉', '1969-12-31 23:59:59.500000'), ('', '1900-01-01 00:00:00'), "
        "('x', '2262-01-01 00:00:00.000001'), ('y', '1970-01-01 00:00:00')"
    )
    for query in (
        "SELECT * FROM m",
        "SELECT * FROM m WHERE ts IS NOT NULL",
        "SELECT * FROM m LIMIT 0",
    ):
        rows = con.execute(query).fetchall()
        found = con.execute(query).fetchnumpy()
        speakers, stamps = _rows_frame(rows)
        got_speakers = _object_column(found["speaker"])
        got_stamps = _timestamp_column(found["ts"])
        assert got_speakers.dtype == object and list(got_speakers) == list(speakers)
        assert got_stamps.dtype == stamps.dtype
        assert got_stamps.tobytes() == stamps.tobytes()
