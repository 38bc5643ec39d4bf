"""Row blocks run concurrently by a kernel that releases the GIL (ONNX Runtime's
session; the compiled walk makes its own threads). Each row stays whole inside one block, so every row still adds its
trees in order on one thread: the answer does not depend on the thread count."""

from concurrent.futures import ThreadPoolExecutor

import numpy as np

__all__ = ["RowBlocks"]


class RowBlocks:
    """``run(fn, X)``: ``fn(X)`` itself, or with ``n_threads`` > 1 and at least
    ``min_rows`` rows, ``fn`` on that many row blocks at once, concatenated."""

    def __init__(self, n_threads: int, min_rows: int):
        self.n_threads = max(1, int(n_threads))
        self.min_rows = min_rows
        self._pool = None

    def run(self, fn, X: np.ndarray) -> np.ndarray:
        if self.n_threads == 1 or len(X) < self.min_rows:
            return fn(X)
        return np.concatenate(self.run_ranges(lambda start, stop: fn(X[start:stop]), len(X)))

    def run_ranges(self, fn, n_rows: int) -> list:
        """``fn(start, stop)`` on the row ranges ``run`` would cut, in order: one range
        below ``min_rows`` rows or on one thread. For a kernel writing into arrays the
        caller holds."""
        if self.n_threads == 1 or n_rows < self.min_rows:
            return [fn(0, n_rows)]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.n_threads - 1, thread_name_prefix="woodstar-rows")
        size, extra = divmod(n_rows, self.n_threads)  # np.array_split's blocks
        bounds = np.cumsum([0] + [size + (i < extra) for i in range(self.n_threads)])
        pending = [self._pool.submit(fn, int(a), int(b)) for a, b in zip(bounds[1:-1], bounds[2:])]
        done = [fn(0, int(bounds[1]))]  # the calling thread takes a block too: one hand-off fewer
        return done + [p.result() for p in pending]
