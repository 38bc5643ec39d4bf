"""Woodstar's benchmark suite: every route end to end against the native libraries
and the other runtimes, in one interleaved run. ``woodstar bench`` (or
``python -m benchmarks``) runs it; see docs/benchmarks.md for the method.

Layout: ``models`` trains and caches the benchmark models, ``candidates`` builds the
things timed (woodstar routes discovered from the registries, and peers),
``harness`` measures, ``report`` writes the Markdown report, plots and routing table.
"""
