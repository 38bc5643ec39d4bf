"""Every gradient-boosting model class in the supported table resolves to a frontend,
and woodstar imports without the libraries installed."""

import subprocess
import sys

import pytest

from woodstar.frontends import supported_models

SUPPORTED = {
    "lightgbm": ["LGBMClassifier", "LGBMRegressor", "LGBMRanker", "Booster"],
    "xgboost": ["XGBClassifier", "XGBRegressor", "XGBRanker", "XGBRFClassifier",
                "XGBRFRegressor", "Booster"],
    "catboost": ["CatBoostClassifier", "CatBoostRegressor", "CatBoostRanker"],
}


@pytest.mark.parametrize("package", sorted(SUPPORTED))
def test_supported_table_resolves(package):
    library = pytest.importorskip(package)
    from woodstar.frontends import find_frontend

    registered = set(supported_models())
    for name in SUPPORTED[package]:
        assert (package, name) in registered
        cls = getattr(library, name)
        # find_frontend keys on the class; an unfitted instance is enough to look up.
        instance = cls.__new__(cls)
        assert callable(find_frontend(instance))


def test_woodstar_imports_without_the_libraries():
    code = ("import sys\n"
            "for name in ('lightgbm', 'xgboost', 'catboost'):\n"
            "    sys.modules[name] = None  # any import of them now fails\n"
            "import woodstar, woodstar.frontends\n"
            "assert ('lightgbm', 'LGBMClassifier') in woodstar.frontends.supported_models()\n")
    subprocess.run([sys.executable, "-c", code], check=True)
