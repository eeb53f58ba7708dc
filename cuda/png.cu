// PNG scanlines -> the contract's BGR frames, bit for bit as cv2.imdecode(IMREAD_COLOR) gives
// them: the rows' filters undone, then the pixels expanded to 8-bit BGR.
//
// Input: the inflated image data of N PNGs of one layout (width, height, colour type, bit
// depth; not interlaced), image i at data + i * image_stride: height rows of a filter byte and
// row_bytes filtered bytes. The kernel unfilters them in place (each row then holds its raw
// bytes after the filter byte, which stays) and writes frame i to out + i * height * width * 3
// (packed rows, as the edge kernel reads them), turned by the EXIF orientation (1 to 8) of the
// files' eXIf chunk, which cv2 applies to PNGs as to JPEGs (so the frame is width x height for
// orientations 5 to 8). Palettes: 256 BGR entries an image, entries
// past the file's PLTE zero; unused for other colour types. status[i]: 0, or PNG_BAD_FILTER
// for an image with a filter byte past 4 (a corrupt file: its frame is incomplete, and the
// CPU decodes the file for libpng's own error). edgecli/decode/gpu/png.py launches it.
//
// Why it is laid out this way. Unfiltering is sequential along a row (byte i needs the raw
// byte i - bpp: Sub, Average, Paeth) and down the columns (Up, Average, Paeth need the row
// above), so the parallelism is across rows in a wavefront and across images:
// - A warp takes a strip of 32 rows, a lane a row, and walks along the rows in steps of one
//   filter unit (bpp bytes: max(1, bits per pixel / 8)); lane k is one unit behind lane k - 1,
//   so at each step the row above's unit has just been made, one lane over, and arrives by
//   __shfl_up_sync (its upper-left neighbour is the one that arrived a step earlier). Every
//   filter takes the same steps (the predictors are computed branch-free and one is chosen),
//   so lanes whose rows have different filters never diverge. A strip takes units + 31 steps.
// - The warps of a block (one block an image) take strips in turn, each starting `lag`
//   periods (of 32 steps) after the one above: lane 0 reads the raw row above from global
//   memory, which the strip above wrote back at least one block barrier earlier. lag is at
//   least 2 (the strip above finishes a unit of its last row one period after lane 0's period
//   for it) and at least the periods of a strip over the warps, so a warp finishes a strip
//   before its next one starts. A 1080p RGB image (34 strips of 61 periods) then takes 590
//   periods rather than one warp's 2,074. Many images in flight fill the GPU: each is a block
//   of its own, and blocks are small (PNG_WARPS warps, 35 KB of shared memory), so several
//   share an SM and one's barrier waits are covered by the others' work.
// - Reads and writes are coalesced: at each period a warp loads the 32 units each of its
//   rows (and the row above) will take into shared memory, lanes side by side along a row,
//   unfilters them there, then writes the raw bytes back and the BGR pixels out the same
//   way. A lane's own walk touches only shared memory and registers.
//
// What cv2 (libpng 1.6 under OpenCV 5's PNG decoder) does to the raw pixels, rule by rule:
// - 16-bit samples: cv2 keeps the high byte (libpng's png_set_strip_16, not its rounding
//   png_set_scale_16), so a sample is its first byte.
// - Gray of 1, 2 or 4 bits: cv2 widens them to 8 by repeating the bits (png_set_expand_gray_
//   1_2_4_to_8), which is v * 255 / (2^depth - 1): 255, 85, 17 times the level.
// - Gray and gray + alpha: cv2 repeats the gray in B, G and R (png_set_gray_to_rgb).
// - Alpha (RGBA, gray + alpha, and tRNS, which libpng turns into alpha while expanding): cv2
//   drops it (png_set_strip_alpha for a 3-channel frame) without compositing over black or the
//   bKGD colour, so tRNS and bKGD change nothing.
// - Palette: cv2 looks each index up (png_set_palette_to_rgb); an index past the PLTE's
//   entries gives black, because libpng keeps a 256-entry palette zeroed past them.
// - gAMA, sBIT and the colour chunks: cv2 asks libpng for no gamma or shift, so pixels are the
//   file's levels.
// - A filter byte past 4: libpng stops with "bad adaptive filter value", so cv2 decodes nothing.

#define PNG_WARPS 4  // the most warps a block may have (the shared tiles' count)
#define PNG_SPAN 32  // units each lane takes in a period, between two barriers
#define PNG_BAD_FILTER 1

// The colour types of the PNG specification, section 11.2.2.
#define PNG_GRAY 0
#define PNG_RGB 2
#define PNG_PALETTE 3
#define PNG_GRAY_ALPHA 4
#define PNG_RGBA 6

// A filter unit in a register: bpp bytes, the first in the lowest byte.
template <int BPP>
struct UnitOf {
    typedef unsigned type;
};
template <>
struct UnitOf<6> {
    typedef unsigned long long type;
};
template <>
struct UnitOf<8> {
    typedef unsigned long long type;
};

template <typename U>
__device__ __forceinline__ int byte_of(U unit, int j) {
    return (int)((unit >> (8 * j)) & 0xFF);
}

// PNG's Paeth predictor (specification section 9.4), ties to a, then b.
__device__ __forceinline__ int paeth(int a, int b, int c) {
    const int pa = abs(b - c);
    const int pb = abs(a - c);
    const int pc = abs(a + b - 2 * c);
    if (pa <= pb && pa <= pc) return a;
    return pb <= pc ? b : c;
}

// The raw unit of filtered unit x, from the raw units left (a), above (b) and above-left (c).
template <int BPP, typename U>
__device__ __forceinline__ U unfilter_unit(U x, U a, U b, U c, int filter) {
    U raw = 0;
#pragma unroll
    for (int j = 0; j < BPP; ++j) {
        const int ra = byte_of(a, j), rb = byte_of(b, j), rc = byte_of(c, j);
        const int predicted = filter == 1   ? ra
                              : filter == 2 ? rb
                              : filter == 3 ? (ra + rb) >> 1
                              : filter == 4 ? paeth(ra, rb, rc)
                                            : 0;
        raw |= (U)((byte_of(x, j) + predicted) & 0xFF) << (8 * j);
    }
    return raw;
}

struct Layout {
    int width, height, color_type, depth, orientation;
    long long row_bytes;  // after the filter byte
    long long units;  // filter units a row
};

// Where pixel (x, y) of the image lands in the frame turned by EXIF orientation: flipped
// across (2), turned half round (3), flipped down (4), and for 5 to 8 transposed first, then
// the same (jpeg_planes.apply_exif_orientation, which decode.cu's JPEG kernel inverts).
__device__ __forceinline__ unsigned char* placed(
    unsigned char* frame, const Layout& layout, long long x, long long y) {
    const bool transposed = layout.orientation >= 5;
    const int flip = transposed ? layout.orientation - 4 : layout.orientation;
    const long long out_w = transposed ? layout.height : layout.width;
    const long long out_h = transposed ? layout.width : layout.height;
    long long ox = transposed ? y : x;
    long long oy = transposed ? x : y;
    if (flip == 2 || flip == 3) ox = out_w - 1 - ox;
    if (flip == 3 || flip == 4) oy = out_h - 1 - oy;
    return frame + (oy * out_w + ox) * 3;
}

__device__ __forceinline__ void put_bgr(unsigned char* o, int b, int g, int r) {
    o[0] = (unsigned char)b;
    o[1] = (unsigned char)g;
    o[2] = (unsigned char)r;
}

// The pixels of raw unit u of row y (one pixel, or 8 / depth of them below 8 bits) into the
// frame.
template <int BPP, typename U>
__device__ __forceinline__ void expand_unit(
    U raw, long long u, int y, const Layout& layout, const unsigned char* palette,
    unsigned char* frame) {
    if (layout.depth < 8) {
        const int per_byte = 8 / layout.depth;
        const int mask = (1 << layout.depth) - 1;
        for (int j = 0; j < per_byte; ++j) {
            const long long x = u * per_byte + j;
            if (x >= layout.width) break;  // the last byte's padding bits
            const int v = (byte_of(raw, 0) >> (8 - layout.depth * (j + 1))) & mask;
            unsigned char* o = placed(frame, layout, x, y);
            if (layout.color_type == PNG_PALETTE) {
                put_bgr(o, palette[3 * v], palette[3 * v + 1], palette[3 * v + 2]);
            } else {
                const int level = v * (255 / mask);
                put_bgr(o, level, level, level);
            }
        }
        return;
    }
    const int step = layout.depth / 8;  // a sample's bytes; its first is the high one
    unsigned char* o = placed(frame, layout, u, y);
    if (layout.color_type == PNG_PALETTE) {
        const int v = byte_of(raw, 0);
        put_bgr(o, palette[3 * v], palette[3 * v + 1], palette[3 * v + 2]);
    } else if (layout.color_type == PNG_GRAY || layout.color_type == PNG_GRAY_ALPHA) {
        const int level = byte_of(raw, 0);
        put_bgr(o, level, level, level);
    } else {
        put_bgr(o, byte_of(raw, 2 * step), byte_of(raw, step), byte_of(raw, 0));
    }
}

// One image, BPP bytes a filter unit. tile: this warp's 33 rows of PNG_SPAN + 1 units (the
// row above the strip, then the strip's 32; one unit of padding so that lanes reading down a
// column hit different banks).
template <int BPP>
__device__ void unfilter_image(
    unsigned char* __restrict__ image, unsigned char* __restrict__ frame, const Layout& layout,
    const unsigned char* palette, unsigned long long (*tile)[PNG_SPAN + 1], int* bad) {
    typedef typename UnitOf<BPP>::type U;
    const int lane = threadIdx.x;
    const int warp = threadIdx.y;
    const int warps = blockDim.y;
    const long long pitch = 1 + layout.row_bytes;
    const int strips = (layout.height + 31) / 32;
    const int periods = (int)((layout.units + 31 + PNG_SPAN - 1) / PNG_SPAN);
    const int lag = max(2, (periods + warps - 1) / warps);
    const int total = (strips - 1) * lag + periods;

    U left = 0, above_left = 0;  // raw units: this lane's last, and the row above's before it
    int filter = 0;
    for (int g = 0; g < total; ++g) {
        // The strip this warp works on in period g, if any: strips s = warp, warp + warps, ...
        // start at s * lag and last `periods`; warps * lag >= periods, so they never overlap.
        int strip = -1, p = 0;
        if (g >= warp * lag) {
            const int candidate = warp + warps * ((g - warp * lag) / (warps * lag));
            p = g - candidate * lag;
            if (candidate < strips && p < periods) strip = candidate;
        }
        if (strip >= 0) {
            const int top = strip * 32;  // the strip's first row
            const int row = top + lane;
            const bool in_image = row < layout.height;
            if (p == 0) {
                left = above_left = 0;
                filter = in_image ? image[row * pitch] : 0;
                if (filter > 4) {
                    *bad = 1;  // every such lane stores the same value
                    filter = 0;
                }
            }
            // Load: tile row 0 is the raw row above (zero above the image) at the units lane 0
            // takes, [PNG_SPAN p, +PNG_SPAN); tile row 1 + k is row top + k at the units lane k
            // takes, PNG_SPAN p - k onwards. Lanes side by side along each row.
            for (int r = 0; r <= 32; ++r) {
                const int image_row = top - 1 + r;
                const long long u = (long long)PNG_SPAN * p - (r > 0 ? r - 1 : 0) + lane;
                U unit = 0;
                if (image_row >= 0 && image_row < layout.height && u >= 0 && u < layout.units) {
                    const unsigned char* src = image + image_row * pitch + 1 + u * BPP;
#pragma unroll
                    for (int j = 0; j < BPP; ++j) unit |= (U)src[j] << (8 * j);
                }
                tile[r][lane] = unit;
            }
            __syncwarp();  // the tile is loaded before any lane reads another's loads
            for (int i = 0; i < PNG_SPAN; ++i) {
                const long long u = (long long)PNG_SPAN * p + i - lane;
                // The row above's unit u: lane k - 1 made it in the step before.
                U above = __shfl_up_sync(0xffffffffu, left, 1);
                if (lane == 0) above = (U)tile[0][i];
                if (in_image && u >= 0 && u < layout.units) {
                    const U raw = unfilter_unit<BPP>((U)tile[1 + lane][i], left, above,
                                                     above_left, filter);
                    tile[1 + lane][i] = raw;
                    left = raw;
                    above_left = above;
                }
            }
            __syncwarp();  // every lane's raw units are in the tile before any is stored
            // Store: the raw units back in place, and their pixels into the frame.
            for (int r = 1; r <= 32; ++r) {
                const int image_row = top - 1 + r;
                const long long u = (long long)PNG_SPAN * p - (r - 1) + lane;
                if (image_row < layout.height && u >= 0 && u < layout.units) {
                    const U raw = (U)tile[r][lane];
                    unsigned char* dst = image + image_row * pitch + 1 + u * BPP;
#pragma unroll
                    for (int j = 0; j < BPP; ++j) dst[j] = (unsigned char)byte_of(raw, j);
                    expand_unit<BPP>(raw, u, image_row, layout, palette, frame);
                }
            }
        }
        // The raw rows written back this period are visible to every warp of the block (the
        // next strip's lane 0 reads its row above from them), and this warp's tile is free.
        __syncthreads();
    }
}

extern "C" __global__ void __launch_bounds__(32 * PNG_WARPS) png_unfilter_to_bgr(
    unsigned char* __restrict__ data, long long image_stride,
    const unsigned char* __restrict__ palettes, unsigned char* __restrict__ out,
    int* __restrict__ status, int width, int height, int color_type, int depth,
    int orientation) {
    __shared__ unsigned long long tiles[PNG_WARPS][33][PNG_SPAN + 1];
    __shared__ unsigned char palette[256 * 3];
    __shared__ int bad;
    const int image = blockIdx.x;
    const int thread = threadIdx.y * 32 + threadIdx.x;
    const int threads = 32 * blockDim.y;
    if (thread == 0) bad = 0;
    if (color_type == PNG_PALETTE) {
        const unsigned char* mine = palettes + (long long)image * 256 * 3;
        for (int i = thread; i < 256 * 3; i += threads) palette[i] = mine[i];
    }
    __syncthreads();  // bad and the palette are set before any warp uses them

    const int channels = color_type == PNG_RGB         ? 3
                         : color_type == PNG_GRAY_ALPHA ? 2
                         : color_type == PNG_RGBA       ? 4
                                                        : 1;
    const int bits = channels * depth;
    const int bpp = max(1, bits / 8);
    Layout layout;
    layout.width = width;
    layout.height = height;
    layout.color_type = color_type;
    layout.depth = depth;
    layout.orientation = orientation;
    layout.row_bytes = ((long long)width * bits + 7) / 8;
    layout.units = layout.row_bytes / bpp;
    unsigned char* mine = data + (long long)image * image_stride;
    unsigned char* frame = out + (long long)image * height * width * 3;
    unsigned long long(*tile)[PNG_SPAN + 1] = tiles[threadIdx.y];
    switch (bpp) {
        case 1: unfilter_image<1>(mine, frame, layout, palette, tile, &bad); break;
        case 2: unfilter_image<2>(mine, frame, layout, palette, tile, &bad); break;
        case 3: unfilter_image<3>(mine, frame, layout, palette, tile, &bad); break;
        case 4: unfilter_image<4>(mine, frame, layout, palette, tile, &bad); break;
        case 6: unfilter_image<6>(mine, frame, layout, palette, tile, &bad); break;
        default: unfilter_image<8>(mine, frame, layout, palette, tile, &bad); break;
    }
    if (thread == 0) status[image] = bad ? PNG_BAD_FILTER : 0;  // after unfilter's last barrier
}
