"""``woodstar convert model.onnx``: an ONNX-ML graph from the command line, checked
against ONNX Runtime running the same graph."""

import numpy as np
import pytest

import woodstar
from woodstar.cli import main

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")


def test_convert_an_onnx_file(tmp_path, capsys):
    from tests.frontends.onnx_ml._graphs import grid_rows, random_tree_graph, session

    rng = np.random.default_rng(7)
    model = random_tree_graph(rng, classifier=True, n_targets=3, post_transform="SOFTMAX",
                              base_values=[0.1, 0.0, -0.1], labels=["a", "b", "c"])
    path = tmp_path / "model.onnx"
    path.write_bytes(model.SerializeToString())
    output = tmp_path / "model.wz"
    assert main(["convert", str(path), "--backend", "torch", "--output", str(output)]) in (0, None)
    loaded = woodstar.load(output)
    X = grid_rows(rng, 200, 4)
    labels, _ = session(model).run(None, {"X": X})
    np.testing.assert_array_equal(loaded.predict(X), labels)
