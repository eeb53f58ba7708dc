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
//   EDGES_TILE_H   output rows per work item: TILE_H + 2 input rows, a multiple of EDGES_AHEAD,
//                  at most 32
//   EDGES_WARPS    warps per block (each works on its own; the block only groups them)
//   EDGES_AHEAD    input rows loaded before they are used: 6 or 12
// Runtime arguments are typed by edgecli.gpu.launch_edges(): all int32, the threshold already
// clamped to 2040 (so T^2 fits). No shared memory.
//
// Work: the frames are cut into items of 128 columns x TILE_H rows; item i of frame n is work
// item n * tiles_per_frame + i. The grid is persistent: warp g of the grid takes items g,
// g + (warps in the grid), ... and never waits for another warp. Lane l owns pixels
// x0 + 4l .. x0 + 4l + 3. An item needs the input rows y0 - 1 .. y0 + TILE_H ("staged rows" s =
// 0 .. TILE_H + 1, each clipped to the columns x0 - 1 .. x0 + 128), and lane s plans row s:
//   - its address, with the border applied (rows outside the frame read their border row, or a
//     row of zeros for the constant border), planned one item ahead;
//   - its halo: the luma of the two columns beside the item, x0 - 1 and x0 + 128, loaded one
//     item ahead.
// The lane's 12 bytes of each row are loaded straight into registers, three 32-bit loads a row,
// AHEAD rows before they are used (a ring of registers; the last rows of an item load the first
// rows of the warp's next item). Per row each lane turns its bytes into luma (two dp2a a pixel),
// fetches the neighbouring lanes' edge pixels with two shuffles (lanes 0 and 31 get the halo),
// computes the horizontal smooth and difference, and, three rows in hand, Gx, Gy, the threshold
// and one 4-byte store. Two pixels per 32-bit register throughout.
//
// (Shared-memory staging with one bulk copy per row was measured first and capped below the
// copy bandwidth even without arithmetic: benchmarks/RESULTS.md.)
//
// Items of frames whose width is a multiple of 4 that lie wholly inside the frame's width (every
// column of tiles of every common video width) take a fast path: word-aligned loads, rows
// prefetched. Others (the right-hand column of tiles of other widths, and widths that are not a
// multiple of 4) take a general path that loads byte by byte as it goes, with the same
// arithmetic.
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
#ifndef EDGES_TILE_H
#define EDGES_TILE_H 28
#endif
#ifndef EDGES_WARPS
#define EDGES_WARPS 4
#endif
#ifndef EDGES_AHEAD
#define EDGES_AHEAD 6
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

// ---- geometry ---------------------------------------------------------------------------------
#define FULL_MASK 0xFFFFFFFFu
#define TILE_W 128                                  // 32 lanes x 4 pixels
#define TILE_H EDGES_TILE_H
#define WARPS EDGES_WARPS
#define THREADS (32 * WARPS)
#define STAGED_ROWS (TILE_H + 2)                    // one row of halo above and below
#define AHEAD EDGES_AHEAD                           // rows loaded before they are used

static_assert(AHEAD % 6 == 0 && AHEAD <= 12, "EDGES_AHEAD: 6 or 12");
static_assert(STAGED_ROWS % AHEAD == 0 && STAGED_ROWS <= 32 && TILE_H >= 10,
              "EDGES_TILE_H: TILE_H + 2 a multiple of EDGES_AHEAD (the ring wraps at item ends), "
              "at most 32 (one lane plans each row)");
static_assert(WARPS >= 1 && WARPS <= 32, "EDGES_WARPS");

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

__device__ __forceinline__ u64 shfl64(u64 v, int lane) {
    const u32 lo = __shfl_sync(FULL_MASK, (u32)v, lane);
    const u32 hi = __shfl_sync(FULL_MASK, (u32)(v >> 32), lane);
    return ((u64)hi << 32) | lo;
}

// A 32-bit load through the read-only path (the frames never change during a launch).
__device__ __forceinline__ u32 load_global(const void* p) {
    u32 v;
    asm("ld.global.nc.u32 %0, [%1];" : "=r"(v) : "l"(p));
    return v;
}
__device__ __forceinline__ u32 load_global_byte(const unsigned char* p) {
    unsigned short v;
    asm("ld.global.nc.u8 %0, [%1];" : "=h"(v) : "l"(p));
    return v;
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

// Luma of the BGR pixel at `p` (global memory).
__device__ __forceinline__ u32 pixel_luma(const unsigned char* p) {
    return luma_of(load_global_byte(p), load_global_byte(p + 1), load_global_byte(p + 2));
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
    // Hopper's 16-bit-lane max-of-sum (DPX) gives |v| + c as max(v' + c, 2b - v' + c) for a
    // lane v' = v + b: two instructions per absolute value. Every lane stays in [0, 34807].
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
    u64 base;           // address of the first byte
    u64 row_bytes, frame_bytes;
    int height, width;
    int tiles_x, tiles_per_frame;
};

struct Item {
    int n, x0, y0;      // frame, first column, first output row
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

// Whether an item takes the fast path: word-aligned loads of whole lanes, and 4-byte stores.
__device__ __forceinline__ bool fast_item(const Item& it, const Frames& f, bool aligned_output) {
    return f.width % 4 == 0 && it.x0 + TILE_W <= f.width && aligned_output;
}

// Lane s's plan of staged row s of an item, made one item ahead.
struct RowPlan {
    u64 row;            // address of pixel 0 of the input row that stands at staged row s
                        // (the border applied), 0 for a row of zeros
    u32 left[3], right[3];  // the BGR bytes of the halo pixels x0 - 1 and x0 + 128 (0s where the
                        // border makes them luma 0), loaded now, used an item later
};

__device__ __forceinline__ RowPlan plan_row(int s, const Item& it, const Frames& f, bool load) {
    RowPlan p;
    p.row = 0;
#pragma unroll
    for (int i = 0; i < 3; ++i) p.left[i] = p.right[i] = 0u;
    // Rows past the bottom halo (items that overhang the frame) are never used: zeros.
    const int ys = s < STAGED_ROWS ? border_source(it.y0 - 1 + s, f.height) : -1;
    if (!load || ys < 0) return p;
    p.row = f.base + f.frame_bytes * (u64)it.n + f.row_bytes * (u64)ys;
    const unsigned char* row = reinterpret_cast<const unsigned char*>(p.row);
    const int xl = border_source(it.x0 - 1, f.width);
    const int xr = border_source(it.x0 + TILE_W, f.width);
    if (xl >= 0) {
#pragma unroll
        for (int i = 0; i < 3; ++i) p.left[i] = load_global_byte(row + 3 * xl + i);
    }
    if (xr >= 0) {
#pragma unroll
        for (int i = 0; i < 3; ++i) p.right[i] = load_global_byte(row + 3 * xr + i);
    }
    return p;
}

// The halo of a planned row: luma of x0 - 1 in bits 16..23, of x0 + 128 in bits 0..7.
__device__ __forceinline__ u32 plan_halo(const RowPlan& p) {
    return (luma_of(p.left[0], p.left[1], p.left[2]) << 16)
         | luma_of(p.right[0], p.right[1], p.right[2]);
}

// Where the fast path loads a planned row from: the offset of its pixel x0 from the start of the
// frames, in 4-byte words (whole words on the fast path). Offsets stay below 2^31 words:
// launches of less than 8 GB of frames (edgecli.gpu checks). From ZERO_ROW up nothing is
// loaded: ZERO_ROW itself marks a row of zeros (the constant border; its luma is 0), NO_LOAD a
// load ahead for an item that will not use it (off the fast path, or past the last item).
#define ZERO_ROW 0x80000000u
#define NO_LOAD 0xFFFFFFFFu

__device__ __forceinline__ u32 fast_offset(const RowPlan& p, const Item& it, const Frames& f) {
    return p.row ? (u32)((p.row - f.base + 3ull * (u64)it.x0) >> 2) : ZERO_ROW;
}

// ---- rows -------------------------------------------------------------------------------------

// What a lane needs to process one item's rows.
struct Lane {
    int lane;
    int x;              // its first pixel's column
    u32 halo;           // lane s: the halo of staged row s (plan_halo)
    u64 row;            // lane s: pixel 0 of staged row s, 0 for zeros (general path)
    u32 prefetch;       // lane s: fast_offset() of the row to load after using row s
    u64 words;          // the address of this lane's first word at word offset 0
    int cols[4];        // general path: byte offsets of the lane's 4 pixels' border sources in a
                        // row, -1 for luma 0
};

// The words of one row loaded ahead, and whether they stand for a row of zeros.
struct Loaded {
    u32 w[3];
    bool zero;
};

// Load the lane's 3 words of the row at fast_offset `offset` (or nothing, from ZERO_ROW up).
__device__ __forceinline__ void load_row(u32 offset, const Lane& ln, Loaded& row) {
    u64 address;  // ln.words + 4 * offset, in one wide multiply-add
    asm("mad.wide.u32 %0, %1, 4, %2;" : "=l"(address) : "r"(offset), "l"(ln.words));
    const u32* p = reinterpret_cast<const u32*>(address);
    if (offset < ZERO_ROW) {
        row.w[0] = load_global(p);
        row.w[1] = load_global(p + 1);
        row.w[2] = load_global(p + 2);
    }
    row.zero = EDGES_BORDER == EDGES_BORDER_CONSTANT && offset >= ZERO_ROW;
}

// The lane's 4 pixels of staged row s as luma, (p0, p2) and (p1, p3): from the words loaded
// ahead (fast), or byte by byte now (general).
template <bool FAST>
__device__ __forceinline__ void row_luma(const Loaded& loaded, int s, const Lane& ln, u32& even,
                                         u32& odd) {
    if (FAST) {
        luma4(loaded.w[0], loaded.w[1], loaded.w[2], even, odd);
        if (loaded.zero) even = odd = 0u;
        return;
    }
    const u64 row = shfl64(ln.row, s);
    const unsigned char* p = reinterpret_cast<const unsigned char*>(row);
    u32 y[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) y[j] = (row && ln.cols[j] >= 0) ? pixel_luma(p + ln.cols[j]) : 0u;
    even = y[0] | (y[2] << 16);
    odd = y[1] | (y[3] << 16);
}

// Staged row s: luma, then the horizontal smooth and difference of the lane's 4 pixels.
template <bool FAST>
__device__ __forceinline__ Horizontal horizontal(const Loaded& loaded, int s, const Lane& ln) {
    u32 e, o;
    row_luma<FAST>(loaded, s, ln, e, o);
    // Pixel x - 1 is the high lane of the left neighbour's odd word, x + 4 the low lane of the
    // right neighbour's even word. The shuffles rotate: lane 0 reads lane 31, which sends the
    // left halo instead of its odd word, and lane 31 reads lane 0, which sends the right halo.
    const u32 halo = __shfl_sync(FULL_MASK, ln.halo, s);
    const u32 left = __shfl_sync(FULL_MASK, ln.lane == 31 ? halo : o, (ln.lane + 31) & 31);
    const u32 right = __shfl_sync(FULL_MASK, ln.lane == 0 ? halo : e, (ln.lane + 1) & 31);
    const u32 l_even = shift_lanes(left, o);        // (p-1, p1): left of (p0, p2)
    const u32 r_odd = shift_lanes(e, right);        // (p2, p4): right of (p1, p3)
    Horizontal h;
    h.smooth_even = l_even + 2u * e + o;
    h.diff_even = o - l_even + LANES(255);
    h.smooth_odd = e + 2u * o + r_odd;
    h.diff_odd = r_odd - e + LANES(255);
    return h;
}

// Output row t of the item (image row y0 + t): the lane's 4 bytes at `dst`.
template <bool FAST>
__device__ __forceinline__ void store_row(unsigned char* dst, const Frames& f, const Lane& ln,
                                          u32 out) {
    if (FAST) {
        *reinterpret_cast<u32*>(dst) = out;   // width % 4 == 0 and edges 4-byte aligned
        return;
    }
    if (ln.x >= f.width) return;
    if (ln.x + 3 < f.width && ((u64)dst & 3ull) == 0) {
        *reinterpret_cast<u32*>(dst) = out;
    } else {
#pragma unroll
        for (int j = 0; j < 4; ++j)
            if (ln.x + j < f.width) dst[j] = (unsigned char)(out >> (8 * j));
    }
}

// One item's rows. ring[r] holds staged row s where s % AHEAD == r (loaded AHEAD rows earlier);
// after using row s the lane loads the row that lane s's `prefetch` names into the same slot.
// AHEAD is a multiple of 3, so the three rows in hand rotate through h[0..2] with the ring,
// without copies.
template <bool FAST>
__device__ __forceinline__ void item_rows(Loaded (&ring)[AHEAD], unsigned char* edges,
                                          const Item& it, const Frames& f, const Lane& ln,
                                          const Thresholds& k) {
    const u64 row = (u64)f.width;
    // Output rows t < rows_out are in the frame; staged row s completes output row s - 2.
    const int rows_out = min(TILE_H, f.height - it.y0);
    unsigned char* dst =
        edges + ((u64)it.n * (u64)f.height + (u64)it.y0) * row + (u64)ln.x - 2 * row;
    Horizontal h[3];
#pragma unroll 1
    for (int base = 0; base < STAGED_ROWS; base += AHEAD) {
#pragma unroll
        for (int r = 0; r < AHEAD; ++r) {
            const int s = base + r;
            h[r % 3] = horizontal<FAST>(ring[r], s, ln);
            load_row(__shfl_sync(FULL_MASK, ln.prefetch, s), ln, ring[r]);
            // (Computed for every row, stored for rows in the frame: no branch around it.)
            const u32 out = sobel4(h[(r + 1) % 3], h[(r + 2) % 3], h[r % 3], k);
            if ((unsigned)(s - 2) < (unsigned)rows_out) store_row<FAST>(dst, f, ln, out);
            dst += row;
        }
    }
}

// ---- the kernel -------------------------------------------------------------------------------

// frames: n_frames x height x width x 3 bytes (BGR), 16-byte aligned, C-contiguous.
// edges:  n_frames x height x width bytes, C-contiguous, any alignment.
// grid:   at most ceil(n_items / WARPS) blocks of THREADS threads; n_items = n_frames *
//         tiles_x * ceil(height / TILE_H), tiles_x = ceil(width / 128).
// (The 1: at most one block per SM is assumed, which leaves ptxas the registers it wants.)
extern "C" __global__ void __launch_bounds__(THREADS, 1)
edges_bgr(const unsigned char* __restrict__ frames, unsigned char* __restrict__ edges,
          int n_frames, int height, int width, int tiles_x, int tiles_per_frame,
          int threshold) {
    const int lane = threadIdx.x & 31;
    const int n_items = n_frames * tiles_per_frame;
    const int first_item = blockIdx.x * WARPS + (threadIdx.x >> 5);
    const int item_step = gridDim.x * WARPS;
    if (first_item >= n_items) return;

    Frames f;
    f.base = (u64)frames;
    f.row_bytes = 3ull * (u64)width;
    f.frame_bytes = f.row_bytes * (u64)height;
    f.height = height;
    f.width = width;
    f.tiles_x = tiles_x;
    f.tiles_per_frame = tiles_per_frame;
    const Thresholds k = make_thresholds(threshold);
    const bool aligned_output = ((u64)edges & 3ull) == 0;

    Item it = item_at(first_item, f);
    RowPlan plan = plan_row(lane, it, f, true);
    bool fast = fast_item(it, f, aligned_output);
    Lane ln;
    ln.lane = lane;
    ln.words = f.base + 12ull * (u64)lane;
    // The ring's first AHEAD rows: rows 0 .. AHEAD - 1 of the first item.
    Loaded ring[AHEAD];
    const u32 first_rows = fast ? fast_offset(plan, it, f) : NO_LOAD;  // lane s: row s
#pragma unroll
    for (int r = 0; r < AHEAD; ++r) load_row(__shfl_sync(FULL_MASK, first_rows, r), ln, ring[r]);

    for (int item = first_item; item < n_items; item += item_step) {
        const bool has_next = item + item_step < n_items;
        const Item next = item_at(has_next ? item + item_step : item, f);
        const RowPlan next_plan = plan_row(lane, next, f, has_next);
        const bool next_fast = has_next && fast_item(next, f, aligned_output);
        ln.x = it.x0 + 4 * lane;
        ln.halo = plan_halo(plan);
        ln.row = plan.row;
        // After row s comes row s + AHEAD of this item, or row s + AHEAD - STAGED_ROWS of the
        // next: lane s asks lane (s + AHEAD) % STAGED_ROWS, which answers for this item if it is
        // at AHEAD or beyond, else for the next.
        const u32 mine = lane >= AHEAD ? (fast ? fast_offset(plan, it, f) : NO_LOAD)
                                       : (next_fast ? fast_offset(next_plan, next, f) : NO_LOAD);
        ln.prefetch = __shfl_sync(FULL_MASK, mine, (lane + AHEAD) % STAGED_ROWS);
        if (fast) {
            item_rows<true>(ring, edges, it, f, ln, k);
        } else {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int xj = border_source(ln.x + j, width);
                ln.cols[j] = xj < 0 ? -1 : 3 * xj;
            }
            item_rows<false>(ring, edges, it, f, ln, k);
        }
        it = next;
        plan = next_plan;
        fast = next_fast;
    }
}
