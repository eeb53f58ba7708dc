// CUDA's kernel language, as far as plain kernels use it, for the host's C++ compiler: a .cu
// file whose kernels use no shared memory, barriers, atomics or warp functions compiles as C++
// with this header first, and EMULATE(kernel) exports a launcher that runs each thread of a
// grid in turn. tests/cuda_host.py builds and calls it.
//
// Running threads one after another is faithful only where no thread waits for another:
// __shared__ and __syncthreads are left undefined, so a kernel that needs them fails to build.
#pragma once

#include <tuple>
#include <type_traits>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
// __restrict__ is the compiler's own (GCC and Clang).

struct uint3 {
    unsigned x, y, z;
};
using dim3 = uint3;

// The running thread's indices; thread-local, so launches on several host threads (ctypes
// lets go of the GIL) do not mix them up.
static thread_local uint3 threadIdx, blockIdx;
static thread_local dim3 blockDim, gridDim;

// CUDA's min and max take either argument type; these only one, so a kernel mixing types fails
// to build here rather than convert differently.
template <typename T>
__forceinline__ T min(T a, T b) { return b < a ? b : a; }
template <typename T>
__forceinline__ T max(T a, T b) { return a < b ? b : a; }

namespace cuda_host {

// A kernel parameter's type as one letter (struct module's codes; 'p' any pointer): the
// Python side checks each argument against it, as a mismatch would misread on a GPU.
template <typename T>
constexpr char code() {
    using U = std::remove_cv_t<T>;
    if constexpr (std::is_pointer_v<U>) return 'p';
    else if constexpr (std::is_same_v<U, int>) return 'i';
    else if constexpr (std::is_same_v<U, unsigned>) return 'I';
    else if constexpr (std::is_same_v<U, long long>) return 'q';
    else if constexpr (std::is_same_v<U, unsigned long long>) return 'Q';
    else if constexpr (std::is_same_v<U, float>) return 'f';
    else static_assert(!sizeof(T), "a kernel parameter type cuda_host does not know");
}

template <typename... P>
const char* signature(void (*)(P...)) {
    static const char codes[] = {code<P>()..., '\0'};
    return codes;
}

// args[i] points at parameter i's value, as cuLaunchKernel's kernelParams do.
template <typename... P, std::size_t... I>
void launch(void (*kernel)(P...), const unsigned* grid, const unsigned* block, void** args,
            std::index_sequence<I...>) {
    const std::tuple<P...> values{*static_cast<std::remove_cv_t<P>*>(args[I])...};
    gridDim = {grid[0], grid[1], grid[2]};
    blockDim = {block[0], block[1], block[2]};
    for (unsigned bz = 0; bz < grid[2]; ++bz)
        for (unsigned by = 0; by < grid[1]; ++by)
            for (unsigned bx = 0; bx < grid[0]; ++bx) {
                blockIdx = {bx, by, bz};
                for (unsigned tz = 0; tz < block[2]; ++tz)
                    for (unsigned ty = 0; ty < block[1]; ++ty)
                        for (unsigned tx = 0; tx < block[0]; ++tx) {
                            threadIdx = {tx, ty, tz};
                            std::apply(kernel, values);
                        }
            }
}

template <typename... P>
void launch(void (*kernel)(P...), const unsigned* grid, const unsigned* block, void** args) {
    launch(kernel, grid, block, args, std::index_sequence_for<P...>{});
}

}  // namespace cuda_host

// emulate_<kernel>(grid[3], block[3], args) runs the grid; signature_<kernel>() gives its
// parameters' codes.
#define EMULATE(kernel)                                                                       \
    extern "C" void emulate_##kernel(const unsigned* grid, const unsigned* block, void** args) { \
        cuda_host::launch(kernel, grid, block, args);                                          \
    }                                                                                          \
    extern "C" const char* signature_##kernel() { return cuda_host::signature(kernel); }
