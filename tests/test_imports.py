"""The CUDA-side modules import where CuPy is absent (as on CI), given a stand-in for it: a
name that moved, or an import that no longer resolves, fails here rather than on the GPU host.
What they do is the GPU tests' to check; the CLI and the CPU path never import them."""

from __future__ import annotations

import subprocess
import sys

import pytest

GPU_MODULES = ["edgecli.streaming", "edgecli.gpu", "edgecli.decode.gpu", "edgecli.cluster"]


@pytest.mark.parametrize("module", GPU_MODULES)
def test_gpu_module_imports_with_a_stand_in_cupy(module):
    code = (
        "import sys\nfrom unittest import mock\nsys.modules['cupy'] = mock.MagicMock()\n"
        f"import importlib\nm = importlib.import_module({module!r})\n"
        "assert 'cupy' not in sys.modules or isinstance(sys.modules['cupy'], mock.MagicMock)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
