"""A/B of the ONNX-ML leaf-index graph cut into tree blocks.

The onnx backend exports a forest classifier as one ``TreeEnsemble`` node whose every
tree is its own target (each row's leaf ids, ``onnx_ml.leaf_index_model``). With many
targets ONNX Runtime's kernel walks a row through every tree before the next row, so
the whole forest's nodes are read for every row. The candidate writes the same trees as
several nodes of ``B`` trees each (their ids joined by ``Concat``): each node walks all
rows through fewer trees, whose nodes stay in cache. The outputs are the same ids.

Only the ids are timed (the gather and ordered sum after them are the same for every
candidate): one session per block size, one intra-op thread (as the backend runs it),
the ids of every candidate checked equal first, then ``--rounds`` rounds calling every
candidate in a shuffled order.

Usage: PYTHONPATH=. python -m benchmarks.ab_onnx_tree_blocks [--models rf_100x8,rf_50x20]
       [--rows 1,100,1000,20000] [--blocks 0,50,25,10,5,1] [--rounds 7]
       [--output benchmarks/results/onnx_tree_blocks.json]
(block 0: the whole forest in one node, the shipped export).
"""

import statistics
from pathlib import Path

import numpy as np

import woodstar
from benchmarks._ab import ab_arguments, int_list, interleaved_ms, write_results
from benchmarks.models import MODEL_SPECS, load_model, test_rows

OUT = Path(__file__).parent / "results" / "onnx_tree_blocks.json"


def _session(ens, block, n_features):
    """An ONNX Runtime session: rows (N, F) float32 -> leaf ids (N, trees)."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    from woodstar.lowering.trees._common import node_thresholds
    from woodstar.runtimes import onnx_ml

    thresholds = node_thresholds(ens, "float32")
    n_trees = int(ens.n_trees)
    size = block or n_trees
    nodes, parts = [], []
    for first in range(0, n_trees, size):
        last = min(n_trees, first + size)
        lists = onnx_ml._NodeLists()
        for t in range(first, last):
            tree_nodes, leaf_nodes = onnx_ml._tree_arrays(ens, t, thresholds)
            lists.add_tree(tree_nodes, [t - first] * len(leaf_nodes), [float(n) for n in leaf_nodes])
        node = lists.model(last - first, n_features, np.float32).graph.node[0]
        node.output[0], node.name = f"ids_{first}", f"trees_{first}"
        nodes.append(node)
        parts.append(node.output[0])
    if len(parts) == 1:
        nodes[0].output[0] = "Y"
    else:
        nodes.append(helper.make_node("Concat", parts, ["Y"], axis=1))
    graph = helper.make_graph(
        nodes, "tree_blocks", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, n_features])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, n_trees])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21),
                                                    helper.make_opsetid("ai.onnx.ml", 5)])
    model.ir_version = 10
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def measure(models, rows_list, blocks, rounds):
    from woodstar.ir.passes import fold_base_score

    results = []
    for name in models:
        spec = MODEL_SPECS[name]
        converted = woodstar.convert(load_model(spec), "onnx")
        ens = fold_base_score(converted.ir.ensemble)
        sessions = {f"block{b}": _session(ens, b, int(ens.n_features)) for b in blocks}
        for n_rows in rows_list:
            X = test_rows(spec, n_rows)
            calls = {k: (lambda s: lambda: s.run(None, {"X": X}))(s) for k, s in sessions.items()}
            first = None
            for key, call in calls.items():  # the same ids from every candidate
                ids = call()[0]
                assert first is None or np.array_equal(ids, first), key
                first = ids
            inner = max(1, 20_000 // n_rows)

            def repeated(call):
                return lambda: [call() for _ in range(inner)]

            times = interleaved_ms({k: repeated(c) for k, c in calls.items()}, rounds)
            base = times["block0"]
            row = {"model": name, "threads": 1, "rows": n_rows, "inner_calls": inner,
                   "median_ms": {k: statistics.median(v) / inner for k, v in times.items()},
                   "ratio_to_one_node": {k: statistics.median(a / b for a, b in zip(v, base))
                                         for k, v in times.items()}}
            results.append(row)
            print(name, n_rows, "  ".join(f"{k} {row['median_ms'][k]:.4f} ms "
                                          f"({row['ratio_to_one_node'][k]:.2f})" for k in times),
                  flush=True)
    return results


def main(argv=None):
    parser = ab_arguments(__doc__, "rf_100x8,rf_50x20", "1,100,1000,20000", 7, OUT)
    parser.add_argument("--blocks", default="0,50,25,10,5,1", type=int_list)
    args = parser.parse_args(argv)
    import onnxruntime

    results = measure(args.models, args.rows, args.blocks, args.rounds)
    write_results(args.output, results, onnxruntime=onnxruntime.__version__)


if __name__ == "__main__":
    main()
