// canny.cu: cv2.Canny(gray, low, high, apertureSize=3, L2gradient) of BGR frames, gray being the
// contract's luma (docs/contract.md, which equals cv2.cvtColor(BGR2GRAY)), as four kernels
// launched one after another on one stream by edgecli.edges.cuda_canny.launch_canny:
//
//   canny_local   per 32 x 32 tile: luma -> Sobel dx, dy (int, BORDER_REPLICATE) -> magnitude
//                 -> non-maximum suppression -> class of each pixel (none, candidate, strong);
//                 then the tile's candidates joined 8-connected in shared memory (union-find):
//                 each candidate's label is its tile component's root, and each root's class
//                 says so, and whether the component holds a strong pixel. Classes go to the
//                 output buffer.
//   canny_merge   per tile: its border pixels joined with the candidates of the tiles around
//                 it, in the labels of the whole frame (union-find on global memory).
//   canny_flag    per tile component root: its label pointed straight at the frame
//                 component's root, which it marks if the tile component holds a strong pixel.
//   canny_output  per pixel: 255 for a candidate whose root is marked (its component holds a
//                 strong pixel: cv2's hysteresis), 0 for every other pixel, over the classes.
//
// cv2's steps (OpenCV modules/imgproc/src/canny.cpp), on integers throughout:
//   magnitude m = |dx| + |dy| (l1) or dx^2 + dy^2 (l2); pixels outside the frame count as 0.
//   candidate: m > low, and a local maximum across the gradient, with TG22 = round(tan(22.5°)
//   * 2^15), x = |dx|, y = |dy| << 15: horizontal (y < x * TG22): m > left and m >= right;
//   vertical (y > x * TG22 + (x << 16)): m > above and m >= below; else diagonal, with
//   s = sign(dx ^ dy): m > above[-s] and m > below[+s]. Strong: a candidate with m > high.
//   Edge: a candidate 8-connected through candidates to a strong pixel. Every pixel is
//   computed, the frame's border rows and columns included.
//
// The thresholds (low <= high, cv2's swap, l2's clamp and square already applied) are runtime
// arguments; the norm is a -D definition from edgecli.edges.variants.canny_defines():
//   CANNY_NORM   CANNY_NORM_L1 | CANNY_NORM_L2
//
// Union-find: labels are indices of pixels within their frame; a label never exceeds its
// pixel's index, so a root is the smallest index of its tree and two trees join by pointing
// the larger root at the smaller with atomicMin, retried from the value atomicMin found when
// another thread had joined that root first. Finds halve the path they walk (atomicMin again:
// it only ever moves a label closer to its root), which bounds the work however the components
// wind (a spiral through every tile, a checkerboard): no pass repeats until nothing changes.
// Only the tiles' roots walk the frame's trees after the merge (every other candidate's label
// is its tile root, or an ancestor of it), and one atomic a tile component marks its root: a
// frame-wide component costs a walk per tile it crosses, not one per pixel.
// The components, and so the output, do not depend on the order the threads run in.
//
// No #include and no inline PTX: NVRTC compiles this file as it is, and tests/cuda_host.py
// builds it for the CPU.

#define CANNY_NORM_L1 1
#define CANNY_NORM_L2 2

#ifndef CANNY_NORM
#error "CANNY_NORM is not defined: compile through edgecli.edges.variants.canny_defines()"
#endif
#if CANNY_NORM != CANNY_NORM_L1 && CANNY_NORM != CANNY_NORM_L2
#error "CANNY_NORM must be CANNY_NORM_L1 or CANNY_NORM_L2"
#endif

typedef unsigned int u32;
typedef unsigned long long u64;

// ---- geometry (edgecli.edges.variants's CANNY_* constants are the same numbers) -------------
#define TILE_W 32
#define TILE_H 32
#define LOCAL_THREADS 256                           // canny_local: a thread a column, 4 rows
#define ROWS_PER_THREAD (TILE_W * TILE_H / LOCAL_THREADS)
// Magnitudes are needed one pixel around the tile (the neighbours non-maximum suppression
// compares), and their Sobel one pixel around those: luma is staged with a 2-pixel halo.
#define LUMA_W (TILE_W + 4)
#define LUMA_H (TILE_H + 4)
#define MAG_W (TILE_W + 2)
#define MAG_H (TILE_H + 2)
// canny_merge: the tile's top row, then its left and right columns below that row.
#define MERGE_THREADS (TILE_W + 2 * (TILE_H - 1))
#define PIXEL_THREADS 256                           // canny_flag, canny_output

static_assert(TILE_W * TILE_H % LOCAL_THREADS == 0 && LOCAL_THREADS % TILE_W == 0,
              "canny_local's threads cover the tile in whole rows");
static_assert(TILE_W == 32 && TILE_H == 32 && MERGE_THREADS == 94,
              "edgecli.edges.variants.CANNY_TILE and CANNY_MERGE_THREADS");

// A pixel's class byte: none (0), else a candidate's bits.
#define CLASS_NONE 0
#define CLASS_CANDIDATE 1
#define CLASS_STRONG 2
#define CLASS_TILE_ROOT 4                           // the root of its tile component
#define CLASS_TILE_STRONG 8                         // ... which holds a strong pixel

// A root's label is its own index; this bit marks the roots of components that hold a strong
// pixel (canny_local's in a tile, canny_flag's in the frame). Frames have fewer than 2^31
// pixels (launch_canny checks).
#define ROOT_STRONG 0x80000000u
#define LABEL_INDEX 0x7FFFFFFFu

#define CANNY_SHIFT 15
#define TG22 13573                                  // (int)(tan(22.5°) * 2^15 + 0.5)

// ---- steps 1 to 5 ------------------------------------------------------------------------------

__device__ __forceinline__ int luma_of(const unsigned char* bgr) {
    return (int)((9798u * bgr[2] + 19235u * bgr[1] + 3735u * bgr[0] + 16384u) >> 15);
}

__device__ __forceinline__ int clamp_index(int i, int n) { return min(max(i, 0), n - 1); }

// Sobel of the staged luma around luma[r][c]: cv2.Sobel's 3x3 kernels, dx right minus left,
// dy below minus above.
__device__ __forceinline__ void sobel(const int (*luma)[LUMA_W], int r, int c, int& dx, int& dy) {
    dx = (luma[r - 1][c + 1] - luma[r - 1][c - 1]) + 2 * (luma[r][c + 1] - luma[r][c - 1])
       + (luma[r + 1][c + 1] - luma[r + 1][c - 1]);
    dy = (luma[r + 1][c - 1] + 2 * luma[r + 1][c] + luma[r + 1][c + 1])
       - (luma[r - 1][c - 1] + 2 * luma[r - 1][c] + luma[r - 1][c + 1]);
}

__device__ __forceinline__ int magnitude(int dx, int dy) {
#if CANNY_NORM == CANNY_NORM_L1
    return abs(dx) + abs(dy);
#else
    return dx * dx + dy * dy;
#endif
}

// The class of the pixel at mag[r][c], whose Sobel is dx, dy: non-maximum suppression across
// its gradient, then the two thresholds.
__device__ __forceinline__ int classify(const int (*mag)[MAG_W], int r, int c, int dx, int dy,
                                        int low, int high) {
    const int m = mag[r][c];
    if (m <= low) return CLASS_NONE;
    const int x = abs(dx);
    const int y = abs(dy) << CANNY_SHIFT;
    const int tg22x = x * TG22;
    bool peak;
    if (y < tg22x) {
        peak = m > mag[r][c - 1] && m >= mag[r][c + 1];
    } else if (y > tg22x + (x << (CANNY_SHIFT + 1))) {
        peak = m > mag[r - 1][c] && m >= mag[r + 1][c];
    } else {
        const int s = (dx ^ dy) < 0 ? -1 : 1;
        peak = m > mag[r - 1][c - s] && m > mag[r + 1][c + s];
    }
    if (!peak) return CLASS_NONE;
    return m > high ? CLASS_STRONG : CLASS_CANDIDATE;
}

// ---- union-find --------------------------------------------------------------------------------

// The root of x's tree, halving the path on the way. Labels are read volatile: other threads
// (and, in global memory, other blocks) join and shorten trees meanwhile, and every value read
// is still an ancestor, so a stale one only costs a step.
__device__ __forceinline__ u32 find_root(u32* labels, u32 x) {
    const volatile u32* read = labels;
    for (;;) {
        const u32 parent = read[x] & LABEL_INDEX;
        if (parent == x) return x;
        const u32 grandparent = read[parent] & LABEL_INDEX;
        if (grandparent != parent) atomicMin(labels + x, grandparent);
        x = grandparent;
    }
}

// Joins the trees of a and b.
__device__ __forceinline__ void unite(u32* labels, u32 a, u32 b) {
    for (;;) {
        a = find_root(labels, a);
        b = find_root(labels, b);
        if (a == b) return;
        if (a > b) {
            const u32 t = a;
            a = b;
            b = t;
        }
        const u32 old = atomicMin(labels + b, a);
        if (old == b) return;                       // b was a root: it now points at a
        b = old;                                    // b had been joined first: join a with that
    }
}

// The neighbours a pixel joins with, (column, row) offsets: the four of the 8-neighbourhood
// that come before it in row-major order, so that each adjacent pair is looked at once.
__device__ __forceinline__ int back_dx(int k) { return k == 0 ? -1 : k - 2; }  // -1 -1 0 +1
__device__ __forceinline__ int back_dy(int k) { return k == 0 ? 0 : -1; }      //  0 -1 -1 -1

// ---- the kernels -------------------------------------------------------------------------------

// frames:  n_frames x height x width x 3 bytes (BGR), C-contiguous.
// classes: n_frames x height x width bytes: every pixel's class, written here.
// labels:  n_frames x height x width u32: a candidate's tile root, as an index in its frame;
//          other pixels' labels are left as they were (nothing reads them).
// grid:    (tiles_x * tiles_y, n_frames) blocks of LOCAL_THREADS threads.
extern "C" __global__ void __launch_bounds__(LOCAL_THREADS)
canny_local(const unsigned char* __restrict__ frames, unsigned char* __restrict__ classes,
            u32* __restrict__ labels, int height, int width, int tiles_x, int low, int high) {
    __shared__ int luma[LUMA_H][LUMA_W];
    __shared__ int mag[MAG_H][MAG_W];
    __shared__ u32 tile_labels[TILE_H * TILE_W];
    __shared__ unsigned char tile_classes[TILE_H * TILE_W];

    const int t = threadIdx.x;
    const int tile_y = blockIdx.x / tiles_x;
    const int x0 = (blockIdx.x - tile_y * tiles_x) * TILE_W;
    const int y0 = tile_y * TILE_H;
    const u64 frame_pixels = (u64)height * (u64)width;
    const unsigned char* frame = frames + 3ull * frame_pixels * blockIdx.y;

    // Luma of the tile and its halo; a pixel outside the frame takes its nearest edge pixel's
    // (BORDER_REPLICATE: each coordinate clamped on its own).
    for (int i = t; i < LUMA_H * LUMA_W; i += LOCAL_THREADS) {
        const int r = i / LUMA_W, c = i - r * LUMA_W;
        const int y = clamp_index(y0 - 2 + r, height), x = clamp_index(x0 - 2 + c, width);
        luma[r][c] = luma_of(frame + 3ull * ((u64)y * (u64)width + (u64)x));
    }
    __syncthreads();  // every thread's luma is staged

    // Magnitudes of the tile and one pixel around it; 0 outside the frame.
    for (int i = t; i < MAG_H * MAG_W; i += LOCAL_THREADS) {
        const int r = i / MAG_W, c = i - r * MAG_W;
        const int y = y0 - 1 + r, x = x0 - 1 + c;
        int m = 0;
        if (y >= 0 && y < height && x >= 0 && x < width) {
            int dx, dy;
            sobel(luma, r + 1, c + 1, dx, dy);
            m = magnitude(dx, dy);
        }
        mag[r][c] = m;
    }
    __syncthreads();  // the neighbours' magnitudes are in

    // Thread t: column tx of the tile, rows ty0, ty0 + 8, ...
    // Thread t: column tx of the tile, rows ty0, ty0 + 8, ... Each phase reads the classes
    // back from shared memory rather than keeping them in registers across the unions.
    const int tx = t % TILE_W, ty0 = t / TILE_W;
    const int x = x0 + tx;
#pragma unroll
    for (int k = 0; k < ROWS_PER_THREAD; ++k) {
        const int ty = ty0 + k * (LOCAL_THREADS / TILE_W);
        const int y = y0 + ty;
        int cls = CLASS_NONE;
        if (x < width && y < height) {
            int dx, dy;
            sobel(luma, ty + 2, tx + 2, dx, dy);
            cls = classify(mag, ty + 1, tx + 1, dx, dy, low, high);
        }
        tile_classes[ty * TILE_W + tx] = (unsigned char)cls;
        tile_labels[ty * TILE_W + tx] = (u32)(ty * TILE_W + tx);
    }
    __syncthreads();  // every class and starting label is in

#pragma unroll
    for (int k = 0; k < ROWS_PER_THREAD; ++k) {
        const int ty = ty0 + k * (LOCAL_THREADS / TILE_W);
        const u32 i = (u32)(ty * TILE_W + tx);
        if (tile_classes[i] == CLASS_NONE) continue;
        for (int j = 0; j < 4; ++j) {
            const int nx = tx + back_dx(j), ny = ty + back_dy(j);
            if (nx < 0 || nx >= TILE_W || ny < 0) continue;  // another tile's: canny_merge
            if (tile_classes[ny * TILE_W + nx] != CLASS_NONE)
                unite(tile_labels, i, (u32)(ny * TILE_W + nx));
        }
    }
    __syncthreads();  // the tile's components are whole

#pragma unroll
    for (int k = 0; k < ROWS_PER_THREAD; ++k) {
        const u32 i = (u32)((ty0 + k * (LOCAL_THREADS / TILE_W)) * TILE_W + tx);
        if (tile_classes[i] == CLASS_STRONG)
            atomicOr(tile_labels + find_root(tile_labels, i), ROOT_STRONG);
    }
    __syncthreads();  // the roots of strong components are marked

    unsigned char* frame_classes = classes + frame_pixels * blockIdx.y;
    u32* frame_labels = labels + frame_pixels * blockIdx.y;
#pragma unroll
    for (int k = 0; k < ROWS_PER_THREAD; ++k) {
        const int ty = ty0 + k * (LOCAL_THREADS / TILE_W);
        const int y = y0 + ty;
        if (x >= width || y >= height) continue;
        const u64 p = (u64)y * (u64)width + (u64)x;
        const u32 i = (u32)(ty * TILE_W + tx);
        int cls = tile_classes[i];
        if (cls != CLASS_NONE) {
            const u32 root = find_root(tile_labels, i);
            if (root == i)
                cls |= CLASS_TILE_ROOT | ((tile_labels[i] & ROOT_STRONG) ? CLASS_TILE_STRONG : 0);
            // Tile order is frame order within a tile, so the root keeps the smallest index.
            const u32 rx = root % TILE_W, ry = root / TILE_W;
            frame_labels[p] = (u32)(y0 + (int)ry) * (u32)width + (u32)(x0 + (int)rx);
        }
        frame_classes[p] = (unsigned char)cls;
    }
}

// classes, labels: as canny_local left them. Joins each candidate on the tile's top row and
// its left and right columns with its candidate neighbours in other tiles.
// grid: (tiles_x * tiles_y, n_frames) blocks of MERGE_THREADS threads.
extern "C" __global__ void __launch_bounds__(MERGE_THREADS)
canny_merge(const unsigned char* __restrict__ classes, u32* __restrict__ labels, int height,
            int width, int tiles_x) {
    const int t = threadIdx.x;
    const int tile_y = blockIdx.x / tiles_x;
    const int x0 = (blockIdx.x - tile_y * tiles_x) * TILE_W;
    const int y0 = tile_y * TILE_H;
    int x, y;
    if (t < TILE_W) {
        x = x0 + t;
        y = y0;
    } else if (t < TILE_W + TILE_H - 1) {
        x = x0;
        y = y0 + 1 + (t - TILE_W);
    } else {
        x = x0 + TILE_W - 1;
        y = y0 + 1 + (t - TILE_W - (TILE_H - 1));
    }
    if (x >= width || y >= height) return;
    const u64 frame_pixels = (u64)height * (u64)width;
    const unsigned char* frame_classes = classes + frame_pixels * blockIdx.y;
    u32* frame_labels = labels + frame_pixels * blockIdx.y;
    const u32 p = (u32)y * (u32)width + (u32)x;
    if (frame_classes[p] == CLASS_NONE) return;
    for (int j = 0; j < 4; ++j) {
        const int nx = x + back_dx(j), ny = y + back_dy(j);
        if (nx < 0 || nx >= width || ny < 0) continue;
        if (nx >= x0 && nx < x0 + TILE_W && ny >= y0) continue;  // the tile's own: canny_local
        const u32 q = (u32)ny * (u32)width + (u32)nx;
        if (frame_classes[q] != CLASS_NONE) unite(frame_labels, p, q);
    }
}

// classes, labels: as canny_merge left them (the components are whole). Points each tile
// root's label at its frame component's root, and marks that root where the tile component
// holds a strong pixel. Every node of the frame's trees but their leaves is a tile root (only
// roots are ever joined), so after this pass a tile root's label is its root, and any other
// candidate's is a tile root.
// grid: (any, n_frames) blocks of PIXEL_THREADS threads, striding over the frame's pixels.
extern "C" __global__ void __launch_bounds__(PIXEL_THREADS)
canny_flag(const unsigned char* __restrict__ classes, u32* __restrict__ labels,
           int frame_pixels) {
    const unsigned char* frame_classes = classes + (u64)frame_pixels * blockIdx.y;
    u32* frame_labels = labels + (u64)frame_pixels * blockIdx.y;
    const u32 step = gridDim.x * PIXEL_THREADS;
    for (u32 p = blockIdx.x * PIXEL_THREADS + threadIdx.x; p < (u32)frame_pixels; p += step) {
        const int cls = frame_classes[p];
        if (!(cls & CLASS_TILE_ROOT)) continue;
        const u32 root = find_root(frame_labels, p);
        // A root's own label keeps its index, and only roots carry the mark: a non-root's
        // label never has it for find_root to lose.
        if (root != p) atomicMin(frame_labels + p, root);
        if (cls & CLASS_TILE_STRONG) atomicOr(frame_labels + root, ROOT_STRONG);
    }
}

// classes: as canny_local left them, overwritten here with the edge map (0 or 255).
// labels: as canny_flag left them: a candidate's label is a tile root (its own, or an ancestor
// of it, or itself), whose label is the frame component's root, marked or not.
// grid: (any, n_frames) blocks of PIXEL_THREADS threads, striding over the frame's pixels.
extern "C" __global__ void __launch_bounds__(PIXEL_THREADS)
canny_output(unsigned char* __restrict__ classes, const u32* __restrict__ labels,
             int frame_pixels) {
    unsigned char* frame_classes = classes + (u64)frame_pixels * blockIdx.y;
    const u32* frame_labels = labels + (u64)frame_pixels * blockIdx.y;
    const u32 step = gridDim.x * PIXEL_THREADS;
    for (u32 p = blockIdx.x * PIXEL_THREADS + threadIdx.x; p < (u32)frame_pixels; p += step) {
        unsigned char edge = 0;
        if (frame_classes[p] != CLASS_NONE) {
            const u32 tile_root = frame_labels[p] & LABEL_INDEX;
            const u32 root = frame_labels[tile_root] & LABEL_INDEX;
            edge = (frame_labels[root] & ROOT_STRONG) ? 255 : 0;
        }
        frame_classes[p] = edge;
    }
}
