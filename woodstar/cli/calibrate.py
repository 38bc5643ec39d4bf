"""``woodstar calibrate``: measure this machine's routing cells and write a routing
table that ``convert`` reads instead of the shipped one (woodstar/calibration.py).

It times every tree strategy on random forests of depth 2 to 12 at 1, 100 and 10 000
rows and 1, 2 and all logical CPUs' threads, within ``--budget`` seconds (300 by
default); what does not fit is skipped and listed in the table. The table goes to
``$WOODSTAR_CACHE_DIR/routing/`` (default ``~/.cache/woodstar``), keyed by CPU model
and logical CPU count, and records the woodstar version; ``woodstar backends`` says
which table is in use. Delete the file to go back to the shipped table.
"""

import json
import sys


def _csv(kind):
    return lambda text: tuple(kind(v) for v in text.split(",") if v)


def register(subparsers):
    parser = subparsers.add_parser(
        "calibrate", help="measure this machine's routing cells; write the routing table convert reads")
    parser.add_argument("--budget", type=float, default=300.0, metavar="SECONDS",
                        help="time budget for measuring (default 300); cells that do not fit are skipped")
    parser.add_argument("--threads", type=_csv(int), help="thread counts (default 1, 2 and all CPUs)")
    parser.add_argument("--depths", type=_csv(int), help="forest depths (default 2,3,4,5,6,8,10,12)")
    parser.add_argument("--batches", type=_csv(int), help="batch sizes (default 1,100,10000)")
    parser.add_argument("--trees", type=int, help="trees per forest (default 100)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--output", help="write the table here instead of the cache (not read by convert)")
    parser.add_argument("--no-progress", action="store_true")
    parser.set_defaults(handler=run)


def _check(args):
    from ..exceptions import ConstantError

    if not args.budget > 0:
        raise ConstantError(f"--budget must be positive seconds (got {args.budget!r}).")
    for name in ("threads", "depths", "batches"):
        values = getattr(args, name)
        if values is not None and (not values or min(values) < 1):
            raise ConstantError(f"--{name} takes positive integers (got {values!r}).")
    if args.trees is not None and args.trees < 1 or args.repeats < 1:
        raise ConstantError(f"--trees and --repeats take positive integers "
                            f"(got {args.trees!r}, {args.repeats!r}).")


def _moved(table, shipped, depths):
    """(changed, total): measured (threads, batch, depth) points whose first choice
    differs between the calibrated and the shipped table."""
    from ..lowering.routing import lookup

    changed = total = 0
    for entry in (e for e in table["entries"] if e["backend"] == "torch"):  # the measured ones
        for depth in depths:
            mine = lookup(table, depth, entry["batch"], entry["threads"])
            theirs = lookup(shipped, depth, entry["batch"], entry["threads"])
            if mine and theirs:
                total += 1
                changed += mine[0] != theirs[0]
    return changed, total


def run(args):
    from .. import _calibrate, calibration
    from .._budget import Budget
    from ..lowering.routing import TABLE_PATH, load_table

    _check(args)
    depths = args.depths or _calibrate.DEPTHS
    batches = args.batches or _calibrate.BATCHES
    threads = args.threads or _calibrate.default_threads()
    n_cells = len(depths) * len(batches) * len(threads)
    machine = calibration.machine()
    print(f"calibrating routing on {machine['cpu']} ({machine['logical_cpus']} logical CPUs), "
          f"woodstar {machine['woodstar']}: {n_cells} cells, budget {args.budget:.0f} s", flush=True)
    budget = Budget(args.budget, n_cells, progress=not args.no_progress)
    try:
        results = _calibrate.measure(
            budget, depths=depths, batches=batches, threads=threads,
            n_trees=args.trees or _calibrate.N_TREES, repeats=args.repeats)
    finally:
        budget.close()
    shipped = load_table(TABLE_PATH) or {}
    table = _calibrate.build_table(results, args.budget, budget.elapsed(), shipped)
    if not any(e["backend"] == "torch" for e in table["entries"]):  # the others are carried over
        print("no cell was measured within the budget; no table written", file=sys.stderr)
        return 1
    if args.output:
        from pathlib import Path

        path = Path(args.output)
        path.write_text(json.dumps(table, indent=1) + "\n")
    else:
        path = calibration.write_table(table)
    changed, total = _moved(table, shipped, depths)
    print(f"wrote {path} in {budget.elapsed():.0f} s; {len(results['cells'])} strategy cells "
          f"timed, {len(table['skipped'])} skipped for the budget")
    print(f"first choice differs from the shipped table at {changed} of {total} measured "
          f"(threads, rows, depth) points")
    return 0
