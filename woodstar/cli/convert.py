"""``woodstar convert MODEL_FILE --backend NAME --output PATH``: compile a model file
and save the result (``woodstar.load`` / ``woodstar predict`` read it back).

Model files, by extension unless ``--format`` says otherwise:

* ``.joblib``, ``.pkl``, ``.pickle``: a fitted estimator saved with joblib or pickle.
  Loading a pickle runs code from the file: use only files you trust.
* ``.txt`` (LightGBM model text file) -> ``lightgbm.Booster``;
* ``.json``, ``.ubj`` (XGBoost model) -> ``xgboost.Booster``;
* ``.cbm`` (CatBoost model) -> ``catboost.CatBoost``;
* ``.onnx`` (ONNX-ML model) -> ``onnx.ModelProto``;
* a directory saved by a Spark ML model's ``save`` (its ``metadata/`` names the class,
  e.g. ``PipelineModel``) -> that model, loaded in a local Spark session.

The loaded object goes to ``woodstar.convert`` unchanged; whether its type is supported
is the frontends' business, and their error is printed. One exception: a LightGBM or
XGBoost file of a classifier (objective binary / multiclass / multiclassova,
binary:logistic / multi:softprob / multi:softmax) is converted as a classifier, as
LGBMClassifier / XGBClassifier would be: ``predict`` gives the labels (0 to
n_classes - 1: the file does not store the training labels), ``predict_proba`` the
probabilities and ``decision_function`` the raw scores. ``--as-booster`` keeps the raw
Booster's ``predict`` (what ``Booster.predict`` returns) instead.
"""

import json
import os
import sys

FORMATS = {
    ".joblib": "pickle", ".pkl": "pickle", ".pickle": "pickle",
    ".txt": "lightgbm",
    ".json": "xgboost", ".ubj": "xgboost",
    ".cbm": "catboost",
    ".onnx": "onnx",
}


def register(subparsers):
    parser = subparsers.add_parser(
        "convert", help="convert a saved model file and save the compiled model",
        description=__doc__.split("\n\n")[0])
    parser.add_argument("model_file", metavar="MODEL_FILE")
    parser.add_argument("--backend", required=True,
                        help="torch, torch.jit, torch.compile, onnx, tvm (aliases accepted), or auto: "
                             "the fastest installed one by the benchmark's ranking")
    parser.add_argument("--output", "-o", required=True, help="where to save the compiled model")
    parser.add_argument("--test-input", metavar="FILE.npy",
                        help="an example batch (.npy, read without pickle), run once to check")
    parser.add_argument("--format", choices=sorted(set(FORMATS.values()) | {"spark"}),
                        help="the model file's format (default: from its extension)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    parser.add_argument("--extra-config", metavar="JSON", default=None,
                        help='extra_config as JSON, e.g. \'{"n_threads": 4}\'')
    parser.add_argument("--as-booster", action="store_true",
                        help="a LightGBM/XGBoost classifier file: keep Booster.predict's "
                             "output instead of labels and predict_proba")
    parser.set_defaults(handler=run)


def _fail(message):
    print(f"woodstar convert: {message}", file=sys.stderr)
    return 1


def load_model_file(path, fmt):
    """The library object a model file holds (see the module docstring)."""
    if fmt == "pickle":
        try:
            import joblib
        except ImportError:
            import pickle

            with open(path, "rb") as f:
                return pickle.load(f)  # the user's own, trusted file (see --help)
        return joblib.load(path)
    if fmt == "lightgbm":
        import lightgbm

        return lightgbm.Booster(model_file=path)
    if fmt == "xgboost":
        import xgboost

        booster = xgboost.Booster()
        booster.load_model(path)
        return booster
    if fmt == "catboost":
        import catboost

        model = catboost.CatBoost()
        model.load_model(path)
        return model
    if fmt == "onnx":
        import onnx

        return onnx.load(path)
    if fmt == "spark":
        from ..frontends.spark_ml._load import load_spark_ml

        return load_spark_ml(path)
    raise ValueError(f"unknown format {fmt!r}")


_XGB_CLASSIFIER_OBJECTIVES = ("binary:logistic", "multi:softprob", "multi:softmax")


def classifier_ir(model, fmt):
    """The IR of a LightGBM or XGBoost Booster read from a classifier's file, as a
    classifier with labels 0 .. n_classes - 1; None for any other model."""
    if fmt == "lightgbm":
        from ..frontends import lightgbm as frontend

        header, trees = frontend._read(model)  # the text format: faster than dump_model()
        objective = header["objective"].split(" ")[0]
        if objective not in frontend._CLASSIFIER_OBJECTIVES:
            return None
        n_classes = 2 if objective == "binary" else max(header["n_per_iteration"], 2)
        return frontend._ir(header, trees, model.pandas_categorical, "Booster", "classifier",
                            list(range(n_classes)), frontend._names(header["feature_names"], None))
    if fmt == "xgboost":
        from ..frontends import xgboost as frontend

        model_json = frontend._booster_json(model)
        learner = model_json["learner"]
        if learner["objective"]["name"] not in _XGB_CLASSIFIER_OBJECTIVES:
            return None
        n_classes = max(int(learner["learner_model_param"].get("num_class", 0)), 2)
        return frontend.ir_from_json(model_json, "Booster", "classifier",
                                     classes=list(range(n_classes)))
    return None


INSTALL_HINT = {"lightgbm": "lightgbm", "xgboost": "xgboost", "catboost": "catboost",
                "onnx": "onnx", "pickle": "sklearn", "spark": "spark"}


def run(args):
    import numpy as np

    import woodstar
    from woodstar.exceptions import WoodstarError

    if not os.path.exists(args.model_file):
        return _fail(f"{args.model_file}: no such file")
    from ..frontends.spark_ml._load import is_spark_ml_directory

    fmt = args.format or ("spark" if is_spark_ml_directory(args.model_file) else
                          FORMATS.get(os.path.splitext(args.model_file)[1].lower()))
    if fmt is None:
        return _fail(f"cannot tell the format of {args.model_file} from its extension; "
                     f"use --format ({', '.join(sorted(set(FORMATS.values()) | {'spark'}))})")
    extra_config = None
    if args.extra_config:
        try:
            extra_config = json.loads(args.extra_config)
        except json.JSONDecodeError as error:
            return _fail(f"--extra-config is not valid JSON: {error}")
    test_input = None
    if args.test_input:
        try:
            test_input = np.load(args.test_input, allow_pickle=False)
        except (OSError, ValueError) as error:
            return _fail(f"--test-input {args.test_input}: {error}")
    try:
        model = load_model_file(args.model_file, fmt)
    except ImportError as error:
        return _fail(f"reading a {fmt} model needs {error.name}: "
                     f"pip install 'woodstar[{INSTALL_HINT[fmt]}]'")
    except Exception as error:  # noqa: BLE001  (each library raises its own errors)
        return _fail(f"{args.model_file} could not be read as a {fmt} model: "
                     f"{type(error).__name__}: {error}")
    try:
        model_ir = None if args.as_booster else classifier_ir(model, fmt)
        if model_ir is not None:
            from .._convert import convert_ir

            converted = convert_ir(model_ir, args.backend, test_input=test_input,
                                   device=args.device, extra_config=extra_config)
        else:
            converted = woodstar.convert(model, args.backend, test_input=test_input,
                                         device=args.device, extra_config=extra_config)
        if not hasattr(converted, "save"):
            return _fail("extra_config['container'] = False returns no container to save")
        converted.save(args.output)
    except (WoodstarError, ValueError) as error:
        return _fail(str(error))
    print(f"saved {converted} to {args.output}")
    return 0
