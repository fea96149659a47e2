"""The sink's pieces that need no Spark: which Arrow batches take the values-only
path, and what the driver's commit process imports."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import pyarrow as pa

from pyspark_quasar.commit_message import QuasarCommitMessage
from pyspark_quasar.decisions import TxnRecord
from pyspark_quasar.task_writer import _values_only

SRC = Path(__file__).resolve().parents[2] / "src"
PROPS = pa.map_(pa.string(), pa.string())


def _batch(**columns: pa.Array) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [pa.array([b"a", b"b", b"c"]), *columns.values()], names=["value", *columns]
    )


def test_rows_with_nothing_but_a_value_take_the_values_only_path() -> None:
    assert _values_only(_batch())
    assert _values_only(
        _batch(
            key=pa.array([None] * 3, pa.binary()),
            properties=pa.array([[], None, []], PROPS),
            eventTime=pa.array([None] * 3, pa.timestamp("us", tz="UTC")),
            topic=pa.array([None] * 3, pa.string()),
        )
    )


def test_a_row_with_a_key_properties_event_time_or_topic_does_not() -> None:
    assert not _values_only(_batch(key=pa.array([None, b"k", None], pa.binary())))
    assert not _values_only(_batch(properties=pa.array([[], [("n", "1")], None], PROPS)))
    assert not _values_only(
        _batch(eventTime=pa.array([None, 5, None], pa.timestamp("ms", tz="UTC")))
    )
    assert not _values_only(_batch(topic=pa.array([None, "t", None], pa.string())))
    # A slice sees only its own rows' properties.
    sliced = _batch(properties=pa.array([[], None, [("n", "1")]], PROPS)).slice(0, 2)
    assert _values_only(sliced)


def test_the_driver_commit_path_does_not_import_pyarrow() -> None:
    """The driver's commit runs in a process Spark starts for the first micro-batch:
    loading the sink and unpickling the task reports must stay light."""
    record = TxnRecord(1, 2, "s-p0", 0, 0, 3)
    message = pickle.dumps(QuasarCommitMessage("s", 0, 0, 0, 3, record))
    code = (
        "import pickle, sys\n"
        "import pyspark_quasar.sink\n"
        f"m = pickle.loads({message!r})\n"
        "assert m.txn.rows == 3, m\n"
        "print('pyarrow' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": str(SRC)},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert out.stdout.strip() == "False", out.stderr
