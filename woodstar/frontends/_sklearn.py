"""What the scikit-learn frontends share: the fitted check and the estimator head."""

from ..exceptions import NotFittedError
from ..ir import Head

__all__ = ["check_fitted", "sklearn_head", "sklearn_versions"]


def sklearn_versions():
    import sklearn

    return (("scikit-learn", sklearn.__version__),)


def check_fitted(model, attribute):
    if not hasattr(model, attribute):
        raise NotFittedError(
            f"Cannot convert {type(model).__name__}: the model is not fitted; "
            f"call fit() before convert().")


def sklearn_head(model, task, methods, **fields):
    """The head of a fitted estimator: its name, features, and whether it takes NaN."""
    names = getattr(model, "feature_names_in_", None)
    tags = model.__sklearn_tags__()
    fields.setdefault("allows_nan", bool(tags.input_tags.allow_nan))
    return Head(
        estimator=type(model).__name__,
        task=task,
        n_features=int(model.n_features_in_),
        methods=methods,
        feature_names=None if names is None else tuple(names),
        library_versions=sklearn_versions(),
        **fields,
    )
