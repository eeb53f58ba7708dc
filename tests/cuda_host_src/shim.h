// CUDA's kernel language for the host's C++ compiler: a .cu file compiles as C++ with this
// header first, and EMULATE(kernel) exports a launcher that runs a grid's blocks in turn.
// tests/cuda_host.py builds and calls it.
//
// The threads of a block run as fibers on one host thread, each until it reaches
// __syncthreads, a warp function or its end; the scheduler then releases whatever can go on.
// So __shared__ memory, barriers, warp functions and atomics mean what they mean on a GPU,
// with one order of running the threads between two such points. The launcher takes that
// order (forward, reverse, or shuffled by a seed): a kernel that reads what another thread
// writes without a barrier between gives different results under two orders, which is how a
// test finds a missing barrier. What a GPU leaves undefined is an error here, reported by the
// launch: a __syncthreads that not every live thread of the block reaches, a warp function
// whose mask names a lane that has left or waits elsewhere. Blocks run one after another, so a
// kernel whose blocks wait for each other (spinning on a flag another block sets) cannot run.
// __shared__ memory keeps the last block's values (a GPU's starts undefined): tests poison
// what a kernel writes, not what it keeps in shared memory. No dynamic (extern) shared memory.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
// One copy per host thread, shared by the fibers of the block it runs.
#define __shared__ static thread_local
// __restrict__ is the compiler's own (GCC and Clang).

struct uint3 {
    unsigned x, y, z;
};
using dim3 = uint3;
constexpr int warpSize = 32;

// The running thread's indices, switched with the fiber; thread-local, so launches on several
// host threads (ctypes lets go of the GIL) do not mix them up.
static thread_local uint3 threadIdx, blockIdx;
static thread_local dim3 blockDim, gridDim;

// CUDA's min and max take either argument type; these only one, so a kernel mixing types fails
// to build here rather than convert differently.
template <typename T>
__forceinline__ T min(T a, T b) { return b < a ? b : a; }
template <typename T>
__forceinline__ T max(T a, T b) { return a < b ? b : a; }

__forceinline__ int __popc(unsigned x) { return __builtin_popcount(x); }
__forceinline__ int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
__forceinline__ int __clz(int x) { return x == 0 ? 32 : __builtin_clz(unsigned(x)); }
__forceinline__ int __clzll(long long x) {
    return x == 0 ? 64 : __builtin_clzll((unsigned long long)x);
}
__forceinline__ int __ffs(int x) { return __builtin_ffs(x); }
__forceinline__ int __ffsll(long long x) { return __builtin_ffsll(x); }
__forceinline__ unsigned __brev(unsigned x) {
    unsigned r = 0;
    for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
    return r;
}
__forceinline__ unsigned __umulhi(unsigned a, unsigned b) {
    return unsigned((unsigned long long)a * b >> 32);
}
__forceinline__ unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned shift) {
    const unsigned s = shift & 31;
    return s == 0 ? hi : (hi << s) | (lo >> (32 - s));
}
__forceinline__ unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned shift) {
    const unsigned s = shift & 31;
    return s == 0 ? lo : (lo >> s) | (hi << (32 - s));
}
template <typename T>
__forceinline__ T __ldg(const T* p) { return *p; }
__forceinline__ void __threadfence() {}
__forceinline__ void __threadfence_block() {}

// Atomics: fibers switch only at barriers and warp functions, so a plain read-modify-write is
// already indivisible.
template <typename T>
__forceinline__ T atomicAdd(T* p, T v) { T old = *p; *p = old + v; return old; }
template <typename T>
__forceinline__ T atomicSub(T* p, T v) { T old = *p; *p = old - v; return old; }
template <typename T>
__forceinline__ T atomicExch(T* p, T v) { T old = *p; *p = v; return old; }
template <typename T>
__forceinline__ T atomicMin(T* p, T v) { T old = *p; *p = v < old ? v : old; return old; }
template <typename T>
__forceinline__ T atomicMax(T* p, T v) { T old = *p; *p = old < v ? v : old; return old; }
template <typename T>
__forceinline__ T atomicAnd(T* p, T v) { T old = *p; *p = old & v; return old; }
template <typename T>
__forceinline__ T atomicOr(T* p, T v) { T old = *p; *p = old | v; return old; }
template <typename T>
__forceinline__ T atomicXor(T* p, T v) { T old = *p; *p = old ^ v; return old; }
template <typename T>
__forceinline__ T atomicCAS(T* p, T compare, T v) {
    T old = *p;
    if (old == compare) *p = v;
    return old;
}

namespace cuda_host {

// ---- fibers ---------------------------------------------------------------------------------

enum class Wait { none, barrier, warp, done };
enum class WarpOp { sync, shfl, shfl_up, shfl_down, shfl_xor, ballot, any, all };

struct Fiber {
    void* sp = nullptr;  // saved stack pointer while switched out
    unsigned char* stack = nullptr;  // one of the host thread's stacks (stack_of)
    uint3 thread{};
    Wait wait = Wait::none;
    // At a warp function: what it asked and, once released, its answer.
    WarpOp op{};
    unsigned mask = 0;
    unsigned long long value = 0;
    int lane_arg = 0;
    int width = 32;
    unsigned long long result = 0;
};

struct Block {
    std::vector<Fiber> fibers;
    void* scheduler_sp = nullptr;
    Fiber* current = nullptr;
    void (*body)(void*) = nullptr;
    void* body_arg = nullptr;
    const char* error = nullptr;
};

static thread_local Block* running = nullptr;

extern "C" void cuda_host_switch(void** save_sp, void* load_sp);
#if defined(__x86_64__)
// Saves the callee-saved registers on the current stack, stores the stack pointer, loads
// another and restores its registers: what ucontext does, without its signal-mask system call.
asm(R"(
.text
.globl cuda_host_switch
.type cuda_host_switch,@function
cuda_host_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
.size cuda_host_switch, .-cuda_host_switch
.section .note.GNU-stack,"",@progbits
.text
)");
#else
#error "cuda_host's fibers switch stacks for x86-64 only"
#endif

constexpr std::size_t STACK_BYTES = 256 * 1024;

[[noreturn]] static void fiber_main() {
    Block* block = running;
    block->body(block->body_arg);
    block->current->wait = Wait::done;
    cuda_host_switch(&block->current->sp, block->scheduler_sp);
    __builtin_unreachable();
}

// Back to the scheduler until it resumes this fiber.
static void yield(Wait why) {
    Block* block = running;
    Fiber* self = block->current;
    self->wait = why;
    cuda_host_switch(&self->sp, block->scheduler_sp);
    threadIdx = self->thread;
}

// Fiber i's stack, kept by each host thread from launch to launch; not zeroed, so only the
// pages a kernel's threads use are ever touched.
static unsigned char* stack_of(std::size_t i) {
    static thread_local std::vector<std::unique_ptr<unsigned char[]>> stacks;
    while (stacks.size() <= i) stacks.emplace_back(new unsigned char[STACK_BYTES]);
    return stacks[i].get();
}

static void start(Fiber& fiber) {
    // cuda_host_switch pops six registers, then returns into fiber_main as if called: the
    // return address sits where a call would leave it, the stack 16-byte aligned before it.
    auto top = reinterpret_cast<std::uintptr_t>(fiber.stack + STACK_BYTES);
    top &= ~std::uintptr_t(15);
    auto* slots = reinterpret_cast<void**>(top) - 8;
    for (int i = 0; i < 6; ++i) slots[i] = nullptr;
    slots[6] = reinterpret_cast<void*>(&fiber_main);
    slots[7] = nullptr;
    fiber.sp = slots;
    fiber.wait = Wait::none;
}

static unsigned lane_of(unsigned index) { return index % 32; }

// Answers the warp functions that every lane of their mask has reached with the same mask and
// function; true if any was answered. A mask naming a lane that has ended or waits elsewhere
// can never be answered: that is an error (the deadlock check reports it).
static bool release_warps(Block& block) {
    bool released = false;
    const std::size_t n = block.fibers.size();
    for (std::size_t base = 0; base < n; base += 32) {
        for (std::size_t i = base; i < n && i < base + 32; ++i) {
            Fiber& first = block.fibers[i];
            if (first.wait != Wait::warp) continue;
            const unsigned mask = first.mask;
            bool complete = true;
            for (unsigned lane = 0; lane < 32; ++lane) {
                if (!(mask >> lane & 1u)) continue;
                const std::size_t j = base + lane;
                if (j >= n || block.fibers[j].wait != Wait::warp ||
                    block.fibers[j].mask != mask || block.fibers[j].op != first.op) {
                    complete = false;
                    break;
                }
            }
            if (!complete) continue;
            unsigned ballot = 0;
            for (unsigned lane = 0; lane < 32; ++lane)
                if ((mask >> lane & 1u) && block.fibers[base + lane].value) ballot |= 1u << lane;
            for (unsigned lane = 0; lane < 32; ++lane) {
                if (!(mask >> lane & 1u)) continue;
                Fiber& f = block.fibers[base + lane];
                const int width = f.width;
                const unsigned segment = lane / width * width;
                unsigned source = lane;
                switch (f.op) {
                    case WarpOp::shfl: source = segment + unsigned(f.lane_arg) % width; break;
                    case WarpOp::shfl_up:
                        if (lane - segment >= unsigned(f.lane_arg)) source = lane - f.lane_arg;
                        break;
                    case WarpOp::shfl_down:
                        if (lane - segment + f.lane_arg < unsigned(width)) source = lane + f.lane_arg;
                        break;
                    case WarpOp::shfl_xor:
                        // A lane may read an earlier group of `width` lanes, not a later one.
                        source = lane ^ unsigned(f.lane_arg);
                        if (source / width > lane / width) source = lane;
                        break;
                    default: break;
                }
                if (!(mask >> source & 1u)) {
                    block.error = "a shuffle read a lane outside its mask";
                    return false;
                }
                switch (f.op) {
                    case WarpOp::ballot: f.result = ballot; break;
                    case WarpOp::any: f.result = ballot != 0; break;
                    case WarpOp::all: f.result = ballot == mask; break;
                    case WarpOp::sync: f.result = 0; break;
                    default: f.result = block.fibers[base + source].value; break;
                }
            }
            for (unsigned lane = 0; lane < 32; ++lane)
                if (mask >> lane & 1u) block.fibers[base + lane].wait = Wait::none;
            released = true;
        }
    }
    return released;
}

// A permutation of 0..n-1 for one pass: forward (order 0), reverse (1), else shuffled from a
// seed that advances with each pass.
static void pass_order(std::vector<std::size_t>& order, int how, unsigned long long& seed) {
    const std::size_t n = order.size();
    for (std::size_t i = 0; i < n; ++i) order[i] = how == 1 ? n - 1 - i : i;
    if (how < 2) return;
    for (std::size_t i = n; i > 1; --i) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        std::swap(order[i - 1], order[(seed >> 33) % i]);
    }
}

// Runs one block to its end; the error that stopped it, or nullptr.
static const char* run_block(Block& block, int how) {
    std::vector<std::size_t> order(block.fibers.size());
    unsigned long long seed = unsigned(how);
    for (;;) {
        pass_order(order, how, seed);
        bool ran = false;
        for (std::size_t i : order) {
            Fiber& f = block.fibers[i];
            if (f.wait != Wait::none) continue;
            block.current = &f;
            threadIdx = f.thread;
            cuda_host_switch(&block.scheduler_sp, f.sp);
            if (block.error) return block.error;
            ran = true;
        }
        if (ran) continue;
        if (release_warps(block)) continue;
        if (block.error) return block.error;  // a shuffle's source outside its mask
        std::size_t done = 0, at_barrier = 0;
        for (const Fiber& f : block.fibers) {
            done += f.wait == Wait::done;
            at_barrier += f.wait == Wait::barrier;
        }
        if (done == block.fibers.size()) return nullptr;
        if (at_barrier + done == block.fibers.size() && done == 0) {
            for (Fiber& f : block.fibers) f.wait = Wait::none;
            continue;
        }
        if (at_barrier > 0 && done > 0) return "__syncthreads waited for a thread that had ended";
        if (at_barrier > 0) return "__syncthreads waited for a thread stopped at a warp function";
        return "a warp function's mask names a lane that ended or waits elsewhere";
    }
}

static void barrier() { yield(Wait::barrier); }

static unsigned long long warp(WarpOp op, unsigned mask, unsigned long long value, int lane_arg,
                               int width) {
    Block* block = running;
    Fiber* self = block->current;
    const unsigned lane = lane_of(unsigned(self - block->fibers.data()));
    // An error ends the launch at this yield: the scheduler never resumes the fiber.
    if (!(mask >> lane & 1u)) {
        block->error = "a warp function's mask leaves out the lane calling it";
        yield(Wait::warp);
    }
    if (width < 1 || width > 32 || (width & (width - 1))) {
        block->error = "a shuffle's width is not a power of two up to 32";
        yield(Wait::warp);
    }
    self->op = op;
    self->mask = mask;
    self->value = value;
    self->lane_arg = lane_arg;
    self->width = width;
    yield(Wait::warp);
    return self->result;
}

// ---- launches -------------------------------------------------------------------------------

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

template <typename... P>
struct Call {
    void (*kernel)(P...);
    std::tuple<P...> values;
    static void run(void* self) {
        auto* call = static_cast<Call*>(self);
        std::apply(call->kernel, call->values);
    }
};

// args[i] points at parameter i's value, as cuLaunchKernel's kernelParams do. Returns the
// error that stopped a block, or nullptr.
template <typename... P, std::size_t... I>
const char* launch(void (*kernel)(P...), const unsigned* grid, const unsigned* block_dims,
                   void** args, int how, std::index_sequence<I...>) {
    Call<P...> call{kernel, {*static_cast<std::remove_cv_t<P>*>(args[I])...}};
    gridDim = {grid[0], grid[1], grid[2]};
    blockDim = {block_dims[0], block_dims[1], block_dims[2]};
    Block block;
    block.body = &Call<P...>::run;
    block.body_arg = &call;
    block.fibers.resize(std::size_t(block_dims[0]) * block_dims[1] * block_dims[2]);
    std::size_t i = 0;
    for (unsigned tz = 0; tz < block_dims[2]; ++tz)
        for (unsigned ty = 0; ty < block_dims[1]; ++ty)
            for (unsigned tx = 0; tx < block_dims[0]; ++tx, ++i) {
                block.fibers[i].thread = {tx, ty, tz};
                block.fibers[i].stack = stack_of(i);
            }
    running = &block;
    const char* error = nullptr;
    for (unsigned bz = 0; bz < grid[2] && !error; ++bz)
        for (unsigned by = 0; by < grid[1] && !error; ++by)
            for (unsigned bx = 0; bx < grid[0] && !error; ++bx) {
                blockIdx = {bx, by, bz};
                for (Fiber& f : block.fibers) start(f);
                error = run_block(block, how);
            }
    running = nullptr;
    return error;
}

template <typename... P>
const char* launch(void (*kernel)(P...), const unsigned* grid, const unsigned* block,
                   void** args, int how) {
    return launch(kernel, grid, block, args, how, std::index_sequence_for<P...>{});
}

}  // namespace cuda_host

__forceinline__ void __syncthreads() { cuda_host::barrier(); }
__forceinline__ void __syncwarp(unsigned mask = 0xffffffffu) {
    cuda_host::warp(cuda_host::WarpOp::sync, mask, 0, 0, 32);
}
__forceinline__ unsigned __ballot_sync(unsigned mask, int predicate) {
    return unsigned(cuda_host::warp(cuda_host::WarpOp::ballot, mask, predicate != 0, 0, 32));
}
__forceinline__ int __any_sync(unsigned mask, int predicate) {
    return int(cuda_host::warp(cuda_host::WarpOp::any, mask, predicate != 0, 0, 32));
}
__forceinline__ int __all_sync(unsigned mask, int predicate) {
    return int(cuda_host::warp(cuda_host::WarpOp::all, mask, predicate != 0, 0, 32));
}

namespace cuda_host {
// A shuffle moves the value's bytes, whatever its type (int, unsigned, float, 64-bit).
template <typename T>
T shuffle(WarpOp op, unsigned mask, T value, int lane_arg, int width) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>);
    unsigned long long raw = 0;
    std::memcpy(&raw, &value, sizeof(T));
    raw = warp(op, mask, raw, lane_arg, width);
    T out;
    std::memcpy(&out, &raw, sizeof(T));
    return out;
}
}  // namespace cuda_host

template <typename T>
__forceinline__ T __shfl_sync(unsigned mask, T v, int lane, int width = 32) {
    return cuda_host::shuffle(cuda_host::WarpOp::shfl, mask, v, lane, width);
}
template <typename T>
__forceinline__ T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
    return cuda_host::shuffle(cuda_host::WarpOp::shfl_up, mask, v, int(delta), width);
}
template <typename T>
__forceinline__ T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
    return cuda_host::shuffle(cuda_host::WarpOp::shfl_down, mask, v, int(delta), width);
}
template <typename T>
__forceinline__ T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
    return cuda_host::shuffle(cuda_host::WarpOp::shfl_xor, mask, v, lane_mask, width);
}

// emulate_<kernel>(grid[3], block[3], args, order) runs the grid and returns the error that
// stopped it, or NULL; signature_<kernel>() gives its parameters' codes.
#define EMULATE(kernel)                                                                       \
    extern "C" const char* emulate_##kernel(const unsigned* grid, const unsigned* block,       \
                                            void** args, int order) {                          \
        return cuda_host::launch(kernel, grid, block, args, order);                            \
    }                                                                                          \
    extern "C" const char* signature_##kernel() { return cuda_host::signature(kernel); }
