// Decoded planes -> the contract's BGR frames, bit for bit as the CPU decoders make them.
//
// jpeg_planes_to_bgr: a batch of JPEGs' Y, Cb, Cr planes (nvJPEG's NVJPEG_OUTPUT_YUV, at their
//   native sampling) -> BGR as cv2.imdecode gives it: libjpeg-turbo's fancy upsampling
//   (jdsample.c) and YCbCr->RGB (jdcolor.c), then the EXIF orientation imdecode applies.
//   The CPU reference, with the reasoning, is edgecli/decode/jpeg_planes.py.
// nv12_to_bgr: one NV12 frame (NVDEC's, 8-bit) -> BGR as cv2.VideoCapture gives it for 8-bit
//   yuv420p: swscale's fixed-point yuv2rgb with the stream's matrix and range (the six
//   coefficients), one chroma sample per 2x2 block, turned by the display rotation. The CPU
//   reference is edgecli/decode/yuv.py.
// p016_to_bgr: the same from P016 (NVDEC's output for 10- and 12-bit streams); not cv2's
//   conversion (see the kernel).
//
// One thread an output pixel; every output pixel is written. No kernel here uses shared memory
// or barriers: tests/cuda_host.py runs them on the CPU, compiled as C++, thread by thread.

// jdcolor.c's tables in 16.16 fixed point: FIX(1.40200), FIX(1.77200), FIX(0.71414),
// FIX(0.34414), and ONE_HALF.
#define CR_R 91881
#define CB_B 116130
#define CR_G 46802
#define CB_G 22554
#define ONE_HALF 32768

__device__ __forceinline__ int clamp255(int v) { return min(max(v, 0), 255); }
__device__ __forceinline__ int clamp255(long long v) { return (int)min(max(v, 0LL), 255LL); }

__device__ __forceinline__ int at(const unsigned char* plane, int pitch, int row, int col) {
    return plane[(long long)row * pitch + col];
}

// A chroma plane's value at luma sample (x, y), upsampled as jdsample.c does it.
// fx, fy: Y's sampling over the chroma plane's (1 or 2 each); cw, ch: the plane's size.
__device__ int upsampled(const unsigned char* c, int cw, int ch, int fx, int fy, int x, int y) {
    if (fx == 1 && fy == 1) return at(c, cw, y, x);
    if (fx == 1 && fy == 2) {  // h1v2_fancy_upsample: always fancy
        int i = y >> 1;
        int near = at(c, cw, i, x);
        if (y & 1) return (3 * near + at(c, cw, min(i + 1, ch - 1), x) + 2) >> 2;
        return (3 * near + at(c, cw, max(i - 1, 0), x) + 1) >> 2;
    }
    int j = x >> 1;
    if (cw <= 2) return at(c, cw, fy == 2 ? y >> 1 : y, j);  // too narrow: box replication
    int jf = (x & 1) ? min(j + 1, cw - 1) : max(j - 1, 0);  // the further column
    if (fy == 1) {  // h2v1_fancy_upsample
        int near = at(c, cw, y, j);
        return (3 * near + at(c, cw, y, jf) + ((x & 1) ? 2 : 1)) >> 2;
    }
    // h2v2_fancy_upsample: column sums of 3 * nearer row + further row, then across.
    int i = y >> 1;
    int iff = (y & 1) ? min(i + 1, ch - 1) : max(i - 1, 0);
    int near = 3 * at(c, cw, i, j) + at(c, cw, iff, j);
    int far = 3 * at(c, cw, i, jf) + at(c, cw, iff, jf);
    return (3 * near + far + ((x & 1) ? 7 : 8)) >> 4;
}

// Planes of frame f start at planes + f * frame_bytes: Y (height x width, pitch width), then
// Cb and Cr (ch x cw each, pitch cw); gray frames have only Y (fx == 0). The output is
// (n, out_h, out_w, 3): the frame turned by EXIF orientation 1..8 (out_h, out_w swapped for
// 5..8).
extern "C" __global__ void jpeg_planes_to_bgr(
    const unsigned char* __restrict__ planes, long long frame_bytes,
    unsigned char* __restrict__ out, int height, int width, int cw, int ch, int fx, int fy,
    int orientation) {
    const int f = blockIdx.z;
    const bool transposed = orientation >= 5 && orientation <= 8;
    const int out_w = transposed ? height : width;
    const int out_h = transposed ? width : height;
    const int ox = blockIdx.x * blockDim.x + threadIdx.x;
    const int oy = blockIdx.y * blockDim.y + threadIdx.y;
    if (ox >= out_w || oy >= out_h) return;
    // Undo the flip (of orientation, or orientation - 4 after the transpose), then the
    // transpose: jpeg_planes.apply_exif_orientation, backwards.
    const int flip = transposed ? orientation - 4 : orientation;
    int tx = (flip == 2 || flip == 3) ? out_w - 1 - ox : ox;
    int ty = (flip == 3 || flip == 4) ? out_h - 1 - oy : oy;
    const int x = transposed ? ty : tx;
    const int y = transposed ? tx : ty;

    const unsigned char* base = planes + f * frame_bytes;
    const int luma = at(base, width, y, x);
    int b, g, r;
    if (fx == 0) {
        b = g = r = luma;
    } else {
        const unsigned char* cb = base + (long long)height * width;
        const unsigned char* cr = cb + (long long)ch * cw;
        const int u = upsampled(cb, cw, ch, fx, fy, x, y) - 128;
        const int v = upsampled(cr, cw, ch, fx, fy, x, y) - 128;
        r = clamp255(luma + ((CR_R * v + ONE_HALF) >> 16));
        g = clamp255(luma + ((-CB_G * u + ONE_HALF - CR_G * v) >> 16));
        b = clamp255(luma + ((CB_B * u + ONE_HALF) >> 16));
    }
    unsigned char* o = out + (((long long)f * out_h + oy) * out_w + ox) * 3;
    o[0] = (unsigned char)b;
    o[1] = (unsigned char)g;
    o[2] = (unsigned char)r;
}

// The pixel (x, y) of a decoded frame (width x height) that output pixel (ox, oy) of the frame
// turned clockwise by `rotation` degrees shows (cv2.rotate's ROTATE_90_CLOCKWISE for 90,
// ROTATE_180, ROTATE_90_COUNTERCLOCKWISE for 270; the output is height x width for 0 and 180,
// width x height for 90 and 270), and where the output pixel's bytes start; false for a thread
// past the output's edge.
__device__ __forceinline__ bool turned(
    int rotation, int width, int height, int* x, int* y, long long* out_offset) {
    const bool sideways = rotation == 90 || rotation == 270;
    const int out_w = sideways ? height : width;
    const int out_h = sideways ? width : height;
    const int ox = blockIdx.x * blockDim.x + threadIdx.x;
    const int oy = blockIdx.y * blockDim.y + threadIdx.y;
    if (ox >= out_w || oy >= out_h) return false;
    switch (rotation) {
        case 90: *x = oy; *y = height - 1 - ox; break;
        case 180: *x = width - 1 - ox; *y = height - 1 - oy; break;
        case 270: *x = width - 1 - oy; *y = ox; break;
        default: *x = ox; *y = oy;
    }
    *out_offset = ((long long)oy * out_w + ox) * 3;
    return true;
}

// Both take NVDEC's two planes (Y, then interleaved U, V at half the height and, rounded up,
// half the width; pitches in bytes) and swscale's coefficients for the stream's matrix and range
// (edgecli.decode.yuv: y_offset in eighths of an 8-bit level, y_coeff, v2r, v2g, u2g and u2b in
// 1/8192); the output is the turned frame, packed BGR.

// swscale's x86 yuv2rgb: each product >> 16 (pmulhw), flooring, then clipped.
extern "C" __global__ void nv12_to_bgr(
    const unsigned char* __restrict__ y_plane, int y_pitch,
    const unsigned char* __restrict__ uv_plane, int uv_pitch,
    unsigned char* __restrict__ out, int height, int width,
    int y_coeff, int y_offset, int v2r, int v2g, int u2g, int u2b, int rotation) {
    int x, y;
    long long o;
    if (!turned(rotation, width, height, &x, &y, &o)) return;
    const int luma = ((8 * at(y_plane, y_pitch, y, x) - y_offset) * y_coeff) >> 16;
    const unsigned char* uv = uv_plane + (long long)(y >> 1) * uv_pitch + 2 * (x >> 1);
    const int u = 8 * uv[0] - 1024;
    const int v = 8 * uv[1] - 1024;
    out[o] = (unsigned char)clamp255(luma + ((u * u2b) >> 16));
    out[o + 1] = (unsigned char)clamp255(luma + ((u * u2g) >> 16) + ((v * v2g) >> 16));
    out[o + 2] = (unsigned char)clamp255(luma + ((v * v2r) >> 16));
}

__device__ __forceinline__ long long sample16(
    const unsigned char* plane, int pitch, int row, int col) {
    return ((const unsigned short*)(plane + (long long)row * pitch))[col];
}

// P016 holds each sample in the high bits of 16, so a 10-bit level v is v << 6: read as 16-bit
// levels, every depth has the same scale, 256 times the 8-bit one. The same matrix, per pixel
// (chroma as in nv12_to_bgr), exact in 64-bit fixed point (2^24 to an 8-bit level), rounded to
// the nearest 8-bit level once. cv2 converts 10-bit streams otherwise (swscale's own paths), so
// this is for --decode gpu, not exact.
extern "C" __global__ void p016_to_bgr(
    const unsigned char* __restrict__ y_plane, int y_pitch,
    const unsigned char* __restrict__ uv_plane, int uv_pitch,
    unsigned char* __restrict__ out, int height, int width,
    int y_coeff, int y_offset, int v2r, int v2g, int u2g, int u2b, int rotation) {
    int x, y;
    long long o;
    if (!turned(rotation, width, height, &x, &y, &o)) return;
    const long long half = 1LL << 23;
    const long long luma = (8 * sample16(y_plane, y_pitch, y, x) - 256LL * y_offset) * y_coeff;
    const int c = 2 * (x >> 1);
    const long long u = 8 * sample16(uv_plane, uv_pitch, y >> 1, c) - (1024LL << 8);
    const long long v = 8 * sample16(uv_plane, uv_pitch, y >> 1, c + 1) - (1024LL << 8);
    out[o] = (unsigned char)clamp255((luma + u * u2b + half) >> 24);
    out[o + 1] = (unsigned char)clamp255((luma + u * u2g + v * v2g + half) >> 24);
    out[o + 2] = (unsigned char)clamp255((luma + v * v2r + half) >> 24);
}
