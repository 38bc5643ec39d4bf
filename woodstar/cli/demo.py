"""``woodstar demo``: train a small forest, convert it, check parity, time both."""

import time


def register(subparsers):
    parser = subparsers.add_parser(
        "demo", help="train a small random forest, convert it, check parity and timing")
    parser.add_argument("--rows", type=int, default=10_000, help="rows to score (default 10000)")
    parser.add_argument("--trees", type=int, default=100, help="trees in the forest (default 100)")
    parser.add_argument("--seed", type=int, default=0)
    parser.set_defaults(handler=run)


def _best_of(fn, repeats=5):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return result, min(times)


def run(args):
    try:
        from sklearn.datasets import make_classification
        from sklearn.ensemble import RandomForestClassifier
    except ImportError:
        print("The demo trains a scikit-learn model: pip install 'woodstar[sklearn]'")
        return 1
    import numpy as np  # here, not at the top: `woodstar --help` stays light

    import woodstar

    X, y = make_classification(n_samples=5_000, n_features=28, n_informative=10,
                               random_state=args.seed)
    model = RandomForestClassifier(n_estimators=args.trees, max_depth=8, random_state=args.seed)
    model.fit(X, y)
    rng = np.random.default_rng(args.seed)
    X_test = rng.normal(size=(args.rows, X.shape[1])).astype(np.float32)

    start = time.perf_counter()
    converted = woodstar.convert(model, "torch")
    convert_s = time.perf_counter() - start
    print(f"Trained RandomForestClassifier({args.trees} trees, depth 8) on 5000 x 28.")
    print(f"Converted in {convert_s * 1e3:.0f} ms: {converted}")

    expected, sk_s = _best_of(lambda: model.predict_proba(X_test))
    got, ws_s = _best_of(lambda: converted.predict_proba(X_test))
    labels_equal = np.array_equal(model.predict(X_test), converted.predict(X_test))
    max_diff = float(np.abs(expected - got).max())
    print(f"Parity on {args.rows} fresh rows: labels identical = {labels_equal}, "
          f"max |probability difference| = {max_diff:.2e}")
    print(f"predict_proba: scikit-learn {sk_s * 1e3:.1f} ms, woodstar {ws_s * 1e3:.1f} ms "
          f"({sk_s / ws_s:.1f}x)")
    ok = labels_equal and max_diff <= 1e-6
    print("OK" if ok else "MISMATCH")
    return 0 if ok else 1
