"""Where a one-row call of an exporting backend goes: the runtime's own smallest call,
woodstar's smallest program through the container, and tree models, one thread.

For each exporting backend (torch.jit, tvm, onnx; ``torch``, the default CPU route, as
the yardstick) it times, on one float32 row of 28 features:

* ``runtime floor``: the runtime alone running a program that adds 0 to its input,
  with the input's and output's conversions a caller needs (NumPy in, NumPy out):
  a ``torch.jit.trace`` under inference mode; ONNX Runtime's ``InferenceSession.run``
  of a one-node graph; for TVM, none (its smallest program through woodstar stands in);
* ``scaler``: a StandardScaler's ``transform`` converted by woodstar (the smallest
  program, with the container's input check and dispatch);
* the tree models' ``predict_proba``, checked against the source library first.

Rounds run every candidate's calls in a row in a shuffled order; reported: the median
µs per call over rounds.

Usage: PYTHONPATH=. python -m benchmarks.exporting_floor [--models rf_100x8,...]
       [--backends torch.jit,tvm,onnx] [--rounds 7] [--output FILE]
"""

import random
import statistics
import time
from pathlib import Path

import numpy as np
import torch

import woodstar
from benchmarks._ab import ab_arguments, write_results
from benchmarks.ab_exporting import _spec
from benchmarks.models import load_model, test_rows

OUT = Path(__file__).parent / "results" / "exporting_floor.json"
N_FEATURES = 28


def _torch_jit_floor():
    class AddZero(torch.nn.Module):
        def forward(self, x):
            return x + 0.0

    traced = torch.jit.trace(AddZero(), torch.zeros(1, N_FEATURES))

    def call(row):
        with torch.inference_mode():
            return traced(torch.from_numpy(row)).numpy()
    return call


def _onnx_floor():
    import onnx
    import onnxruntime
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Add", ["X", "zero"], ["Y"])], "add_zero",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, N_FEATURES])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, N_FEATURES])],
        [helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    session = onnxruntime.InferenceSession(model.SerializeToString(), options,
                                           providers=["CPUExecutionProvider"])
    onnx.checker.check_model(model)
    return lambda row: session.run(None, {"X": row})[0]


FLOORS = {"torch.jit": _torch_jit_floor, "onnx": _onnx_floor}


def _scaler(backend):
    from sklearn.preprocessing import StandardScaler

    X = np.random.default_rng(0).normal(size=(500, N_FEATURES))
    converted = woodstar.convert(StandardScaler().fit(X), backend, extra_config={"n_threads": 1})
    return converted.transform


def _time_us(fn, row, calls):
    start = time.perf_counter()
    for _ in range(calls):
        fn(row)
    return 1e6 * (time.perf_counter() - start) / calls


def measure(models, backends, rounds, calls=2000):
    torch.set_num_threads(1)
    row = np.ascontiguousarray(np.random.default_rng(1).normal(size=(1, N_FEATURES)),
                               dtype=np.float32)
    fns = {}
    for backend in ("torch", *backends):
        if backend in FLOORS:
            fns[(backend, "runtime floor")] = FLOORS[backend]()
        fns[(backend, "scaler")] = _scaler(backend)
    rows = {}
    for name in models:
        spec = _spec(name)
        model = load_model(spec, progress=lambda *a: None)
        if "n_jobs" in model.get_params():
            model.set_params(n_jobs=1)
        X = np.ascontiguousarray(test_rows(spec, 1), dtype=np.float32)
        rows[name] = X
        expected = model.predict_proba(X)
        for backend in ("torch", *backends):
            fn = woodstar.convert(model, backend, extra_config={"n_threads": 1}).predict_proba
            np.testing.assert_allclose(fn(X), expected, rtol=0, atol=1e-6,
                                       err_msg=f"{name} on {backend}")
            fns[(backend, name)] = fn
    times = {key: [] for key in fns}
    for _ in range(rounds):
        for key in random.sample(list(fns), len(fns)):
            times[key].append(_time_us(fns[key], rows.get(key[1], row), calls))
    results = [{"backend": b, "call": what, "model": what, "threads": 1, "rows": 1,
                "rounds": rounds, "median_us": statistics.median(v), "round_us": v}
               for (b, what), v in times.items()]
    for r in results:
        print(f"{r['backend']:10s} {r['call']:14s} {r['median_us']:8.1f} µs", flush=True)
    return results


def main(argv=None):
    parser = ab_arguments(__doc__, "rf_100x8,xgb_300x8,gbdt_100x3", "1", 7, OUT)
    parser.add_argument("--backends", default="torch.jit,tvm,onnx",
                        type=lambda s: [b for b in s.split(",") if b])
    args = parser.parse_args(argv)
    write_results(args.output, measure(args.models, args.backends, args.rounds))


if __name__ == "__main__":
    main()
