/* PNG's five filters undone in C, for benchmarks/png_decode.py's CPU floor only (compiled there
 * with the system's cc -O2 and called through ctypes, which lets go of the GIL): the cost of
 * the unfilter a CPU decoder built on libdeflate would pay. Not part of edgecli.
 *
 * png_unfilter: `height` rows of `filtered` (a filter byte, then `row_bytes` bytes each) into
 * `rows` (row_bytes each), with `bpp` bytes a pixel to the left (PNG 9.2). Returns 0, or
 * 1 + the row whose filter byte is over 4.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* Paeth's predictor, ties to a, then b, then c (PNG 9.4), without branches: a photograph's
 * choices are too random for a branch predictor, and libpng's SSE2 form (three bytes of a
 * pixel in 16-bit lanes) makes every pixel wait out the latency of a dozen vector steps. */
static inline int paeth(int a, int b, int c) {
    int pa = abs(b - c), pb = abs(a - c), pc = abs(a + b - c - c);
    int not_a = pb <= pc ? b : c;
    return pa <= pb && pa <= pc ? a : not_a;
}

int png_unfilter(const uint8_t *filtered, int height, size_t row_bytes, int bpp, uint8_t *rows) {
    for (int y = 0; y < height; y++) {
        const uint8_t *in = filtered + (size_t)y * (row_bytes + 1);
        uint8_t *out = rows + (size_t)y * row_bytes;
        const uint8_t *above = y ? out - row_bytes : NULL;
        size_t left = (size_t)bpp < row_bytes ? (size_t)bpp : row_bytes; /* pixels with no a */
        uint8_t kind = *in++;
        size_t i;
        if (kind > 4) return 1 + y;
        if (above == NULL) { /* the row above the first is zeros: Up is None, Paeth is Sub */
            for (i = 0; i < row_bytes; i++) {
                int a = i >= (size_t)bpp ? out[i - bpp] : 0;
                out[i] = in[i] + (kind == 1 || kind == 4 ? a : kind == 3 ? a >> 1 : 0);
            }
            continue;
        }
        switch (kind) {
        case 0:
            for (i = 0; i < row_bytes; i++) out[i] = in[i];
            break;
        case 1:
            for (i = 0; i < left; i++) out[i] = in[i];
            for (; i < row_bytes; i++) out[i] = in[i] + out[i - bpp];
            break;
        case 2:
            for (i = 0; i < row_bytes; i++) out[i] = in[i] + above[i];
            break;
        case 3:
            for (i = 0; i < left; i++) out[i] = in[i] + (above[i] >> 1);
            for (; i < row_bytes; i++) out[i] = in[i] + ((out[i - bpp] + above[i]) >> 1);
            break;
        default:
            for (i = 0; i < left; i++) out[i] = in[i] + above[i];
            for (; i < row_bytes; i++) out[i] = in[i] + paeth(out[i - bpp], above[i], above[i - bpp]);
        }
    }
    return 0;
}
