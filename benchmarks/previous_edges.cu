// The kernel before the warp-per-item rewrite, kept so that benchmarks/kernel.py --previous can
// time it in the same run as the current one (benchmarks/RESULTS.md: 3.19 us per 1080p frame on
// the H200, 2026-11-30). Not used by edgecli. Compiled with its own defaults plus
// -DEDGES_NORM=EDGES_NORM_L1 -DEDGES_BORDER=EDGES_BORDER_REPLICATE -DEDGES_THREADS=128 -DEDGES_ROWS=2.
//
// edges.cu: the edge contract of DESIGN.md §1 as one fused CUDA kernel.
//
//   BGR bytes -> luma Y = (9798 R + 19235 G + 3735 B + 16384) >> 15
//             -> 3x3 Sobel Gx, Gy (integers, chosen border)
//             -> |Gx| + |Gy| > T  (l1)   or   Gx^2 + Gy^2 > T^2  (l2)
//             -> 255 / 0
//
// Compile-time definitions come from edgecli.kernels.kernel_defines(), which validates them:
//   EDGES_NORM     EDGES_NORM_L1 | EDGES_NORM_L2
//   EDGES_BORDER   EDGES_BORDER_REPLICATE | EDGES_BORDER_REFLECT101 | EDGES_BORDER_CONSTANT
//   EDGES_TILE_W   output pixels per tile along x (16, 32, 64, 128, 256 or 512)
//   EDGES_TILE_H   output rows per tile
//   EDGES_THREADS  threads per block (a multiple of 32)
//   EDGES_ROWS     output rows per thread in step 3 (1 or 2)
// Runtime arguments are typed by edgecli.gpu.launch_edges(): all int32, the threshold already
// clamped to 2040 (so T^2 fits).
//
// Work: the frames are cut into TILE_W x TILE_H tiles; tile i of frame n is work item
// n * tiles_per_frame + i. The grid is persistent (about as many blocks as fit on the device at
// once, any number of frames, no gridDim.y limit); block b takes items b, b + gridDim.x, ...
// Per item, three steps:
//   1. stage: the BGR rows y0-1 .. y0+TILE_H, each clipped to the tile's columns x0-1 ..
//      x0+TILE_W, are copied into shared memory by the bulk-copy engine (one cp.async.bulk per
//      row, 16-byte aligned, so a staged row starts up to 15 bytes early: its 'skew'). Rows
//      outside the frame are replaced by their border row here. The copies of the next item are
//      issued before this item is computed (two stage buffers), so loads overlap computation.
//   2. luma: each thread turns 16 staged pixels (three 16-byte shared loads where the row is
//      aligned) into luma, two dp2a per pixel, stored as 16-bit lanes in an even and an odd
//      plane; a few threads fill the left and right halo columns per the border mode.
//   3. sobel: each thread computes 16 consecutive output pixels of EDGES_ROWS rows from
//      EDGES_ROWS + 2 luma rows, two pixels per 32-bit register, and writes each row's 16 with
//      one 16-byte store where the output row is 16-byte aligned.
//
// No #include: NVRTC compiles this file as it is.

#define EDGES_NORM_L1 1
#define EDGES_NORM_L2 2
#define EDGES_BORDER_REPLICATE 1
#define EDGES_BORDER_REFLECT101 2
#define EDGES_BORDER_CONSTANT 3

#ifndef EDGES_NORM
#error "EDGES_NORM is not defined: compile through edgecli.kernels.kernel_defines()"
#endif
#ifndef EDGES_BORDER
#error "EDGES_BORDER is not defined: compile through edgecli.kernels.kernel_defines()"
#endif
#ifndef EDGES_TILE_W
#define EDGES_TILE_W 128
#endif
#ifndef EDGES_TILE_H
#define EDGES_TILE_H 30
#endif
#ifndef EDGES_THREADS
#define EDGES_THREADS 256
#endif
#ifndef EDGES_ROWS
#define EDGES_ROWS 1
#endif

#if EDGES_NORM != EDGES_NORM_L1 && EDGES_NORM != EDGES_NORM_L2
#error "EDGES_NORM must be EDGES_NORM_L1 or EDGES_NORM_L2"
#endif
#if EDGES_BORDER != EDGES_BORDER_REPLICATE && EDGES_BORDER != EDGES_BORDER_REFLECT101 \
    && EDGES_BORDER != EDGES_BORDER_CONSTANT
#error "EDGES_BORDER must be EDGES_BORDER_REPLICATE, EDGES_BORDER_REFLECT101 or EDGES_BORDER_CONSTANT"
#endif

typedef unsigned int u32;
typedef unsigned long long u64;

// ---- tile geometry ----------------------------------------------------------------------------
#define TILE_W EDGES_TILE_W
#define TILE_H EDGES_TILE_H
#define THREADS EDGES_THREADS
#define WARPS (THREADS / 32)
#define ROWS EDGES_ROWS                             // step 3: output rows per thread
#define PIXELS_PER_THREAD 16                        // steps 2 and 3: 16 consecutive pixels
#define THREADS_PER_ROW (TILE_W / PIXELS_PER_THREAD)
#define HALO_ROWS (TILE_H + 2)                      // one row of halo above and below
#define WORDS_PER_ROW (TILE_W / 4)                  // luma words (4 pixels) per interior row

static_assert(TILE_W % 16 == 0 && TILE_W >= 16 && TILE_W <= 512, "EDGES_TILE_W");
static_assert((32 % THREADS_PER_ROW) == 0, "a tile row's threads must share one warp");
static_assert(TILE_H >= 1 && TILE_H <= 256, "EDGES_TILE_H");
static_assert(THREADS % 32 == 0 && THREADS >= 32 && THREADS <= 1024, "EDGES_THREADS");
static_assert(HALO_ROWS <= THREADS, "one thread issues each staged row's copy");
static_assert(ROWS == 1 || ROWS == 2, "EDGES_ROWS");

// Staged BGR row: a 16-byte aligned window of the input row covering TILE_W + 2 pixels, so it
// starts up to 15 bytes before the first pixel; step 2 reads up to 3 bytes past the last one
// (where it realigns from 4-byte words).
#define STAGE_STRIDE ((15 + 3 * (TILE_W + 2) + 3 + 15) / 16 * 16)
// Luma row, in 32-bit words: two planes of 16-bit lanes, even then odd (see "Sobel on 16-bit
// lanes"). Word g of the even plane holds pixels (4g, 4g+2) of the tile, word g of the odd plane
// (4g+1, 4g+3), for g = -1 .. TILE_W/4 (g = -1: only the left halo pixel -1, in the odd plane;
// g = TILE_W/4: only the right halo pixel TILE_W, in the even plane). Interior words start
// 16-byte aligned, so step 3 reads its 16 pixels with one 16-byte load per plane.
#define LUMA_PAD_WORDS 4                            // word 3 is g = -1
#define LUMA_PLANE_WORDS (WORDS_PER_ROW + 8)
#define LUMA_ROW_WORDS (2 * LUMA_PLANE_WORDS)

// ---- PTX helpers ------------------------------------------------------------------------------

// prmt.b32: byte permute; a selector nibble with bit 3 set replicates the sign bit of the byte
// it selects (CUDA's __byte_perm drops that bit, and step 3 needs it).
__device__ __forceinline__ u32 prmt(u32 a, u32 b, u32 selector) {
    u32 d;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(selector));
    return d;
}

// dp2a: c + a.lo16 * b.byte0 + a.hi16 * b.byte1 (lo), or with b.byte2, b.byte3 (hi); unsigned.
__device__ __forceinline__ u32 dp2a_lo(u32 a, u32 b, u32 c) {
    u32 d;
    asm("dp2a.lo.u32.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}
__device__ __forceinline__ u32 dp2a_hi(u32 a, u32 b, u32 c) {
    u32 d;
    asm("dp2a.hi.u32.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

__device__ __forceinline__ u32 shared_address(const void* p) {
    return (u32)__cvta_generic_to_shared(p);
}

// An mbarrier counts HALO_ROWS arrivals (one per staged row) plus the bytes of the bulk copies
// it is told to expect; its phase completes when both reach zero.
__device__ __forceinline__ void barrier_init(u64* bar, u32 arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;"
                 :: "r"(shared_address(bar)), "r"(arrivals) : "memory");
}
__device__ __forceinline__ void barrier_arrive(u64* bar, u32 expected_bytes) {
    asm volatile("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%0], %1;"
                 :: "r"(shared_address(bar)), "r"(expected_bytes) : "memory");
}
__device__ __forceinline__ void barrier_wait(u64* bar, u32 parity) {
    u32 done;
    do {
        asm volatile("{\n\t.reg .pred p;\n\t"
                     "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 p, [%1], %2;\n\t"
                     "selp.u32 %0, 1, 0, p;\n\t}"
                     : "=r"(done) : "r"(shared_address(bar)), "r"(parity) : "memory");
    } while (!done);
}

// Bulk copy of `bytes` (a multiple of 16) from 16-byte aligned global memory to 16-byte aligned
// shared memory; completion is counted on `bar`.
__device__ __forceinline__ void bulk_copy(void* shared_dst, u64 global_src, u32 bytes, u64* bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
                 "[%0], [%1], %2, [%3];"
                 :: "r"(shared_address(shared_dst)), "l"(global_src), "r"(bytes),
                    "r"(shared_address(bar))
                 : "memory");
}

// ---- borders ----------------------------------------------------------------------------------

// The in-frame index whose pixel stands at index i of an axis of length n, for i in [-1, n]:
// i itself inside, the border's choice at -1 and n, or -1 for a constant (luma 0) border.
// Indices further out are never part of an output's neighbourhood: -1 (their luma is unused).
__device__ __forceinline__ int border_source(int i, int n) {
    if (i >= 0 && i < n) return i;
    if (i < -1 || i > n) return -1;
#if EDGES_BORDER == EDGES_BORDER_REPLICATE
    return i < 0 ? 0 : n - 1;                       // a|abcd|d
#elif EDGES_BORDER == EDGES_BORDER_REFLECT101
    if (n == 1) return 0;                           // no 'b' to reflect to: replicate, as OpenCV
    return i < 0 ? 1 : n - 2;                       // b|abcd|c
#else
    return -1;                                      // 0|abcd|0
#endif
}

// ---- luma -------------------------------------------------------------------------------------

// The contract's coefficients doubled, so that the 16-bit-shifted sum is the 15-bit-shifted one
// and the luma byte is byte 2 of the accumulator (255 * 65536 + 32768 < 2^24: byte 3 is 0).
#define LUMA_B2 7470u
#define LUMA_G2 38470u
#define LUMA_R2 19596u
#define LUMA_ROUND2 32768u

__device__ __forceinline__ u32 luma_of(u32 b, u32 g, u32 r) {
    return (9798u * r + 19235u * g + 3735u * b + 16384u) >> 15;
}

// Four BGR pixels in three little-endian words (B0 G0 R0 B1 | G1 R1 B2 G2 | R2 B3 G3 R3) to their
// luma in 16-bit lanes, (Y0, Y2) in `even` and (Y1, Y3) in `odd`, two dp2a per pixel.
__device__ __forceinline__ void luma4(u32 w0, u32 w1, u32 w2, u32& even, u32& odd) {
    const u32 bg = LUMA_B2 | (LUMA_G2 << 16);
    const u32 gr = LUMA_G2 | (LUMA_R2 << 16);
    const u32 r_ = LUMA_R2;
    const u32 _b = LUMA_B2 << 16;
    const u32 y0 = dp2a_hi(r_, w0, dp2a_lo(bg, w0, LUMA_ROUND2));   // B0 G0 | R0 .
    const u32 y1 = dp2a_lo(gr, w1, dp2a_hi(_b, w0, LUMA_ROUND2));   // . B1 | G1 R1
    const u32 y2 = dp2a_lo(r_, w2, dp2a_hi(bg, w1, LUMA_ROUND2));   // B2 G2 | R2 .
    const u32 y3 = dp2a_hi(gr, w2, dp2a_lo(_b, w2, LUMA_ROUND2));   // . B3 | G3 R3
    // Byte 2 of each accumulator, and its byte 3 (zero) as the lane's high byte.
    even = prmt(y0, y2, 0x7632u);
    odd = prmt(y1, y3, 0x7632u);
}

// Luma of the staged pixel whose B byte is at `offset` of a staged row.
__device__ __forceinline__ u32 staged_luma(const unsigned char* stage_row, int offset) {
    return luma_of(stage_row[offset], stage_row[offset + 1], stage_row[offset + 2]);
}

// ---- Sobel on 16-bit lanes --------------------------------------------------------------------
//
// A word holds two pixels in 16-bit lanes. Every lane value stays in [0, 65535] (biases keep
// differences non-negative), so 32-bit adds never carry from one lane into the other.
// For 4 consecutive pixels p0..p3, "even" lanes are (p0, p2) and "odd" lanes (p1, p3): a
// neighbour one pixel to the left or right of an even lane is then an odd lane of the same or
// the adjacent word, and the other way round.

#define LANES(v) ((u32)(v) * 0x00010001u)

// (a.hi, b.lo): the lanes one pair to the right of a.
__device__ __forceinline__ u32 shift_lanes(u32 a, u32 b) { return prmt(a, b, 0x5432u); }

struct Thresholds {
    u32 k_min, k_neg;   // l1: lane constants, see edge_flags
    int t_squared;      // l2
};

__device__ __forceinline__ Thresholds make_thresholds(int t) {
    Thresholds k;
    k.k_min = LANES(32767 - 2044 - t);
    k.k_neg = LANES(2040 + 32767 - 2044 - t);
    k.t_squared = t * t;
    return k;
}

// gx: two lanes of Gx + 1024, in [4, 2044]; gy: two lanes of Gy + 1020, in [0, 2040]. Returns a
// word whose bit 15 (bit 31) is set when the low (high) lane's pixel is an edge.
__device__ __forceinline__ u32 edge_flags(u32 gx, u32 gy, const Thresholds& k) {
#if EDGES_NORM == EDGES_NORM_L1
    // Hopper's 16-bit-lane max-of-sum (DPX) gives |v| + c as max(v' + c, 2b - v' + c) for a
    // lane v' = v + b: two instructions per absolute value. Every lane stays in [0, 34807].
    const u32 ay = __viaddmax_u16x2(gy, k.k_min, k.k_neg - gy);       // 1020 + |Gy| + k_min
    const u32 f = __viaddmax_u16x2(gx, ay, LANES(2048) - gx + ay);     // 2044 + |Gx| + ...
    return f;  // lanes 32767 + |Gx| + |Gy| - T: bit 15 set iff |Gx| + |Gy| > T
#else
    const int ax = (int)(gx & 0xFFFFu) - 1024, ay = (int)(gy & 0xFFFFu) - 1020;
    const int bx = (int)(gx >> 16) - 1024, by = (int)(gy >> 16) - 1020;
    return (ax * ax + ay * ay > k.t_squared ? 0x00008000u : 0u)
         | (bx * bx + by * by > k.t_squared ? 0x80000000u : 0u);
#endif
}

// One row of the 18 luma pixels a thread needs (x - 1 .. x + 16) in lanes:
// e[k] = (p[4k], p[4k+2]) for k = 0..4 (e[4] only needs p16), o[k] = (p[4k-3], p[4k-1]) for
// k = 0..4 (o[0] only needs p-1), so o[k + 1] holds (p[4k+1], p[4k+3]). Every lane, used or
// not, is a luma value (<= 255).
struct RowLanes {
    u32 e[5], o[5];
};

__device__ __forceinline__ RowLanes row_lanes(u32 left, const uint4& even, const uint4& odd,
                                              u32 right) {
    RowLanes r;
    r.e[0] = even.x; r.e[1] = even.y; r.e[2] = even.z; r.e[3] = even.w; r.e[4] = right;
    r.o[0] = left; r.o[1] = odd.x; r.o[2] = odd.y; r.o[3] = odd.z; r.o[4] = odd.w;
    return r;
}

// Sixteen output pixels (four words, pixel order) from the rows above, at and below.
__device__ __forceinline__ uint4 sobel16(const RowLanes& a, const RowLanes& b, const RowLanes& c,
                                        const Thresholds& k) {
    // Vertical passes: smooth s = a + 2b + c in [0, 1020]; difference v = c - a + 255 in [0, 510].
    u32 se[5], so[5], ve[5], vo[5];
#pragma unroll
    for (int i = 0; i < 5; ++i) {
        se[i] = a.e[i] + 2u * b.e[i] + c.e[i];
        so[i] = a.o[i] + 2u * b.o[i] + c.o[i];
        ve[i] = c.e[i] - a.e[i] + LANES(255);
        vo[i] = c.o[i] - a.o[i] + LANES(255);
    }
    u32 out[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        // Even pixels 4i, 4i+2: left neighbours are odd lanes shifted by one pair.
        const u32 gx_even = so[i + 1] - shift_lanes(so[i], so[i + 1]) + LANES(1024);
        const u32 gy_even = shift_lanes(vo[i], vo[i + 1]) + 2u * ve[i] + vo[i + 1];  // +4*255
        // Odd pixels 4i+1, 4i+3: right neighbours are even lanes shifted by one pair.
        const u32 gx_odd = shift_lanes(se[i], se[i + 1]) - se[i] + LANES(1024);
        const u32 gy_odd = ve[i] + 2u * vo[i + 1] + shift_lanes(ve[i], ve[i + 1]);
        const u32 f_even = edge_flags(gx_even, gy_even, k);
        const u32 f_odd = edge_flags(gx_odd, gy_odd, k);
        // Bytes p4i, p4i+1, p4i+2, p4i+3 <- sign of f_even.b1, f_odd.b1, f_even.b3, f_odd.b3.
        out[i] = prmt(f_even, f_odd, 0xFBD9u);
    }
    return make_uint4(out[0], out[1], out[2], out[3]);
}

// ---- step 1: staging --------------------------------------------------------------------------

struct Frames {
    u64 base, end;      // addresses of the first byte and one past the last
    u64 row_bytes, frame_bytes;
    int height, width;
    int tiles_x, tiles_per_frame;
};

struct Item {
    int n, x0, y0;      // frame, first column, first row
};

__device__ __forceinline__ Item item_at(int item, const Frames& f) {
    Item it;
    it.n = item / f.tiles_per_frame;
    const int tile = item - it.n * f.tiles_per_frame;
    const int tile_y = tile / f.tiles_x;
    it.x0 = (tile - tile_y * f.tiles_x) * TILE_W;
    it.y0 = tile_y * TILE_H;
    return it;
}

// Run by thread r (< HALO_ROWS): stage input row y0 - 1 + r of `item`, and record its skew
// (-1 for a row with no data: a constant border, or past the bottom halo).
__device__ __forceinline__ void stage_row(int r, int item, const Frames& f,
                                          unsigned char* stage, int* skews, Item* item_info,
                                          u64* bar) {
    const Item it = item_at(item, f);
    if (r == 0) *item_info = it;
    const int ys = border_source(it.y0 - 1 + r, f.height);
    u32 bulk_bytes = 0;
    int skew = -1;
    u64 base = 0;
    unsigned char* dst = stage + r * STAGE_STRIDE;
    if (ys >= 0) {
        const int xs = max(it.x0 - 1, 0);
        const int xe = min(it.x0 + TILE_W + 1, f.width);
        const u64 first = f.base + f.frame_bytes * (u64)it.n + f.row_bytes * (u64)ys + 3ull * (u64)xs;
        const u64 end = first + 3ull * (u64)(xe - xs);
        base = first & ~15ull;
        skew = (int)(first - base);
        u64 span = (end - base + 15ull) & ~15ull;
        if (base + span > f.end) {
            // The buffer's last row: whole chunks by the copy engine, never reading past the
            // buffer; the last few bytes by hand (made visible by the arrive's release).
            span = (end - base) & ~15ull;
            for (u64 p = base + span; p < end; ++p) dst[p - base] = *(const unsigned char*)p;
        }
        bulk_bytes = (u32)span;
    }
    skews[r] = skew;
    barrier_arrive(bar, bulk_bytes);
    if (bulk_bytes) bulk_copy(dst, base, bulk_bytes, bar);
}

// ---- the kernel -------------------------------------------------------------------------------

// frames: n_frames x height x width x 3 bytes (BGR), 16-byte aligned, C-contiguous.
// edges:  n_frames x height x width bytes, C-contiguous, any alignment.
// grid:   (at most n_items blocks), THREADS threads per block; n_items = n_frames *
//         tiles_x * ceil(height / TILE_H).
extern "C" __global__ void __launch_bounds__(THREADS)
edges_bgr(const unsigned char* __restrict__ frames, unsigned char* __restrict__ edges,
          int n_frames, int height, int width, int tiles_x, int tiles_per_frame,
          int threshold) {
    __shared__ __align__(16) unsigned char stage[2][HALO_ROWS * STAGE_STRIDE];
    __shared__ __align__(16) u32 luma[HALO_ROWS * LUMA_ROW_WORDS];
    __shared__ int skews[2][HALO_ROWS];
    __shared__ Item item_info[2];
    __shared__ u64 staged[2];                      // one mbarrier per stage buffer

    const int n_items = n_frames * tiles_per_frame;
    if ((int)blockIdx.x >= n_items) return;

    const int tid = threadIdx.x;
    const int warp = tid >> 5;
    Frames f;
    f.base = (u64)frames;
    f.row_bytes = 3ull * (u64)width;
    f.frame_bytes = f.row_bytes * (u64)height;
    f.end = f.base + f.frame_bytes * (u64)n_frames;
    f.height = height;
    f.width = width;
    f.tiles_x = tiles_x;
    f.tiles_per_frame = tiles_per_frame;
    const Thresholds k = make_thresholds(threshold);

    if (tid == 0) {
        barrier_init(&staged[0], HALO_ROWS);
        barrier_init(&staged[1], HALO_ROWS);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();  // barriers initialised before anyone arrives or waits
    if (tid < HALO_ROWS)
        stage_row(tid, blockIdx.x, f, stage[0], skews[0], &item_info[0], &staged[0]);

    for (int item = blockIdx.x, round = 0; item < n_items; item += gridDim.x, ++round) {
        const int buf = round & 1;
        // Prefetch the next item into the other buffer. Its last reader was step 2 of the
        // previous round, which every thread finished before that round's second barrier.
        const int next = item + gridDim.x;
        if (tid < HALO_ROWS && next < n_items) {
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            stage_row(tid, next, f, stage[buf ^ 1], skews[buf ^ 1], &item_info[buf ^ 1],
                      &staged[buf ^ 1]);
        }
        barrier_wait(&staged[buf], (round >> 1) & 1);   // this buffer's (round/2)-th fill
        __syncthreads();  // also: the previous round's step 3 is done with `luma`

        const Item it = item_info[buf];
        const int xs = max(it.x0 - 1, 0);  // first staged column

        // 2. Luma of rows y0-1 .. y0+TILE_H: 16 pixels per thread (four words of each plane),
        // in the same columns for every row; a tile row's threads take consecutive pixels.
        const int part = tid % THREADS_PER_ROW;
        const int x = it.x0 + PIXELS_PER_THREAD * part;
        const bool inside = x + PIXELS_PER_THREAD - 1 < width;
        for (int r = tid / THREADS_PER_ROW; r < HALO_ROWS; r += THREADS / THREADS_PER_ROW) {
            const int skew = skews[buf][r];
            const unsigned char* srow = stage[buf] + r * STAGE_STRIDE;
            uint4 even = make_uint4(0u, 0u, 0u, 0u), odd = even;
            if (skew >= 0 && inside) {
                const int offset = skew + 3 * (x - xs);
                u32 v[12];
                if ((offset & 15) == 0) {
                    // Widths that are multiples of 16: three 16-byte loads, no realignment.
                    // A quarter warp reads 8 x 16 bytes at a 48-byte stride: no bank conflict.
                    const uint4* w = reinterpret_cast<const uint4*>(srow + offset);
                    const uint4 a = w[0], b = w[1], c = w[2];
                    v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
                    v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
                    v[8] = c.x; v[9] = c.y; v[10] = c.z; v[11] = c.w;
                } else {
                    // Any other row alignment: realign from 4-byte words (the same shift for
                    // the whole row, so no divergence).
                    const u32* w = reinterpret_cast<const u32*>(srow) + (offset >> 2);
                    const u32 sel = 0x3210u + 0x1111u * (u32)(offset & 3);
                    u32 next = w[0];
#pragma unroll
                    for (int i = 0; i < 12; ++i) {
                        const u32 word = next;
                        next = w[i + 1];
                        v[i] = prmt(word, next, sel);
                    }
                }
                luma4(v[0], v[1], v[2], even.x, odd.x);
                luma4(v[3], v[4], v[5], even.y, odd.y);
                luma4(v[6], v[7], v[8], even.z, odd.z);
                luma4(v[9], v[10], v[11], even.w, odd.w);
            } else if (skew >= 0) {
                // The frame's right edge falls in these pixels: x = width takes its border
                // source, pixels further right are never used (luma 0).
                u32 y[PIXELS_PER_THREAD];
#pragma unroll
                for (int j = 0; j < PIXELS_PER_THREAD; ++j) {
                    const int xj = border_source(x + j, width);
                    y[j] = xj >= 0 ? staged_luma(srow, skew + 3 * (xj - xs)) : 0u;
                }
                even = make_uint4(y[0] | (y[2] << 16), y[4] | (y[6] << 16),
                                  y[8] | (y[10] << 16), y[12] | (y[14] << 16));
                odd = make_uint4(y[1] | (y[3] << 16), y[5] | (y[7] << 16),
                                 y[9] | (y[11] << 16), y[13] | (y[15] << 16));
            }
            u32* even_row = luma + r * LUMA_ROW_WORDS + LUMA_PAD_WORDS;
            *reinterpret_cast<uint4*>(even_row + 4 * part) = even;
            *reinterpret_cast<uint4*>(even_row + LUMA_PLANE_WORDS + 4 * part) = odd;
        }
        // The halo columns x0-1 (high lane of odd word -1) and x0+TILE_W (low lane of even word
        // TILE_W/4), on the last warps, which have the fewest rows. The other lane is 0.
        for (int task = THREADS - 1 - tid; task < 2 * HALO_ROWS; task += THREADS) {
            const int r = task >> 1;
            const bool right = task & 1;
            const int skew = skews[buf][r];
            const int xh = border_source(right ? it.x0 + TILE_W : it.x0 - 1, width);
            const u32 y = (skew < 0 || xh < 0)
                              ? 0u : staged_luma(stage[buf] + r * STAGE_STRIDE, skew + 3 * (xh - xs));
            u32* even_row = luma + r * LUMA_ROW_WORDS + LUMA_PAD_WORDS;
            if (right) even_row[WORDS_PER_ROW] = y;
            else even_row[LUMA_PLANE_WORDS - 1] = y << 16;
        }
        __syncthreads();  // luma tile complete

        // 3. Sobel + threshold: 16 output pixels of ROWS consecutive rows per thread. Whole
        // warps take part in the shuffles; rows past the tile reuse its last rows and store
        // nothing.
        const int rows_per_pass = THREADS / THREADS_PER_ROW * ROWS;
        for (int pass = 0; pass < TILE_H; pass += rows_per_pass) {
            if (pass + warp * (32 / THREADS_PER_ROW) * ROWS >= TILE_H) break;   // warp-uniform
            const int row0 = pass + tid / THREADS_PER_ROW * ROWS;
            const int col = tid % THREADS_PER_ROW;
            RowLanes lanes[ROWS + 2];
#pragma unroll
            for (int i = 0; i < ROWS + 2; ++i) {
                const int r = min(row0 + i, HALO_ROWS - 1);
                const u32* even_row = luma + r * LUMA_ROW_WORDS + LUMA_PAD_WORDS;
                const u32* odd_row = even_row + LUMA_PLANE_WORDS;
                const uint4 even = *reinterpret_cast<const uint4*>(even_row + 4 * col);
                const uint4 odd = *reinterpret_cast<const uint4*>(odd_row + 4 * col);
                // Pixel x-1 is in the left neighbour's last odd word, x+16 in the right
                // neighbour's first even word; a row's first and last threads read the halo.
                u32 left = __shfl_up_sync(0xFFFFFFFFu, odd.w, 1, THREADS_PER_ROW);
                u32 right = __shfl_down_sync(0xFFFFFFFFu, even.x, 1, THREADS_PER_ROW);
                if (col == 0) left = odd_row[-1];
                if (col == THREADS_PER_ROW - 1) right = even_row[WORDS_PER_ROW];
                lanes[i] = row_lanes(left, even, odd, right);
            }
            const int x = it.x0 + 16 * col;
#pragma unroll
            for (int j = 0; j < ROWS; ++j) {
                const uint4 out = sobel16(lanes[j], lanes[j + 1], lanes[j + 2], k);
                const int row = row0 + j;
                const int y = it.y0 + row;
                if (row >= TILE_H || y >= height || x >= width) continue;
                unsigned char* dst =
                    edges + ((u64)it.n * (u64)height + (u64)y) * (u64)width + (u64)x;
                const int valid = min(width - x, 16);
                if (valid == 16 && ((u64)dst & 15ull) == 0) {
                    *reinterpret_cast<uint4*>(dst) = out;
                } else if (valid == 16 && ((u64)dst & 3ull) == 0) {
                    u32* d = reinterpret_cast<u32*>(dst);
                    d[0] = out.x; d[1] = out.y; d[2] = out.z; d[3] = out.w;
                } else {
                    // Rows of widths that are not multiples of 4, and the last tile column.
#pragma unroll
                    for (int b = 0; b < 16; ++b) {
                        const u32 w = b < 4 ? out.x : b < 8 ? out.y : b < 12 ? out.z : out.w;
                        if (b < valid) dst[b] = (unsigned char)(w >> (8 * (b & 3)));
                    }
                }
            }
        }
    }
}
