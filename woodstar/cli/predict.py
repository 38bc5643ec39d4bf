"""``woodstar predict SAVED --input FILE --output FILE``: score a file in batches.

The input is read a batch at a time and never held whole in memory: ``.npy`` is
memory-mapped (read without pickle), ``.csv`` is read in chunks (first line: column
names), ``.parquet`` by record batches (needs pyarrow). The output (``.npy``,
``.csv`` or ``.parquet``) is written a batch at a time too; a ``.npy`` output goes
through a temporary file next to it, because its header needs the final row count.
A progress bar goes to stderr (tqdm, a dependency; a plain built-in bar if it cannot be
imported; ``--quiet`` turns it off).
"""

import os
import sys
import tempfile

READERS = (".npy", ".csv", ".parquet")
WRITERS = (".npy", ".csv", ".parquet")


def register(subparsers):
    parser = subparsers.add_parser("predict", help="score a .npy/.csv/.parquet file with a saved model",
                                   description=__doc__.split("\n\n")[0])
    parser.add_argument("saved", metavar="SAVED", help="a file written by 'woodstar convert' or save()")
    parser.add_argument("--input", "-i", required=True, help="rows to score (.npy, .csv, .parquet)")
    parser.add_argument("--output", "-o", required=True, help="where to write (.npy, .csv, .parquet)")
    parser.add_argument("--method", default="predict",
                        help="predict (default), predict_proba, decision_function, score_samples or transform")
    parser.add_argument("--batch-rows", type=int, default=65536, help="rows per batch (default 65536)")
    parser.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: as saved)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--spark", metavar="MASTER", default=None,
                        help="score a Parquet file or folder through Spark: local[N] or a master "
                             "URL; --output becomes a folder of part files, in input order")
    parser.add_argument("--keep", action="append", metavar="COLUMN",
                        help="with --spark: input column(s) to copy next to the scores (ids); "
                             "repeat or separate with commas")
    parser.set_defaults(handler=run)


def _fail(message):
    print(f"woodstar predict: {message}", file=sys.stderr)
    return 1


# --------------------------------------------------------------------- readers
def _read_npy(path, rows):
    import numpy as np  # here, not at the top: `woodstar --help` stays light

    X = np.load(path, mmap_mode="r", allow_pickle=False)
    if X.ndim != 2:
        raise ValueError(f"{path} holds a {X.ndim}-D array; expected 2-D (rows, features)")

    def batches():
        for start in range(0, X.shape[0], rows):
            yield np.asarray(X[start:start + rows])

    return X.shape[0], batches()


def _read_csv(path, rows):
    import pandas as pd

    def batches():
        with pd.read_csv(path, chunksize=rows) as reader:
            yield from reader

    return None, batches()


def _read_parquet(path, rows):
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ValueError("reading .parquet needs pyarrow: pip install pyarrow") from None
    parquet = pq.ParquetFile(path)

    def batches():
        for batch in parquet.iter_batches(batch_size=rows):
            yield batch.to_pandas()

    return parquet.metadata.num_rows, batches()


# --------------------------------------------------------------------- writers
class _NpyWriter:
    def __init__(self, path):
        self.path = path
        directory = os.path.dirname(os.path.abspath(path))
        handle, self.tmp = tempfile.mkstemp(prefix=".woodstar-", suffix=".part", dir=directory)
        self.file = os.fdopen(handle, "wb")
        self.dtype, self.shape_tail, self.rows = None, None, 0

    def write(self, values, columns):
        import numpy as np

        if self.dtype is None:
            self.dtype, self.shape_tail = values.dtype, values.shape[1:]
        values = np.ascontiguousarray(values, dtype=self.dtype)
        self.file.write(values.tobytes())
        self.rows += values.shape[0]

    def close(self):
        import numpy as np

        self.file.close()
        try:
            header = {"descr": np.lib.format.dtype_to_descr(self.dtype or np.dtype(np.float64)),
                      "fortran_order": False, "shape": (self.rows, *(self.shape_tail or ()))}
            with open(self.path, "wb") as out, open(self.tmp, "rb") as part:
                np.lib.format.write_array_header_2_0(out, header)
                while True:
                    block = part.read(1 << 24)
                    if not block:
                        break
                    out.write(block)
        finally:
            os.unlink(self.tmp)

    def abort(self):
        self.file.close()
        if os.path.exists(self.tmp):
            os.unlink(self.tmp)


class _CsvWriter:
    def __init__(self, path):
        self.path, self.first = path, True

    def write(self, values, columns):
        import pandas as pd

        pd.DataFrame(values.reshape(len(values), -1), columns=columns).to_csv(
            self.path, mode="w" if self.first else "a", header=self.first, index=False)
        self.first = False

    def close(self):
        if self.first:
            open(self.path, "w").close()

    abort = close


class _ParquetWriter:
    def __init__(self, path):
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise ValueError("writing .parquet needs pyarrow: pip install pyarrow") from None
        self.path, self.writer = path, None

    def write(self, values, columns):
        import pyarrow as pa
        import pyarrow.parquet as pq

        values = values.reshape(len(values), -1)
        table = pa.table({c: values[:, i] for i, c in enumerate(columns)})
        if self.writer is None:
            self.writer = pq.ParquetWriter(self.path, table.schema)
        self.writer.write_table(table)

    def close(self):
        if self.writer is not None:
            self.writer.close()

    abort = close


def _columns(method, values, model):
    import numpy as np

    if values.ndim == 1:
        return [method]
    classes = getattr(model, "classes_", None)
    if method == "predict_proba" and isinstance(classes, np.ndarray) and len(classes) == values.shape[1]:
        return [f"proba_{c}" for c in classes]
    return [f"{method}_{i}" for i in range(values.shape[1])]


def _plain(values):
    """Object arrays (string labels) cannot go to .npy without pickle: make them text."""
    import numpy as np

    values = np.asarray(values)
    return values.astype(str) if values.dtype.kind == "O" else values


def _fixed_label_dtype(model):
    import numpy as np

    classes = getattr(model, "classes_", None)
    if isinstance(classes, np.ndarray) and classes.dtype.kind in "OU":
        return np.asarray([str(c) for c in classes]).dtype
    return None


class _PlainBar:
    """The progress bar when tqdm cannot be imported: one line on stderr, redrawn at
    most ten times a second."""

    def __init__(self, total, file=None):
        import time

        self._clock = time.monotonic
        self.total, self.n, self._drawn = total, 0, None
        self.file = file or sys.stderr

    def _draw(self):
        if self.total:
            self.file.write(f"\r{self.n}/{self.total} rows ({100 * self.n // self.total}%)")
        else:
            self.file.write(f"\r{self.n} rows")
        self.file.flush()
        self._drawn = self._clock()

    def update(self, n):
        self.n += n
        if self._drawn is None or self._clock() - self._drawn >= 0.1:
            self._draw()

    def close(self):
        self._draw()
        self.file.write("\n")
        self.file.flush()


def _progress(total, quiet):
    if quiet:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return _PlainBar(total)
    return tqdm(total=total, unit="rows", file=sys.stderr, dynamic_ncols=True)


def run(args):
    import numpy as np

    import woodstar
    from woodstar.exceptions import WoodstarError

    if args.spark:
        from ..spark._cli import run as run_on_spark  # woodstar/spark/_cli.py

        return run_on_spark(args)
    if args.keep:
        return _fail("--keep is used with --spark")
    in_ext = os.path.splitext(args.input)[1].lower()
    out_ext = os.path.splitext(args.output)[1].lower()
    if in_ext not in READERS:
        return _fail(f"--input must end in {', '.join(READERS)} (got {args.input})")
    if out_ext not in WRITERS:
        return _fail(f"--output must end in {', '.join(WRITERS)} (got {args.output})")
    if args.batch_rows < 1:
        return _fail("--batch-rows must be at least 1")
    try:
        model = woodstar.load(args.saved, device=args.device)
    except (WoodstarError, ValueError, OSError) as error:
        return _fail(str(error))
    method = getattr(model, args.method, None)
    if args.method.startswith("_") or method is None:
        available = [m for m in ("predict", "predict_proba", "decision_function", "score_samples",
                                 "transform")
                     if hasattr(model, m)]
        return _fail(f"{type(model).__name__} has no method {args.method!r}; "
                     f"available: {', '.join(available)}")
    try:
        reader = {".npy": _read_npy, ".csv": _read_csv, ".parquet": _read_parquet}[in_ext]
        total, batches = reader(args.input, args.batch_rows)
        writer = {".npy": _NpyWriter, ".csv": _CsvWriter, ".parquet": _ParquetWriter}[out_ext](args.output)
    except (ValueError, OSError) as error:
        return _fail(str(error))
    label_dtype = _fixed_label_dtype(model) if args.method == "predict" else None
    bar = _progress(total, args.quiet)
    rows = 0
    try:
        for batch in batches:
            values = method(batch)
            if isinstance(values, list):  # multi-output classifiers: one block per output
                values = np.hstack(values)
            values = _plain(values)
            if label_dtype is not None and values.dtype.kind == "U":
                values = values.astype(label_dtype)
            writer.write(values, _columns(args.method, values, model))
            rows += len(values)
            if bar is not None:
                bar.update(len(values))
    except (WoodstarError, ValueError, OSError) as error:
        writer.abort()
        return _fail(str(error))
    finally:
        if bar is not None:
            bar.close()
    writer.close()
    print(f"wrote {rows} rows of {args.method} to {args.output}", file=sys.stderr)
    return 0
