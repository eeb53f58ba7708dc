// benchmarks/kernel.py --probes: the memory traffic of edges.cu's fast path without its
// arithmetic, read directly by each lane instead of staged in shared memory. Not used by edgecli.
//
// Same work split as edges.cu: a persistent grid of warps, one 128 x 30 item per warp at a time,
// lane l owning pixels x0 + 4l .. x0 + 4l + 3. Per staged row (rows y0 - 1 .. y0 + 30, clamped to
// the frame) each lane loads WORDS 32-bit words of its row (3: its own 12 bytes; 5: with the words
// before and after, which hold its neighbours' pixels) and combines them; each output row is one
// 4-byte store per lane. Frames must be 16-byte aligned, width a multiple of 128.

typedef unsigned int u32;
typedef unsigned long long u64;

#ifndef WORDS
#define WORDS 3
#endif
#define TILE_H 30
#define STAGED_ROWS (TILE_H + 2)

extern "C" __global__ void __launch_bounds__(128)
probe_direct(const unsigned char* __restrict__ frames, unsigned char* __restrict__ edges,
             int n_frames, int height, int width, int tiles_x, int tiles_per_frame) {
    const int lane = threadIdx.x & 31;
    const int n_items = n_frames * tiles_per_frame;
    const int step = gridDim.x * 4;
    for (int item = blockIdx.x * 4 + (threadIdx.x >> 5); item < n_items; item += step) {
        const int n = item / tiles_per_frame;
        const int tile = item - n * tiles_per_frame;
        const int ty = tile / tiles_x;
        const int x0 = (tile - ty * tiles_x) * 128;
        const int y0 = ty * TILE_H;
        const u64 row_bytes = 3ull * (u64)width;
        const unsigned char* frame = frames + (u64)n * row_bytes * (u64)height;
        unsigned char* out = edges + ((u64)n * (u64)height + (u64)y0) * (u64)width + x0 + 4 * lane;
        const int first = WORDS == 3 ? 0 : -1;
        const int x_word = (3 * (x0 + 4 * lane)) / 4;   // word index of the lane's first byte
        const int last_word = (int)(row_bytes / 4) - 1;
        u32 acc[STAGED_ROWS];
#pragma unroll
        for (int s = 0; s < STAGED_ROWS; ++s) {
            const int y = min(max(y0 - 1 + s, 0), height - 1);
            const u32* w = reinterpret_cast<const u32*>(frame + (u64)y * row_bytes);
            u32 v = 0;
#pragma unroll
            for (int i = first; i < first + WORDS; ++i) v ^= w[min(max(x_word + i, 0), last_word)];
            acc[s] = v;
        }
#pragma unroll
        for (int t = 0; t < TILE_H; ++t) {
            if (y0 + t < height)
                *reinterpret_cast<u32*>(out + (u64)t * (u64)width) = acc[t] ^ acc[t + 1] ^ acc[t + 2];
        }
    }
}
