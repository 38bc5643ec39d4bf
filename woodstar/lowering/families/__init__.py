"""Model families, one module each; every module here is imported (and so registered)
when the package is."""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
