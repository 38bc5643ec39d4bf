"""A measuring run's time budget and its progress bar (``woodstar calibrate`` and the
benchmark harness).

With a budget the bar counts seconds, not cells: it fills as the budget is spent, so
what it shows as left is the time the run may still take, never a guess from the
cells done so far (cells differ a hundredfold in cost). The run starts no work that
the budget cannot hold: the caller asks ``fits`` before each build and cell, and
records what it skips. Without a budget the bar counts cells. The bar needs tqdm
(the ``bench`` extra); without it the run is silent."""

import sys
import time

__all__ = ["Budget"]


class Budget:
    def __init__(self, seconds, n_cells, progress=True, clock=time.monotonic):
        self.seconds = None if seconds is None else float(seconds)
        self.n_cells = n_cells
        self._clock = clock
        self._start = clock()
        self._cells = 0
        self._bar = self._make_bar(progress)

    def _make_bar(self, enabled):
        if not enabled:
            return None
        try:
            from tqdm import tqdm
        except ImportError:
            return None
        if self.seconds is None:
            return tqdm(total=self.n_cells, unit="cell", dynamic_ncols=True, file=sys.stderr)
        return tqdm(total=self.seconds, dynamic_ncols=True, file=sys.stderr,
                    bar_format="{desc}: {percentage:3.0f}%|{bar}|{postfix}")

    # ---------------------------------------------------------------- time
    def elapsed(self) -> float:
        return self._clock() - self._start

    def left(self) -> float:
        """Seconds left (infinite without a budget)."""
        return float("inf") if self.seconds is None else max(0.0, self.seconds - self.elapsed())

    def fits(self, predicted_s) -> bool:
        """Whether work predicted to take ``predicted_s`` seconds fits in what is left
        (nothing fits in a spent budget)."""
        left = self.left()
        return left > 0 and predicted_s <= left

    def skip_reason(self, what, predicted_s=None) -> str:
        need = "" if predicted_s is None else f" (predicted {predicted_s:.1f} s)"
        return (f"{what}{need} not run: {self.left():.0f} s left of the "
                f"{self.seconds:.0f} s budget")

    # ---------------------------------------------------------------- display
    def write(self, text):
        if self._bar is not None:
            self._bar.write(text)
        else:
            print(text, file=sys.stderr)

    def tick(self, description, cells=0):
        """Count ``cells`` done and redraw: seconds spent and left, cells done."""
        self._cells += cells
        if self._bar is None:
            return
        self._bar.set_description_str(description, refresh=False)
        if self.seconds is None:
            self._bar.update(cells)
            return
        self._bar.n = min(self.seconds, self.elapsed())
        self._bar.set_postfix_str(
            f"{self.elapsed():.0f} s spent, at most {self.left():.0f} s left of "
            f"{self.seconds:.0f} s; cells {self._cells}/{self.n_cells}", refresh=False)
        self._bar.refresh()

    def close(self):
        if self._bar is not None:
            if self.seconds is not None:
                self.tick("done")
            self._bar.close()
