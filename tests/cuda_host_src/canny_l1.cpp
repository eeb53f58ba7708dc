// cuda/canny.cu for the host (tests/cuda_host.py), norm l1: KERNEL_FILE is its path.
#include "shim.h"

#define CANNY_NORM CANNY_NORM_L1
#include KERNEL_FILE

EMULATE(canny_local)
EMULATE(canny_merge)
EMULATE(canny_flag)
EMULATE(canny_output)
