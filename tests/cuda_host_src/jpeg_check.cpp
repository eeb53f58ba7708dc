// cuda/jpeg_check.cu for the host (tests/cuda_host.py): KERNEL_FILE is its path.
#include "shim.h"

#include KERNEL_FILE

EMULATE(jpeg_check)
