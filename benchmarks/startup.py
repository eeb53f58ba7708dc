"""Where edgecli's start-up time goes, phase by phase, on a CUDA machine.

    PYTHONPATH=. python3 benchmarks/startup.py

Each phase runs once, in order, in a fresh process (so imports and the CUDA context are
cold, as for a user's command); the interpreter's own start is timed separately.
"""

from __future__ import annotations

import subprocess
import sys
import time

PHASES = """
import time
t = time.perf_counter()
def lap(name):
    global t
    now = time.perf_counter()
    print(f"{name}\\t{(now - t) * 1e3:.1f}")
    t = now
import numpy, cv2
lap("import numpy, cv2")
import edgecli.pipeline
lap("import edgecli.pipeline")
import cupy
lap("import cupy")
cupy.cuda.runtime.getDeviceCount()
lap("cuda: device count")
cupy.cuda.Device(0).use(); cupy.empty(1)
lap("cuda: context + first allocation")
from edgecli.backends import cuda_unusable_reason
assert cuda_unusable_reason() is None
lap("cuda_unusable_reason (kernel load)")
from edgecli.gpu import CudaBackend
from edgecli.params import Options
backend = CudaBackend(Options())
lap("CudaBackend()")
ring = backend.slab_ring(2)
frames = [numpy.full((1080, 1920, 3), i, numpy.uint8) for i in range(16)]
lap("16 1080p frames in (pageable) host memory")
filling = ring.fill(frames[0].shape, 16)
numpy.copyto(filling.inputs, numpy.stack(frames))
pending = filling.submit(16)
pending.result()
lap("first batch of 16 (pinned and device allocations, copy in, launch)")
pending.release()
filling = ring.fill(frames[0].shape, 16)
numpy.copyto(filling.inputs, numpy.stack(frames))
pending = filling.submit(16)
pending.result()
lap("second batch of 16 (buffers reused)")
"""


def main() -> None:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    print(f"python3 -c pass\t{(time.perf_counter() - start) * 1e3:.1f}")
    result = subprocess.run(
        [sys.executable, "-c", PHASES], capture_output=True, text=True, check=False
    )
    print(result.stdout, end="")
    if result.returncode:
        print(result.stderr, file=sys.stderr)
        sys.exit(result.returncode)


if __name__ == "__main__":
    main()
