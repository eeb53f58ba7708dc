// Kernels that try tests/cuda_host_src/shim.h's barriers, warp functions and atomics
// (tests/test_cuda_host.py). They are CUDA C and build with nvcc as they are.
#define BLOCK 256

// Each block sums its 256 values by halving in shared memory.
extern "C" __global__ void block_sums(const int* values, int* sums) {
    __shared__ int part[BLOCK];
    const unsigned t = threadIdx.x;
    part[t] = values[blockIdx.x * BLOCK + t];
    __syncthreads();
    for (unsigned half = BLOCK / 2; half > 0; half /= 2) {
        if (t < half) part[t] += part[t + half];
        __syncthreads();
    }
    if (t == 0) sums[blockIdx.x] = part[0];
}

// Reads its neighbour's slot with no barrier after the writes: a race.
extern "C" __global__ void racy_neighbours(int* out) {
    __shared__ int slot[BLOCK];
    const unsigned t = threadIdx.x;
    slot[t] = int(t) + 1;
    out[t] = slot[(t + 1) % BLOCK];
}

// Every warp function, one output column each: out[8 * thread + k].
extern "C" __global__ void warp_functions(const int* values, int width, int delta, int* out) {
    const unsigned t = threadIdx.x;
    const int v = values[t];
    int* mine = out + 8 * t;
    mine[0] = __shfl_sync(0xffffffffu, v, delta, width);
    mine[1] = __shfl_up_sync(0xffffffffu, v, unsigned(delta), width);
    mine[2] = __shfl_down_sync(0xffffffffu, v, unsigned(delta), width);
    mine[3] = __shfl_xor_sync(0xffffffffu, v, delta, width);
    mine[4] = int(__ballot_sync(0xffffffffu, v & 1));
    mine[5] = __any_sync(0xffffffffu, v & 1);
    mine[6] = __all_sync(0xffffffffu, v & 1);
    // Only the even lanes, a mask of their own.
    mine[7] = (t & 1) == 0 ? __shfl_xor_sync(0x55555555u, v, 2) : -1;
}

// A 64-bit value and a float move through a shuffle whole.
extern "C" __global__ void wide_shuffles(const unsigned long long* wide, const float* reals,
                                         unsigned long long* wide_out, float* reals_out) {
    const unsigned t = threadIdx.x;
    wide_out[t] = __shfl_down_sync(0xffffffffu, wide[t], 1u);
    reals_out[t] = __shfl_xor_sync(0xffffffffu, reals[t], 1);
}

extern "C" __global__ void histogram(const int* values, int n, unsigned* counts) {
    const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) atomicAdd(&counts[values[i]], 1u);
}

// What a GPU leaves undefined, one case per `which`.
extern "C" __global__ void undefined(int which, int* out) {
    const unsigned t = threadIdx.x;
    if (which == 0) {  // a barrier only the even threads reach
        if ((t & 1) == 0) __syncthreads();
    } else if (which == 1) {  // a thread leaves before the barrier
        if (t == 5) return;
        __syncthreads();
    } else if (which == 2) {  // the mask leaves out the caller
        out[t] = __shfl_sync(0xfffffffeu, int(t), 1);
    } else if (which == 3) {  // lane 3 is named but never comes
        if (t != 3) out[t] = __shfl_sync(0xffffffffu, int(t), 0);
    } else if (which == 4) {  // reads lane 1, which the mask leaves out
        if ((t & 1) == 0) out[t] = __shfl_sync(0x55555555u, int(t), 1);
    }
    out[t] = 1;
}
