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
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.n_threads - 1, thread_name_prefix="woodstar-rows")
        first, *others = np.array_split(X, self.n_threads)
        pending = [self._pool.submit(fn, block) for block in others]
        done = [fn(first)]  # the calling thread takes a block too: one hand-off fewer
        return np.concatenate(done + [p.result() for p in pending])
