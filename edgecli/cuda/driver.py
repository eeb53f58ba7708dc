"""Start the CUDA driver early, on a thread of its own, while Python imports the rest.

A one-image CUDA run spends a large share of its time in the driver before any work: ``cuInit`` and
the creation of the device's primary context, which CuPy would do in turn after its own import and
those of NumPy and OpenCV, all holding the main thread. Both driver calls let go of the GIL, so made
here on a background thread they overlap those imports; CuPy's runtime then finds the driver
initialised and the primary context made (the one it uses), and goes on at once. Only the standard
library is imported here.
"""

from __future__ import annotations

import ctypes
import glob
import os
import threading

DRIVER_LIBRARY = "libcuda.so.1"
# A GPU the driver can reach shows up as one of these: /dev/nvidia0, ... on Linux, /dev/dxg
# under WSL 2 (which has no /dev/nvidia*).
DEVICE_NODES = ("/dev/nvidia[0-9]*", "/dev/dxg")


def absence_reason() -> str | None:
    """Why this machine has no NVIDIA GPU to use at all (no driver library, or no device
    node: a container started without one), in words; None where it may have one. Where
    this says no, installing CuPy cannot help."""
    try:
        ctypes.CDLL(DRIVER_LIBRARY)
    except OSError:
        return f"the NVIDIA driver, {DRIVER_LIBRARY}, is not installed"
    if not any(glob.glob(pattern) for pattern in DEVICE_NODES):
        return "no NVIDIA device node (/dev/nvidia*)"
    return None


def _primary_context(device: int):
    """The driver and ``device``'s primary context, retained for the life of the process (CuPy's
    runtime uses this same context); None where there is no driver or no such device (the
    backend check reports what is wrong, in its own words)."""
    try:
        driver = ctypes.CDLL(DRIVER_LIBRARY)
    except OSError:
        return None
    handle, context = ctypes.c_int(), ctypes.c_void_p()
    if driver.cuInit(0) != 0 or driver.cuDeviceGet(ctypes.byref(handle), device) != 0:
        return None
    if driver.cuDevicePrimaryCtxRetain(ctypes.byref(context), handle) != 0:
        return None
    return driver, context


def make_current(device: int) -> None:
    """Make ``device``'s primary context current on the calling thread (as a CUDA runtime's
    cudaSetDevice does), for a library with a runtime of its own, nvJPEG's, to find it. Never
    raises: where there is no driver or no such device, the library's own call says so."""
    found = _primary_context(device)
    if found is not None:
        driver, context = found
        driver.cuCtxSetCurrent(context)


def start_driver(device: int) -> threading.Thread:
    """Initialise the CUDA driver and ``device``'s primary context on a daemon thread; return
    the thread. Never raises: where there is no driver or no such device, it does nothing."""
    thread = threading.Thread(
        target=_primary_context, args=(device,), name="edgecli-cuda-driver", daemon=True
    )
    thread.start()
    return thread


def visible_devices() -> list[str]:
    """The CUDA devices this process may use, as the ids a child's ``CUDA_VISIBLE_DEVICES``
    takes to see each one alone (this process's own ``CUDA_VISIBLE_DEVICES`` entries, where it
    has one); [] where there is no driver or no device."""
    try:
        driver = ctypes.CDLL(DRIVER_LIBRARY)
    except OSError:
        return []
    count = ctypes.c_int()
    if driver.cuInit(0) != 0 or driver.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return []
    inherited = os.environ.get("CUDA_VISIBLE_DEVICES")
    if inherited is None:
        return [str(i) for i in range(count.value)]
    return [part.strip() for part in inherited.split(",")][: count.value]
