// cuda/png.cu for the host (tests/cuda_host.py): KERNEL_FILE is its path.
#include "shim.h"

#include KERNEL_FILE

EMULATE(png_unfilter_to_bgr)
