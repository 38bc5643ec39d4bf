"""``import woodstar`` and the command line's parser load no heavy library: torch, the
frontends' libraries and the exporters are imported when a call needs them."""

import json
import subprocess
import sys

HEAVY = ("torch", "pandas", "sklearn", "scipy", "onnx", "onnxruntime", "tvm", "xgboost",
         "lightgbm", "catboost")


def _modules_after(code):
    script = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_import_woodstar_loads_no_heavy_library():
    loaded = _modules_after("import woodstar")
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_the_command_line_parser_loads_no_heavy_library():
    loaded = _modules_after("from woodstar.cli import build_parser\nbuild_parser()")
    assert not loaded & set(HEAVY + ("numpy",)), sorted(loaded & set(HEAVY + ("numpy",)))


def test_convert_and_subpackages_are_reached_through_the_package():
    loaded = _modules_after(
        "import woodstar\n"
        "assert callable(woodstar.convert) and callable(woodstar.load)\n"
        "assert woodstar.backends.get_backend('torch').name == 'torch'\n"
        "assert 'convert' in dir(woodstar)\n"
        "from woodstar import convert_batch\n"
        "try:\n    woodstar.no_such_thing\nexcept AttributeError:\n    pass\n"
        "else:\n    raise AssertionError('no AttributeError')")
    assert "torch" in loaded  # convert brought in what it needs
