"""`import tilegrad` never imports torch (torch is the optional extra `tilegrad[torch]`), and
tilegrad.torch says how to get torch when it is missing."""

import subprocess
import sys


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_import_tilegrad_does_not_import_torch():
    result = _run("import sys, numpy as np, tilegrad as tg\n"
                  "tg.silu_backward(np.ones(4, np.float32), np.zeros(4, np.float32))\n"
                  "print('torch' in sys.modules)")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_tilegrad_torch_without_torch_names_the_extra():
    # A meta-path finder that refuses torch stands in for an environment without it.
    code = ("import sys\n"
            "class NoTorch:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'torch' or name.startswith('torch.'):\n"
            "            raise ImportError('No module named ' + repr(name))\n"
            "sys.meta_path.insert(0, NoTorch())\n"
            "try:\n"
            "    import tilegrad.torch\n"
            "except ImportError as e:\n"
            "    print(e)\n")
    result = _run(code)
    assert result.returncode == 0, result.stderr
    assert "pip install 'tilegrad[torch]'" in result.stdout
