// edges.cu: the edge contract (docs/contract.md) as one fused CUDA kernel.
//
//   BGR bytes -> luma Y = (9798 R + 19235 G + 3735 B + 16384) >> 15
//             -> 3x3 Sobel Gx, Gy (integers, chosen border)
//             -> |Gx| + |Gy| > T  (l1)   or   Gx^2 + Gy^2 > T^2  (l2)
//             -> 255 / 0
//
// One form for every NVIDIA GPU from Volta (sm_70) on. Compile-time definitions come from
// edgecli.edges.variants.kernel_defines(), which validates them:
//   EDGES_NORM     EDGES_NORM_L1 | EDGES_NORM_L2
//   EDGES_BORDER   EDGES_BORDER_REPLICATE | EDGES_BORDER_REFLECT101 | EDGES_BORDER_CONSTANT
// The architecture decides how rows are staged (step 1): cp.async on sm_80 and newer, 16-byte
// loads and stores through registers on sm_70 and sm_75. Runtime arguments are typed by
// edgecli.edges.cuda_backend.launch_edges(): all int32, the threshold already clamped to 2040
// (so T^2 fits). Shared memory is dynamic: edgecli.edges.variants.SHARED_BYTES per block, which
// edgecli.edges.kernels allows past the 48 KB default.
//
// Work: the frames are cut into items of 128 columns x 30 rows; item i of frame n is work item
// n * tiles_per_frame + i. The grid is persistent: warp g of the grid takes items g,
// g + (warps in the grid), ... Each warp owns one item's worth of staged rows in shared memory,
// as a ring of 4 slots of 8 rows, and never waits for another warp. Per item:
//   1. stage: staged row s holds the BGR input row y0 - 1 + s over the columns x0 - 1 ..
//      x0 + 128, copied as whole 16-byte chunks from a 16-byte aligned start (so the staged row
//      starts up to 15 bytes early: its 'skew'); rows outside the frame become their border row
//      here, or zeros (luma 0) for the constant border and for rows past the bottom halo. Lane s
//      plans row s's copy for the next item when the warp starts an item; once the warp has
//      read a slot, its 8 rows are restaged for the next item, each row by the whole warp (lane
//      c copies chunk c: 416 consecutive bytes a row, coalesced), so the next item's rows stream
//      in one slot behind this item's. On sm_80+ the copies are cp.async, one commit group a
//      slot, and a slot is waited for only when it is read; on sm_70/75 they are plain 16-byte
//      loads, whose latency the other warps of the SM hide.
//   2. halo (lane s, when its slot is read): the luma of the two columns beside the item,
//      x0 - 1 and x0 + 128, of staged row s, per the border mode.
//   3. rows (all lanes): lane l owns pixels x0 + 4l .. x0 + 4l + 3. Walking down the staged
//      rows, it turns its 12 bytes into luma (two dp2a a pixel), fetches the neighbouring
//      lanes' edge pixels with two shuffles (lanes 0 and 31 get the halo), computes the
//      horizontal smooth and difference of the row, and, three rows in hand, Gx, Gy, the
//      threshold and one 4-byte store. Two pixels per 32-bit register throughout.
//
// Items that are whole 128 x 30 rectangles of a frame whose width is a multiple of 16 (every
// common video width) take a fast path: one staged-row skew for the whole item, word-aligned
// loads, no bounds checks. Other items (the right-hand column of tiles of other widths, the
// bottom row of tiles of heights that are not a multiple of 30, widths not a multiple of 16)
// take a general path with the same arithmetic.
//
// No #include: NVRTC compiles this file as it is.

#define EDGES_NORM_L1 1
#define EDGES_NORM_L2 2
#define EDGES_BORDER_REPLICATE 1
#define EDGES_BORDER_REFLECT101 2
#define EDGES_BORDER_CONSTANT 3

#ifndef EDGES_NORM
#error "EDGES_NORM is not defined: compile through edgecli.edges.variants.kernel_defines()"
#endif
#ifndef EDGES_BORDER
#error "EDGES_BORDER is not defined: compile through edgecli.edges.variants.kernel_defines()"
#endif
#if EDGES_NORM != EDGES_NORM_L1 && EDGES_NORM != EDGES_NORM_L2
#error "EDGES_NORM must be EDGES_NORM_L1 or EDGES_NORM_L2"
#endif
#if EDGES_BORDER != EDGES_BORDER_REPLICATE && EDGES_BORDER != EDGES_BORDER_REFLECT101 \
    && EDGES_BORDER != EDGES_BORDER_CONSTANT
#error "EDGES_BORDER must be EDGES_BORDER_REPLICATE, EDGES_BORDER_REFLECT101 or EDGES_BORDER_CONSTANT"
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 700
#error "edges.cu needs compute capability 7.0 (Volta) or newer"
#endif

// cp.async (LDGSTS) exists from sm_80 on.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define EDGES_CP_ASYNC 1
#else
#define EDGES_CP_ASYNC 0
#endif

typedef unsigned int u32;
typedef unsigned long long u64;

// ---- geometry ---------------------------------------------------------------------------------
#define FULL_MASK 0xFFFFFFFFu
#define TILE_W 128                                  // 32 lanes x 4 pixels
#define TILE_H 30                                   // a multiple of 3: rows are walked 3 at a time
#define WARPS 4                                     // warps per block (each on its own items)
#define THREADS (32 * WARPS)
#define STAGED_ROWS (TILE_H + 2)                    // one row of halo above and below
// A staged row: a 16-byte aligned window over the input row that covers the pixels
// x0 - 1 .. x0 + 128, starting up to 15 bytes early. Every read of steps 2 and 3 ends before
// byte 405 (see row_luma), so 416 bytes: 26 chunks of 16.
#define STAGE_STRIDE ((15 + 3 * (TILE_W + 2) + 15) / 16 * 16)
#define STAGE_CHUNKS (STAGE_STRIDE / 16)
#define SLOTS 4                                     // the ring of staged rows: one item's worth
#define SLOT_ROWS (STAGED_ROWS / SLOTS)
#define WARP_SHARED_BYTES (STAGED_ROWS * STAGE_STRIDE)

static_assert(STAGED_ROWS == 32, "lane s plans staged row s: one row a lane");
static_assert(STAGED_ROWS % SLOTS == 0 && SLOT_ROWS == 8, "whole rows a slot; 8 (item_rows)");
static_assert(STAGE_STRIDE == 416 && STAGE_CHUNKS <= 32, "edgecli.edges.variants.STAGE_STRIDE");
static_assert(WARPS * WARP_SHARED_BYTES == 53248, "edgecli.edges.variants.SHARED_BYTES");

// ---- PTX helpers ------------------------------------------------------------------------------

// prmt.b32: byte permute; a selector nibble with bit 3 set replicates the sign bit of the byte
// it selects (CUDA's __byte_perm drops that bit, and the threshold step needs it).
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

// 16 bytes from 16-byte aligned global memory into 16-byte aligned shared memory. With
// cp.async the copy completes in the background, counted in the thread's current commit group.
__device__ __forceinline__ void copy_chunk(unsigned char* shared_dst, u64 global_src) {
#if EDGES_CP_ASYNC
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;"
                 :: "r"((u32)__cvta_generic_to_shared(shared_dst)), "l"(global_src)
                 : "memory");
#else
    *reinterpret_cast<uint4*>(shared_dst) = __ldg(reinterpret_cast<const uint4*>(global_src));
#endif
}

// Closes the commit group of one slot's copies (every slot read commits one, maybe empty, so
// that the group of the slot read next is always the SLOTS-th newest).
__device__ __forceinline__ void commit_slot() {
#if EDGES_CP_ASYNC
    asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

// Waits until the oldest slot's copies by this thread have landed; the __syncwarp after it
// makes every lane's copies visible to the whole warp.
__device__ __forceinline__ void wait_oldest_slot() {
#if EDGES_CP_ASYNC
    asm volatile("cp.async.wait_group %0;" :: "n"(SLOTS - 1) : "memory");
#endif
}

__device__ __forceinline__ u64 shfl_u64(u64 v, int lane) {
    const u32 lo = __shfl_sync(FULL_MASK, (u32)v, lane);
    const u32 hi = __shfl_sync(FULL_MASK, (u32)(v >> 32), lane);
    return ((u64)hi << 32) | lo;
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

// ---- two pixels per register ------------------------------------------------------------------
//
// A word holds two pixels in 16-bit lanes. Every lane value stays in [0, 65535] (biases keep
// differences non-negative), so 32-bit adds never carry from one lane into the other.
// A lane's four pixels p0..p3 are kept as "even" lanes (p0, p2) and "odd" lanes (p1, p3): the
// neighbours one pixel left or right of an even lane are then odd lanes, and the other way
// round, so neighbours are whole words or one byte permute away.

#define LANES(v) ((u32)(v) * 0x00010001u)

// (a.hi, b.lo): the lanes one pair to the right of a.
__device__ __forceinline__ u32 shift_lanes(u32 a, u32 b) { return prmt(a, b, 0x5432u); }

// One staged row after the horizontal pass, for the lane's 4 pixels: smooth l + 2c + r in
// [0, 1020] and difference r - l + 255 in [0, 510], even and odd lanes.
struct Horizontal {
    u32 smooth_even, smooth_odd, diff_even, diff_odd;
};

struct Thresholds {
    u32 k_min, k_neg;   // l1: lane constants, see edge_flags
    int t_squared;      // l2
};

__device__ __forceinline__ Thresholds make_thresholds(int t) {
    Thresholds k;
    k.k_min = LANES(32767 - 2040 - t);
    k.k_neg = LANES(2040 + 32767 - 2040 - t);
    k.t_squared = t * t;
    return k;
}

// gx, gy: two lanes of Gx + 1020 and Gy + 1020, each in [0, 2040]. Returns a word whose bit 15
// (bit 31) is set when the low (high) lane's pixel is an edge.
__device__ __forceinline__ u32 edge_flags(u32 gx, u32 gy, const Thresholds& k) {
#if EDGES_NORM == EDGES_NORM_L1
    // A 16-bit-lane max-of-sum gives |v| + c as max(v' + c, 2b - v' + c) for a lane v' = v + b:
    // two instructions per absolute value where the GPU has them (Hopper's DPX; CUDA emulates
    // them before sm_90). Every lane stays in [0, 34807].
    const u32 ay = __viaddmax_u16x2(gy, k.k_min, k.k_neg - gy);       // 1020 + |Gy| + k_min
    return __viaddmax_u16x2(gx, ay, LANES(2040) - gx + ay);           // 1020 + |Gx| + ...
    // lanes 32767 + |Gx| + |Gy| - T: bit 15 set iff |Gx| + |Gy| > T
#else
    const int ax = (int)(gx & 0xFFFFu) - 1020, ay = (int)(gy & 0xFFFFu) - 1020;
    const int bx = (int)(gx >> 16) - 1020, by = (int)(gy >> 16) - 1020;
    return (ax * ax + ay * ay > k.t_squared ? 0x00008000u : 0u)
         | (bx * bx + by * by > k.t_squared ? 0x80000000u : 0u);
#endif
}

// The lane's four output bytes (0 or 255) from the horizontal passes of the rows above (a), at
// (b) and below (c).
__device__ __forceinline__ u32 sobel4(const Horizontal& a, const Horizontal& b,
                                      const Horizontal& c, const Thresholds& k) {
    const u32 gx_even = a.diff_even + 2u * b.diff_even + c.diff_even;
    const u32 gx_odd = a.diff_odd + 2u * b.diff_odd + c.diff_odd;
    const u32 gy_even = c.smooth_even - a.smooth_even + LANES(1020);
    const u32 gy_odd = c.smooth_odd - a.smooth_odd + LANES(1020);
    const u32 f_even = edge_flags(gx_even, gy_even, k);
    const u32 f_odd = edge_flags(gx_odd, gy_odd, k);
    // Bytes p0, p1, p2, p3 <- sign of f_even.b1, f_odd.b1, f_even.b3, f_odd.b3.
    return prmt(f_even, f_odd, 0xFBD9u);
}

// ---- work items -------------------------------------------------------------------------------

struct Frames {
    u64 base, end;      // addresses of the first byte and one past the last
    u64 row_bytes, frame_bytes;
    int height, width;
    int tiles_x, tiles_per_frame;
};

struct Item {
    int n, x0, y0;      // frame, first column, first output row
    int xs;             // first staged column: x0 - 1, or 0
    bool fast;          // a whole 128 x 30 rectangle of a fast frame (see above)
};

// fast_frames: rows whose byte length is a multiple of 16 (one skew per item) and 4-byte
// aligned output rows.
__device__ __forceinline__ Item item_at(int item, const Frames& f, bool fast_frames) {
    Item it;
    it.n = item / f.tiles_per_frame;
    const int tile = item - it.n * f.tiles_per_frame;
    const int tile_y = tile / f.tiles_x;
    it.x0 = (tile - tile_y * f.tiles_x) * TILE_W;
    it.y0 = tile_y * TILE_H;
    it.fast = fast_frames && it.x0 + TILE_W <= f.width && it.y0 + TILE_H <= f.height;
    it.xs = max(it.x0 - 1, 0);
    return it;
}

// Step 1 is planned for a whole item at once, a lane per staged row (lane s: staged row s, input
// row y0 - 1 + s); the warp copies a slot's rows together once the slot is free.
struct RowCopy {
    u64 base;           // 16-byte aligned start of the copy
    u32 chunks;         // 16-byte chunks copied by the warp (0: none)
    int tail;           // bytes after those, copied by hand (the buffer's last row only)
    int skew;           // where the row's first staged pixel starts in the staged row
    bool zero;          // a constant-border row, or one past the bottom halo: all zeros
};

__device__ __forceinline__ RowCopy plan_row(int s, const Item& it, const Frames& f) {
    RowCopy c;
    c.base = 0;
    c.chunks = 0;
    c.tail = 0;
    c.skew = 0;
    const int ys = border_source(it.y0 - 1 + s, f.height);
    c.zero = ys < 0;
    if (ys >= 0) {
        const int xe = min(it.x0 + TILE_W + 1, f.width);
        const u64 first =
            f.base + f.frame_bytes * (u64)it.n + f.row_bytes * (u64)ys + 3ull * (u64)it.xs;
        const u64 end = first + 3ull * (u64)(xe - it.xs);
        c.base = first & ~15ull;
        c.skew = (int)(first - c.base);
        u64 span = (end - c.base + 15ull) & ~15ull;
        if (c.base + span > f.end) {
            // The buffer's last row: whole chunks, never reading past the buffer; the last few
            // bytes by hand.
            span = (end - c.base) & ~15ull;
            c.tail = (int)(end - c.base - span);
        }
        c.chunks = (u32)(span / 16);
    }
    return c;
}

// Copy the rows of slot j, planned by lanes j * SLOT_ROWS .. (j + 1) * SLOT_ROWS - 1 (`c` is this
// lane's plan), into the ring `stage`, and close the slot's commit group. Every lane of the warp
// calls it. Rows written by hand (zeros, tails) are ordinary stores, seen by the other lanes
// after the __syncwarp that precedes the slot's first read.
__device__ __forceinline__ void stage_slot(int j, const RowCopy& c, unsigned char* stage,
                                           int lane) {
    const u32 info = c.chunks | (c.zero ? 0x100u : 0u);
#pragma unroll
    for (int i = 0; i < SLOT_ROWS; ++i) {
        const int r = j * SLOT_ROWS + i;
        const u32 row_info = __shfl_sync(FULL_MASK, info, r);
        const u64 row_base = shfl_u64(c.base, r);
        unsigned char* dst = stage + r * STAGE_STRIDE + 16 * lane;
        if (row_info & 0x100u) {
            if (lane < STAGE_CHUNKS) *reinterpret_cast<uint4*>(dst) = make_uint4(0u, 0u, 0u, 0u);
        } else if ((u32)lane < (row_info & 0xFFu)) {
            copy_chunk(dst, row_base + 16ull * (u64)lane);
        }
    }
    if (lane / SLOT_ROWS == j) {
        unsigned char* dst = stage + lane * STAGE_STRIDE + 16 * c.chunks;
        const unsigned char* src = reinterpret_cast<const unsigned char*>(c.base + 16 * c.chunks);
        for (int i = 0; i < c.tail; ++i) dst[i] = src[i];
    }
    commit_slot();
}

// ---- step 3 ------------------------------------------------------------------------------------

// What a lane needs to process one item's rows.
struct Lane {
    int lane;
    int x;              // its first pixel's column
    int offset;         // fast path: byte offset of that pixel in every staged row
    int left, right;    // byte offsets of the halo columns' pixels in a staged row (less its
                        // skew), or -1 where the border makes them luma 0
};

// The lane's 4 pixels of one staged row as luma, (p0, p2) and (p1, p3). `skew`: the row's
// (general path).
template <bool FAST>
__device__ __forceinline__ void row_luma(const unsigned char* srow, int skew, const Item& it,
                                         const Frames& f, const Lane& ln, u32& even, u32& odd) {
    if (FAST) {
        // Every staged row has the same skew and the lane's pixels start word-aligned; the
        // last lane reads bytes up to offset + 12 * 31 + 11 <= 18 + 383 = 401.
        const u32* w = reinterpret_cast<const u32*>(srow + ln.offset);
        luma4(w[0], w[1], w[2], even, odd);
        return;
    }
    const int offset = skew + 3 * (ln.x - it.xs);
    if (ln.x + 3 < f.width) {
        // Realign from 4-byte words (the same shift for every lane: lanes are 12 bytes apart).
        // Reads end before byte (offset & ~3) + 16 <= 405.
        const u32* w = reinterpret_cast<const u32*>(srow) + (offset >> 2);
        const u32 sel = 0x3210u + 0x1111u * (u32)(offset & 3);
        const u32 a = w[0], b = w[1], c = w[2], d = w[3];
        luma4(prmt(a, b, sel), prmt(b, c, sel), prmt(c, d, sel), even, odd);
    } else {
        // The frame's right edge falls in these pixels: x = width takes its border source,
        // pixels further right are never used (luma 0).
        u32 y[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int xj = border_source(ln.x + j, f.width);
            y[j] = xj >= 0 ? staged_luma(srow, skew + 3 * (xj - it.xs)) : 0u;
        }
        even = y[0] | (y[2] << 16);
        odd = y[1] | (y[3] << 16);
    }
}

// Step 2, lane s: the halo luma of staged row s, `srow` (skew `skew`), x0 - 1 in bits 16..23 and
// x0 + 128 in bits 0..7.
__device__ __forceinline__ u32 row_halo(const unsigned char* srow, int skew, const Lane& ln) {
    const u32 yl = ln.left < 0 ? 0u : staged_luma(srow, skew + ln.left);
    const u32 yr = ln.right < 0 ? 0u : staged_luma(srow, skew + ln.right);
    return (yl << 16) | yr;
}

// Staged row s: luma, then the horizontal smooth and difference of the lane's 4 pixels. Lane s
// holds the row's halo and skew.
template <bool FAST>
__device__ __forceinline__ Horizontal horizontal(const unsigned char* srow, int s, u32 halo,
                                                 int skew, const Item& it, const Frames& f,
                                                 const Lane& ln) {
    u32 e, o;
    row_luma<FAST>(srow, FAST ? 0 : __shfl_sync(FULL_MASK, skew, s), it, f, ln, e, o);
    // Pixel x - 1 is the high lane of the left neighbour's odd word, x + 4 the low lane of the
    // right neighbour's even word. The shuffles rotate: lane 0 reads lane 31, which sends the
    // left halo instead of its odd word, and lane 31 reads lane 0, which sends the right halo.
    const u32 row_halo = __shfl_sync(FULL_MASK, halo, s);
    const u32 left = __shfl_sync(FULL_MASK, ln.lane == 31 ? row_halo : o, (ln.lane + 31) & 31);
    const u32 right = __shfl_sync(FULL_MASK, ln.lane == 0 ? row_halo : e, (ln.lane + 1) & 31);
    const u32 l_even = shift_lanes(left, o);        // (p-1, p1): left of (p0, p2)
    const u32 r_odd = shift_lanes(e, right);        // (p2, p4): right of (p1, p3)
    Horizontal h;
    h.smooth_even = l_even + 2u * e + o;
    h.diff_even = o - l_even + LANES(255);
    h.smooth_odd = e + 2u * o + r_odd;
    h.diff_odd = r_odd - e + LANES(255);
    return h;
}

// Output row t of the item (image row y0 + t), whose lane's 4 pixels start at `dst`.
template <bool FAST>
__device__ __forceinline__ void store_row(unsigned char* dst, int t, const Item& it,
                                          const Frames& f, const Lane& ln, u32 out) {
    if (FAST) {
        *reinterpret_cast<u32*>(dst) = out;   // width % 16 == 0 and edges 4-byte aligned
        return;
    }
    if (it.y0 + t >= f.height || ln.x >= f.width) return;
    if (ln.x + 3 < f.width && ((u64)dst & 3ull) == 0) {
        *reinterpret_cast<u32*>(dst) = out;
    } else {
#pragma unroll
        for (int j = 0; j < 4; ++j)
            if (ln.x + j < f.width) dst[j] = (unsigned char)(out >> (8 * j));
    }
}

// Steps 2 and 3 for item `it`, whose rows are staged (or on their way) in the ring `stage`; lane
// s holds the skew of staged row s. Each slot, once read, is restaged with the rows of the next
// item that `next` (lane s: row s) plans, when there is one. A slot's rows are unrolled on the
// fast path, the slots are not: fully unrolled, ptxas for sm_100 and sm_120 spilled.
template <bool FAST>
__device__ __forceinline__ void item_rows(unsigned char* stage, unsigned char* edges,
                                          const Item& it, int skew, const RowCopy& next,
                                          bool has_next, const Frames& f, const Lane& ln,
                                          const Thresholds& k) {
    const u64 row = (u64)f.width;
    unsigned char* dst = edges + ((u64)it.n * (u64)f.height + (u64)it.y0) * row + (u64)ln.x;
    const int my_slot = ln.lane / SLOT_ROWS;  // the slot of this lane's staged row
    const unsigned char* my_row = stage + ln.lane * STAGE_STRIDE;
    Horizontal above, at;  // the rows above the one being read: staged rows s - 2 and s - 1
    u32 halo = 0u;  // lane s: its staged row's halo luma, from when its slot is read
#pragma unroll 1
    for (int j = 0; j < SLOTS; ++j) {
        wait_oldest_slot();
        __syncwarp();  // every lane's copies of slot j are visible to the warp
        if (my_slot == j) halo = row_halo(my_row, skew, ln);
        // The general path's rows are not unrolled (8 is SLOT_ROWS: the pragma takes no macro):
        // it is the rarer path, and unrolled it doubled the code ptxas compiles for each
        // architecture, and the registers the kernel needs.
#pragma unroll(FAST ? 8 : 1)
        for (int i = 0; i < SLOT_ROWS; ++i) {
            const int s = j * SLOT_ROWS + i;
            const Horizontal below =
                horizontal<FAST>(stage + s * STAGE_STRIDE, s, halo, skew, it, f, ln);
            if (j > 0 || i >= 2) {  // output row s - 2 has its three rows
                const u32 out = sobel4(above, at, below, k);
                store_row<FAST>(dst + (u64)(s - 2) * row, s - 2, it, f, ln, out);
            }
            above = at;
            at = below;
        }
        __syncwarp();  // every lane has read the slot: it may be overwritten
        if (has_next)
            stage_slot(j, next, stage, ln.lane);
        else
            commit_slot();  // an empty group keeps the count: the slot read next is the oldest
    }
}

// ---- the kernel -------------------------------------------------------------------------------

// frames: n_frames x height x width x 3 bytes (BGR), 16-byte aligned, C-contiguous.
// edges:  n_frames x height x width bytes, C-contiguous, any alignment.
// grid:   at most ceil(n_items / WARPS) blocks of THREADS threads, with
//         edgecli.edges.variants.SHARED_BYTES of dynamic shared memory;
//         n_items = n_frames * tiles_x * ceil(height / 30), tiles_x = ceil(width / 128).
// (The 1: ptxas need only fit one block per SM, so it takes the registers it wants, and no
// spills; shared memory, not registers, sets how many blocks fit an SM. edgecli.edges.kernels holds
// the grid to edgecli.edges.variants.WARPS_PER_SM warps an SM, where more would fit.)
extern "C" __global__ void __launch_bounds__(THREADS, 1)
edges_bgr(const unsigned char* __restrict__ frames, unsigned char* __restrict__ edges,
          int n_frames, int height, int width, int tiles_x, int tiles_per_frame,
          int threshold) {
    extern __shared__ __align__(128) unsigned char shared[];

    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int n_items = n_frames * tiles_per_frame;
    const int first_item = blockIdx.x * WARPS + warp;
    const int item_step = gridDim.x * WARPS;
    if (first_item >= n_items) return;              // whole warps leave: no __syncthreads below

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
    const bool fast_frames = width % 16 == 0 && ((u64)edges & 3ull) == 0;

    unsigned char* stage = shared + warp * WARP_SHARED_BYTES;
    Item it = item_at(first_item, f, fast_frames);
    RowCopy copy = plan_row(lane, it, f);
#pragma unroll
    for (int j = 0; j < SLOTS; ++j) stage_slot(j, copy, stage, lane);

    for (int item = first_item; item < n_items; item += item_step) {
        const int skew = copy.skew;  // of this lane's row of `it`
        const bool has_next = item + item_step < n_items;
        const Item next = item_at(has_next ? item + item_step : item, f, fast_frames);
        copy = plan_row(lane, next, f);
        Lane ln;
        ln.lane = lane;
        ln.x = it.x0 + 4 * lane;
        // In a fast item every staged row starts at byte 3 * xs of a 16-byte aligned row.
        ln.offset = ((3 * it.xs) & 15) + 3 * (ln.x - it.xs);
        const int xl = border_source(it.x0 - 1, width);
        const int xr = border_source(it.x0 + TILE_W, width);
        ln.left = xl < 0 ? -1 : 3 * (xl - it.xs);
        ln.right = xr < 0 ? -1 : 3 * (xr - it.xs);
        if (it.fast)
            item_rows<true>(stage, edges, it, skew, copy, has_next, f, ln, k);
        else
            item_rows<false>(stage, edges, it, skew, copy, has_next, f, ln, k);
        it = next;
    }
}

// ---- 1-bit PNG rows ---------------------------------------------------------------------------

// The edge maps as the scanlines of 1-bit grayscale PNGs (edgecli --png-bits 1), so that the
// host copies back an eighth of the bytes and its encoders only compress.
// edges: n_rows x width bytes (the frames' rows, one after another), C-contiguous.
// rows:  n_rows x row_bytes, row_bytes = 1 + ceil(width / 8): each row's PNG filter byte (0,
//        none), then its pixels as bits, the first pixel in the most significant bit, a nonzero
//        pixel a 1 and the last byte padded with 0 bits (edgecli.output.png.png_rows_1bit).
// grid:  any; a thread per output byte, grid-stride.
extern "C" __global__ void pack_rows_1bit(const unsigned char* __restrict__ edges,
                                          unsigned char* __restrict__ rows, long long n_rows,
                                          int width, int row_bytes) {
    const long long total = n_rows * (long long)row_bytes;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
        const long long r = i / row_bytes;
        const int j = (int)(i - r * row_bytes) - 1;  // the byte's first pixel / 8; -1: filter
        u32 byte = 0u;
        if (j >= 0) {
            const unsigned char* p = edges + r * (long long)width + 8ll * j;
            const int n = min(8, width - 8 * j);
            if (n == 8 && ((u64)p & 7ull) == 0) {
                const u64 v = *reinterpret_cast<const u64*>(p);
#pragma unroll
                for (int k = 0; k < 8; ++k)
                    byte |= (u32)(((v >> (8 * k)) & 255ull) != 0) << (7 - k);
            } else {
                for (int k = 0; k < n; ++k) byte |= (u32)(p[k] != 0) << (7 - k);
            }
        }
        rows[i] = (unsigned char)byte;
    }
}
