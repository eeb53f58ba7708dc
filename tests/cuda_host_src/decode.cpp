// cuda/decode.cu for the host (tests/cuda_host.py): KERNEL_FILE is its path.
#include "shim.h"

#include KERNEL_FILE

EMULATE(jpeg_planes_to_bgr)
EMULATE(nv12_to_bgr)
EMULATE(p016_to_bgr)
