// tests/cuda_host_src/shim_probe.cu for the host (tests/test_cuda_host.py).
#include "shim.h"

#include KERNEL_FILE

EMULATE(block_sums)
EMULATE(racy_neighbours)
EMULATE(warp_functions)
EMULATE(wide_shuffles)
EMULATE(histogram)
EMULATE(undefined)
