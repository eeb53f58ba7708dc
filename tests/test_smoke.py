"""The smoke test: the installed ``edgecli`` command on the bundled sample frames."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import cv2
import numpy as np
import pytest

from .helpers import edgecli_command
from .media import SAMPLE_FRAMES


def test_sample_frames_match_golden_hashes(tmp_path):
    """`edgecli run sample_frames` exits 0 and every PNG holds the expected pixels."""
    manifest = json.loads((SAMPLE_FRAMES / "expected.json").read_text())
    result = subprocess.run(
        [*edgecli_command(), "run", str(SAMPLE_FRAMES), "-o", str(tmp_path), "-q",
         "--json-summary", "-"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["frames"] == len(manifest["frames"]) == 12
    assert summary["params"] == manifest["options"] | {"png_bits": 1, "shard": None}
    written = sorted(p.name for p in tmp_path.glob("*.png"))
    assert written == sorted(manifest["frames"])
    for name, expected in manifest["frames"].items():
        data = (tmp_path / name).read_bytes()
        assert data[24] == 1, f"{name} is not a 1-bit PNG"
        edges = cv2.imread(str(tmp_path / name), cv2.IMREAD_GRAYSCALE)
        assert list(edges.shape) == expected["shape"]
        assert set(np.unique(edges)) <= {0, 255}
        digest = hashlib.sha256(np.ascontiguousarray(edges).tobytes()).hexdigest()
        assert digest == expected["edges_sha256"], name


def test_the_program_exits_with_its_codes_and_all_its_output(tmp_path):
    """The program leaves the process at once when a command returns (edgecli.cli.console):
    its output, piped, is all there, and each exit code is the command's."""
    from click.testing import CliRunner

    from edgecli.cli import main

    helped = subprocess.run([*edgecli_command(), "run", "--help"], capture_output=True,
                            text=True, timeout=120)  # fmt: skip
    assert helped.returncode == 0
    in_process = CliRunner().invoke(main, ["run", "--help"], prog_name="edgecli").output
    # The same words, however wide the terminal it thinks it has.
    assert helped.stdout.split() == in_process.split() != []
    missing = subprocess.run([*edgecli_command(), "run", str(tmp_path / "none"), "-o",
                              str(tmp_path / "out")], capture_output=True, text=True,
                             timeout=120)  # fmt: skip
    assert missing.returncode == 1
    assert missing.stderr.strip().splitlines()[-1].startswith("Error: ")
    assert "no such file or folder" in missing.stderr
    usage = subprocess.run([*edgecli_command(), "run", "--threshold", "x", "a", "-o", "b"],
                           capture_output=True, text=True, timeout=120)  # fmt: skip
    assert usage.returncode == 2 and "Traceback" not in usage.stderr


@pytest.mark.parametrize(
    "code, returncode, stderr", [(None, 0, ""), (3, 3, ""), ("boom", 1, "boom\n")]
)
def test_the_program_exits_as_sys_exit_would(code, returncode, stderr):
    """Whatever a command exits with, the program's exit status and stderr are what
    ``sys.exit`` gives: None is 0, a number itself, any other value printed, then 1."""
    program = (
        "import sys, edgecli.cli as cli\n"
        f"def main(**kwargs): sys.exit({code!r})\n"
        "cli.main = main\n"
        "cli.console()\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert (done.returncode, done.stderr) == (returncode, stderr)
