/* edgecli._native: what the worker threads do for each PNG, without the GIL: encode it
 * (1-bit grayscale), or wrap the GPU's zlib stream of it in its chunks, and write a file
 * atomically; for each JPEG before it is decoded, libjpeg-turbo's verdict on its scans
 * (jpeg_scan_damage, below); and PNG input of 8 or 16 bits a sample decoded to cv2's frame
 * (png_decode).
 *
 * Encoding makes the same bytes as edgecli.output.png's Python encoder (png_from_rows_1bit,
 * encode_png_1bit) where both link the same zlib: each scanline a filter byte 0 then the
 * pixels as bits, deflated at zlib's default level with the Z_RLE strategy, window 15,
 * memLevel 9; chunks IHDR, one IDAT, IEND. What differs is the GIL: the Python encoder wins it
 * back after each zlib call and holds it while it joins the chunks (and np.packbits holds it
 * throughout), so the worker threads queue for it once a PNG per step; here a PNG costs one
 * release, for the whole of the packing, deflate, checksums and chunks. Writing is
 * edgecli.output.sinks.write_atomic's: the Python os calls there win the GIL back after each
 * of its four system calls; write_file makes the same calls in one release.
 * edgecli.output.png and edgecli.output.sinks use this module where it was built (setup.py
 * builds it optionally) and their own code elsewhere; tests/test_native.py and
 * tests/test_files.py hold the two to the same results.
 *
 * Limited API (3.11: the buffer protocol): one build serves every later CPython.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static const unsigned char PNG_SIGNATURE[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
static const unsigned char IEND_CHUNK[12] = {0,   0,   0,   0,   'I', 'E',
                                             'N', 'D', 0xae, 0x42, 0x60, 0x82};
/* Bit depth 1, grayscale, deflate, adaptive filters, no interlace. */
static const unsigned char IHDR_GRAY_1BIT[5] = {1, 0, 0, 0, 0};
/* Signature, IHDR chunk (4 + 4 + 13 + 4), the IDAT chunk's length and type. */
#define PNG_HEAD_BYTES (8 + 25 + 8)
/* The IDAT chunk's CRC, then IEND. */
#define PNG_TAIL_BYTES (4 + 12)
/* The most bytes of scanlines or pixels a call takes (2 GiB - 1): edgecli.output.png encodes
 * larger maps in Python. */
#define MAX_INPUT_BYTES 0x7fffffff

static void put_u32(unsigned char *at, uint32_t value)
{
    at[0] = (unsigned char)(value >> 24);
    at[1] = (unsigned char)(value >> 16);
    at[2] = (unsigned char)(value >> 8);
    at[3] = (unsigned char)value;
}

static size_t png_chunks(unsigned char *out, uint32_t width, uint32_t height, size_t compressed);

/* Why a call failed, said once the GIL is back. */
enum outcome { ENCODED, NO_MEMORY, ZLIB_FAILED };

/* The PNG of ``height`` scanlines of ``row_bytes`` bytes each (filter byte first) into a new
 * buffer, ``*png`` of ``*png_bytes``; called without the GIL. */
static enum outcome png_from_scanlines(const unsigned char *scanlines, size_t row_bytes,
                                       uint32_t width, uint32_t height, unsigned char **png,
                                       size_t *png_bytes)
{
    z_stream stream;
    memset(&stream, 0, sizeof stream);
    if (deflateInit2(&stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15, 9, Z_RLE) != Z_OK)
        return NO_MEMORY; /* the only way deflateInit2 fails on valid parameters */
    size_t data_bytes = row_bytes * height;
    size_t bound = deflateBound(&stream, (uLong)data_bytes);
    unsigned char *out = malloc(PNG_HEAD_BYTES + bound + PNG_TAIL_BYTES);
    if (out == NULL) {
        deflateEnd(&stream);
        return NO_MEMORY;
    }
    /* deflateBound holds the whole stream, so one Z_FINISH call ends it (the input is under
     * MAX_INPUT_BYTES, and its bound under 4 GB, as zlib's uInt counts need). */
    stream.next_in = (Bytef *)scanlines;
    stream.avail_in = (uInt)data_bytes;
    stream.next_out = out + PNG_HEAD_BYTES;
    stream.avail_out = (uInt)bound;
    int status = deflate(&stream, Z_FINISH);
    size_t compressed = bound - stream.avail_out;
    deflateEnd(&stream);
    if (status != Z_STREAM_END) {
        free(out);
        return ZLIB_FAILED;
    }
    *png = out;
    *png_bytes = png_chunks(out, width, height, compressed);
    return ENCODED;
}

/* The chunks around a zlib stream of ``compressed`` bytes already at out + PNG_HEAD_BYTES
 * (room for PNG_TAIL_BYTES after it): the PNG's length. */
static size_t png_chunks(unsigned char *out, uint32_t width, uint32_t height, size_t compressed)
{
    unsigned char *at = out;
    memcpy(at, PNG_SIGNATURE, 8);
    at += 8;
    put_u32(at, 13);
    memcpy(at + 4, "IHDR", 4);
    put_u32(at + 8, width);
    put_u32(at + 12, height);
    memcpy(at + 16, IHDR_GRAY_1BIT, 5);
    put_u32(at + 21, (uint32_t)crc32(0, at + 4, 17));
    at += 25;
    put_u32(at, (uint32_t)compressed);
    memcpy(at + 4, "IDAT", 4);
    put_u32(at + 8 + compressed, (uint32_t)crc32(0, at + 4, (uInt)(4 + compressed)));
    at += 8 + compressed + 4;
    memcpy(at, IEND_CHUNK, 12);
    return (size_t)(at + 12 - out);
}

/* The bits of 8 pixels, the first the most significant, a nonzero pixel a 1: each byte's
 * "nonzero" to its high bit ((b & 0x7f) + 0x7f carries into bit 7 unless the low bits are 0,
 * and no byte carries into the next), that bit to the byte's low bit, then one multiply
 * gathers byte k's bit into bit 63 - k (the factor's 2^(9j) terms meet byte k's 2^(8k) in the
 * top byte only for j = 7 - k, and no two products share a bit, so nothing carries). Bytes
 * load least significant first: on a big-endian machine the loop below packs instead. */
static unsigned char pack_8_pixels(const unsigned char *pixels)
{
    uint64_t word;
    memcpy(&word, pixels, 8);
    const uint64_t low7 = 0x7f7f7f7f7f7f7f7fULL;
    uint64_t nonzero = ((((word & low7) + low7) | word) >> 7) & 0x0101010101010101ULL;
    return (unsigned char)((nonzero * 0x8040201008040201ULL) >> 56);
}

/* Scanlines of a 1-bit PNG from an 8-bit map, as np.packbits packs them (a nonzero pixel is a
 * 1 bit, the first pixel the most significant bit, the last byte padded with 0 bits), each
 * after its filter byte 0; called without the GIL. */
static void pack_scanlines(const unsigned char *pixels, size_t width, size_t height,
                           unsigned char *scanlines)
{
    size_t row_bytes = 1 + (width + 7) / 8;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    size_t whole = width / 8; /* bytes of 8 pixels each, before a partial last one */
#else
    size_t whole = 0;
#endif
    for (size_t y = 0; y < height; y++) {
        const unsigned char *row = pixels + y * width;
        unsigned char *out = scanlines + y * row_bytes;
        out[0] = 0;
        for (size_t byte = 0; byte < whole; byte++)
            out[1 + byte] = pack_8_pixels(row + 8 * byte);
        for (size_t byte = whole, x = 8 * whole; byte + 1 < row_bytes; byte++) {
            unsigned bits = 0;
            size_t end = x + 8 < width ? x + 8 : width;
            for (unsigned shift = 7; x < end; x++, shift--)
                bits |= (unsigned)(row[x] != 0) << shift;
            out[1 + byte] = (unsigned char)bits;
        }
    }
}

static int parse_size(PyObject *value, const char *what, uint32_t *size)
{
    unsigned long long got = PyLong_AsUnsignedLongLong(value);
    if (got == (unsigned long long)-1 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError) || PyErr_ExceptionMatches(PyExc_TypeError))
            PyErr_Format(PyExc_ValueError, "%s must be a whole number from 1 to 2**31 - 1", what);
        return -1;
    }
    if (got < 1 || got > 0x7fffffffu) { /* PNG's limit on either side */
        PyErr_Format(PyExc_ValueError, "%s must be from 1 to 2**31 - 1, got %llu", what, got);
        return -1;
    }
    *size = (uint32_t)got;
    return 0;
}

static PyObject *finish(enum outcome outcome, unsigned char *png, size_t png_bytes)
{
    if (outcome == NO_MEMORY)
        return PyErr_NoMemory();
    if (outcome == ZLIB_FAILED) {
        PyErr_SetString(PyExc_RuntimeError, "zlib could not compress the PNG's scanlines");
        return NULL;
    }
    PyObject *result = PyBytes_FromStringAndSize((const char *)png, (Py_ssize_t)png_bytes);
    free(png);
    return result;
}

/* The arguments of encode_rows and encode_map, ``call`` as their docstrings name them: a
 * C-contiguous buffer of whole rows, and the width. Rows of 1-bit scanlines where ``packed``,
 * else of ``width`` 8-bit pixels. 0, or -1 with the exception set and no buffer held. */
static int rows_and_width(PyObject *const *args, Py_ssize_t nargs, const char *call, int packed,
                          Py_buffer *view, uint32_t *width, size_t *height)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "%s takes 2 arguments", call);
        return -1;
    }
    if (parse_size(args[1], "width", width) < 0)
        return -1;
    if (PyObject_GetBuffer(args[0], view, PyBUF_SIMPLE) < 0) /* C-contiguous bytes */
        return -1;
    if (view->len > MAX_INPUT_BYTES) {
        PyErr_Format(PyExc_ValueError, "%zd bytes are more than the %d this encoder takes",
                     view->len, MAX_INPUT_BYTES);
        PyBuffer_Release(view);
        return -1;
    }
    size_t row = packed ? 1 + ((size_t)*width + 7) / 8 : *width;
    *height = (size_t)view->len / row;
    if (*height >= 1 && *height <= 0x7fffffffu && *height * row == (size_t)view->len)
        return 0;
    if (packed)
        PyErr_Format(PyExc_ValueError,
                     "%zd bytes are not whole scanlines of a %u-pixel-wide 1-bit PNG "
                     "(%zu bytes each)",
                     view->len, *width, row);
    else
        PyErr_Format(PyExc_ValueError, "%zd bytes are not whole rows of %u pixels", view->len,
                     *width);
    PyBuffer_Release(view);
    return -1;
}

/* encode_rows and encode_map: the PNG of a buffer of rows (see rows_and_width), packed
 * into scanlines first unless ``packed``. */
static PyObject *encode(PyObject *const *args, Py_ssize_t nargs, const char *call, int packed)
{
    Py_buffer view;
    uint32_t width;
    size_t height;
    if (rows_and_width(args, nargs, call, packed, &view, &width, &height))
        return NULL;
    size_t row_bytes = 1 + ((size_t)width + 7) / 8;
    unsigned char *png = NULL;
    size_t png_bytes = 0;
    enum outcome outcome = NO_MEMORY;
    Py_BEGIN_ALLOW_THREADS
    const unsigned char *scanlines = view.buf;
    unsigned char *packed_here = NULL;
    if (!packed) {
        packed_here = malloc(row_bytes * height);
        if (packed_here != NULL)
            pack_scanlines(view.buf, width, height, packed_here);
        scanlines = packed_here;
    }
    if (scanlines != NULL)
        outcome = png_from_scanlines(scanlines, row_bytes, width, (uint32_t)height, &png,
                                     &png_bytes);
    free(packed_here);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return finish(outcome, png, png_bytes);
}

/* encode_rows(scanlines, width): see the module's docstring below. */
static PyObject *encode_rows(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    return encode(args, nargs, "encode_rows(scanlines, width)", 1);
}

/* encode_map(pixels, width): see the module's docstring below. */
static PyObject *encode_map(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    return encode(args, nargs, "encode_map(pixels, width)", 0);
}

/* png_from_zlib(stream, width, height): see the module's docstring below. */
static PyObject *png_from_zlib(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    uint32_t width, height;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "png_from_zlib(stream, width, height) takes 3 arguments");
        return NULL;
    }
    if (parse_size(args[1], "width", &width) < 0 || parse_size(args[2], "height", &height) < 0)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    if (view.len < 1 || view.len > MAX_INPUT_BYTES) {
        PyErr_Format(PyExc_ValueError, "a zlib stream of %zd bytes: 1 to %d are taken", view.len,
                     MAX_INPUT_BYTES);
        PyBuffer_Release(&view);
        return NULL;
    }
    size_t compressed = (size_t)view.len;
    PyObject *result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(PNG_HEAD_BYTES + compressed +
                                                                     PNG_TAIL_BYTES));
    if (result != NULL) {
        unsigned char *out = (unsigned char *)PyBytes_AsString(result);
        Py_BEGIN_ALLOW_THREADS
        memcpy(out + PNG_HEAD_BYTES, view.buf, compressed);
        png_chunks(out, width, height, compressed);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&view);
    return result;
}

/* write_file(data, temporary, path): see the module's docstring below. */
static PyObject *write_file(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "write_file(data, temporary, path) takes 3 arguments");
        return NULL;
    }
    PyObject *temporary = NULL, *path = NULL;
    if (!PyUnicode_FSConverter(args[1], &temporary))
        return NULL;
    if (!PyUnicode_FSConverter(args[2], &path)) {
        Py_DECREF(temporary);
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        Py_DECREF(temporary);
        Py_DECREF(path);
        return NULL;
    }
    const char *temp_name = PyBytes_AsString(temporary), *final_name = PyBytes_AsString(path);
    int failure = 0; /* errno of the first call that failed */
    int renaming = 0;
    Py_BEGIN_ALLOW_THREADS
    int fd = open(temp_name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
        failure = errno;
    } else {
        const char *next = view.buf;
        size_t left = (size_t)view.len;
        while (left > 0) {
            ssize_t written = write(fd, next, left);
            if (written < 0 && errno == EINTR)
                continue;
            if (written <= 0) { /* 0: the file system took nothing, and would again */
                failure = written < 0 ? errno : EIO;
                break;
            }
            next += written;
            left -= (size_t)written;
        }
        /* close's error counts (NFS reports a failed write there); not retried on EINTR, as
         * Linux has closed the descriptor by then. */
        if (close(fd) != 0 && failure == 0 && errno != EINTR)
            failure = errno;
        if (failure == 0 && rename(temp_name, final_name) != 0) {
            failure = errno;
            renaming = 1;
        }
        if (failure != 0)
            unlink(temp_name);
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    PyObject *result = Py_None;
    if (failure != 0) {
        /* OSError of that errno (FileExistsError, FileNotFoundError, ...), naming the files
         * as os.open and os.replace would. */
        errno = failure;
        if (renaming)
            PyErr_SetFromErrnoWithFilenameObjects(PyExc_OSError, args[1], args[2]);
        else
            PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, args[1]);
        result = NULL;
    } else {
        Py_INCREF(result);
    }
    Py_DECREF(temporary);
    Py_DECREF(path);
    return result;
}

/* jpeg_scan_damage: libjpeg-turbo's verdict on a sequential Huffman JPEG's scans, without the
 * IDCT. libjpeg-turbo decodes past damage to the entropy-coded data with only a warning, and
 * which damage warns depends on how its decoder reads the bits, so this walk repeats that
 * reading exactly: jdmarker.c's read_markers and next_marker, and jdhuff.c's decode_mcu with
 * its two paths. The fast path (taken where no restart interval is set, no marker has been
 * met and 512 bytes a block of the MCU are left in the file) refills 6 bytes at a time and
 * takes a bad Huffman code for a 0 silently; the slow one refills to 57 bits, stops at a
 * marker and warns on a bad code or on bits wanted past a marker. Both consume a code and its
 * magnitude bits, or several codes, in one step where libjpeg-turbo's fills would come out
 * the same (make_joint). Bytes left in the bit buffer after a scan's last MCU are dropped
 * silently; those before the next restart marker count as extraneous. The walk stops at the
 * first warning or error, whose words it gives: the file is damaged then, whatever
 * libjpeg-turbo would make of the rest. */

#define WALK_MIN_GET_BITS 57 /* jdhuff.c's MIN_GET_BITS on a 64-bit bit buffer */
#define WALK_LOOKAHEAD 8     /* jdhuff.h's HUFF_LOOKAHEAD: the slow path peeks this many */
#define WALK_JOINT_AC_BITS 12 /* the index of the fast path's AC tables (make_joint) */
#define WALK_JOINT_DC_BITS 10 /* and of its DC tables */
#define WALK_JOINT_MAX_RUN 16 /* the most an entry's codes before its last may move k */
#define JOINT_LENGTH(e) ((e) >> 27) /* a joint entry's fields: see make_joint */
#define JOINT_BEFORE_TEST(e) ((e) >> 6 & 15)
#define JOINT_ADVANCE(e) ((e) >> 10 & 127)
#define JOINT_TAIL(e) ((e) >> 17 & 15)
#define JOINT_LAST_INDEX(e) ((e) >> 21 & 63)
/* A joint entry: its fields, and JOINT_LENGTH again in its low 6 bits, by which ``bits``
 * shifts. */
#define JOINT(length, before, advance, tail, last_index)                                    \
    ((uint32_t)(length) | (uint32_t)(before) << 6 | (uint32_t)(advance) << 10 |                \
     (uint32_t)(tail) << 17 | (uint32_t)(last_index) << 21 | (uint32_t)(length) << 27)
#define JOINT_NONE JOINT(0, 0, 64, 0, 0)
#define WALK_FAST_BYTES 512  /* jdhuff.c's BUFSIZE: bytes a block for the fast path */
#define WALK_MAX_BLOCKS 10   /* D_MAX_BLOCKS_IN_MCU */
#define WALK_MAX_COMPONENTS 10

enum walk_state { WALK_OK, WALK_DAMAGED, WALK_UNJUDGED, WALK_NO_MEMORY };

struct huff_spec { /* a table as a DHT defines it */
    int defined;
    uint8_t bits[17];
    uint8_t val[256];
};

struct huff_table { /* jdhuff.c's d_derived_tbl, and a wider lookup for the fast path */
    int32_t maxcode[18];
    int32_t valoffset[18];
    uint16_t look8[1 << WALK_LOOKAHEAD]; /* (length << 8) | symbol; length 9: longer */
    uint32_t joint[1 << WALK_JOINT_AC_BITS]; /* see make_joint */
    int16_t dc_diff[1 << WALK_JOINT_DC_BITS]; /* a whole DC entry's difference, by index */
    uint8_t val[256];
};

struct walk_component {
    int id, h, v, quant;
    int dc, ac; /* the tables of the scan that holds it */
};

struct walk {
    const unsigned char *data;
    size_t n, pos;
    int unread_marker;
    size_t marker_at; /* where unread_marker's FF is */
    unsigned long discarded;
    uint64_t buffer;
    int bits_left;
    int next_restart;
    unsigned restart_interval;
    int in_scans; /* past the first SOS: errors are damage, not the header's */
    int scans, multiple_scans;
    int width, height, count, max_h, max_v;
    struct walk_component comps[WALK_MAX_COMPONENTS];
    int quant_defined[4];
    int quant_dc[4]; /* each table's DC step, as its DQT defines it */
    struct huff_spec dc_specs[4], ac_specs[4];
    struct huff_table dc_tables[4], ac_tables[4];
    /* the scan being walked */
    int blocks;
    const struct huff_table *block_dc[WALK_MAX_BLOCKS], *block_ac[WALK_MAX_BLOCKS];
    int block_comp[WALK_MAX_BLOCKS]; /* the scan's component each block is of */
    int dc_limit[4];                 /* the largest DC an encoder writes, per scan component */
    int64_t dc_pred[4];              /* the DC predictors, as last_dc_val */
    unsigned long long mcu, mcus;
    char reason[200];
    /* The scans hold what libjpeg-turbo reads silently in a way of its own, where the standard
     * says nothing: a bad code its fast path takes for a 0, or a coefficient (or a run of
     * zeros) past a block's end, which it puts in the block's last place; or a DC no encoder
     * writes (misread bits make DCs drift past what a block of 8-bit samples holds), whose
     * samples its inverse DCT takes far out of range, where its arithmetic and other decoders'
     * part. Other decoders, the JPEG engines among them, read those otherwise. */
    int own_reading;
    size_t bulk_piece; /* the fewest bytes a stream of bulk_mcus reads (BULK_MIN_PIECE) */
};

static enum walk_state walk_say(struct walk *w, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vsnprintf(w->reason, sizeof w->reason, format, args);
    va_end(args);
    return WALK_DAMAGED;
}

/* An error: the decoder's own failure before the first scan (left to it), damage after. */
#define WALK_ERROR(w, ...) ((w)->in_scans ? walk_say((w), __VA_ARGS__) : WALK_UNJUDGED)

/* The data ran out. A file cut short is the decoder's to refuse (it ends without EOI); in one
 * that ends with EOI, a length a damaged byte made too long skipped past it: libjpeg-turbo
 * then runs out as well ("premature end of JPEG file", or fails). */
static enum walk_state walk_ran_out(struct walk *w)
{
    if (w->in_scans && w->n >= 2 && w->data[w->n - 2] == 0xFF && w->data[w->n - 1] == 0xD9)
        return walk_say(w, "premature end of JPEG file");
    return WALK_UNJUDGED;
}

/* " in MCU 57 of 300" (and " of scan 2" past the first), for the reasons. */
static const char *walk_where(struct walk *w, char *out, size_t size)
{
    if (w->scans > 1)
        snprintf(out, size, "MCU %llu of %llu in scan %d", w->mcu + 1, w->mcus, w->scans);
    else
        snprintf(out, size, "MCU %llu of %llu", w->mcu + 1, w->mcus);
    return out;
}

/* jstdhuff.c's tables (the JPEG standard's K.3), which libjpeg-turbo puts in the DC and AC
 * slots 0 and 1 that no DHT before the first scan defined (motion-JPEG frames have none). */
static const uint8_t STD_BITS[4][17] = {
    {0, 0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},
    {0, 0, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0},
    {0, 0, 2, 1, 3, 3, 2, 4, 3, 5, 5, 4, 4, 0, 0, 1, 125},
    {0, 0, 2, 1, 2, 4, 4, 3, 4, 7, 5, 4, 4, 0, 1, 2, 119},
};
static const uint8_t STD_VALS[4][162] = {
    {
        0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b,
    },
    {
        0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b,
    },
    {
        0x01, 0x02, 0x03, 0x00, 0x04, 0x11, 0x05, 0x12, 0x21, 0x31, 0x41, 0x06,
        0x13, 0x51, 0x61, 0x07, 0x22, 0x71, 0x14, 0x32, 0x81, 0x91, 0xa1, 0x08,
        0x23, 0x42, 0xb1, 0xc1, 0x15, 0x52, 0xd1, 0xf0, 0x24, 0x33, 0x62, 0x72,
        0x82, 0x09, 0x0a, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x25, 0x26, 0x27, 0x28,
        0x29, 0x2a, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39, 0x3a, 0x43, 0x44, 0x45,
        0x46, 0x47, 0x48, 0x49, 0x4a, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59,
        0x5a, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6a, 0x73, 0x74, 0x75,
        0x76, 0x77, 0x78, 0x79, 0x7a, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89,
        0x8a, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9a, 0xa2, 0xa3,
        0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6,
        0xb7, 0xb8, 0xb9, 0xba, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xc7, 0xc8, 0xc9,
        0xca, 0xd2, 0xd3, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8, 0xd9, 0xda, 0xe1, 0xe2,
        0xe3, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8, 0xe9, 0xea, 0xf1, 0xf2, 0xf3, 0xf4,
        0xf5, 0xf6, 0xf7, 0xf8, 0xf9, 0xfa,
    },
    {
        0x00, 0x01, 0x02, 0x03, 0x11, 0x04, 0x05, 0x21, 0x31, 0x06, 0x12, 0x41,
        0x51, 0x07, 0x61, 0x71, 0x13, 0x22, 0x32, 0x81, 0x08, 0x14, 0x42, 0x91,
        0xa1, 0xb1, 0xc1, 0x09, 0x23, 0x33, 0x52, 0xf0, 0x15, 0x62, 0x72, 0xd1,
        0x0a, 0x16, 0x24, 0x34, 0xe1, 0x25, 0xf1, 0x17, 0x18, 0x19, 0x1a, 0x26,
        0x27, 0x28, 0x29, 0x2a, 0x35, 0x36, 0x37, 0x38, 0x39, 0x3a, 0x43, 0x44,
        0x45, 0x46, 0x47, 0x48, 0x49, 0x4a, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58,
        0x59, 0x5a, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6a, 0x73, 0x74,
        0x75, 0x76, 0x77, 0x78, 0x79, 0x7a, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87,
        0x88, 0x89, 0x8a, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9a,
        0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xb2, 0xb3, 0xb4,
        0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xba, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xc7,
        0xc8, 0xc9, 0xca, 0xd2, 0xd3, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8, 0xd9, 0xda,
        0xe2, 0xe3, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8, 0xe9, 0xea, 0xf2, 0xf3, 0xf4,
        0xf5, 0xf6, 0xf7, 0xf8, 0xf9, 0xfa,
    },
};

/* A DC entry's magnitude bits, the last of its JOINT_LENGTH: a code alone (its magnitude
 * bits past the test) holds them after JOINT_BEFORE_TEST, a whole one says in JOINT_TAIL. */
#define DC_MAGNITUDE(entry)                                                                \
    (JOINT_BEFORE_TEST(entry) < JOINT_LENGTH(entry)                                        \
         ? (int)(JOINT_LENGTH(entry) - JOINT_BEFORE_TEST(entry))                           \
         : (int)JOINT_TAIL(entry))

/* The top ``s`` bits of ``bits`` (none where ``s`` is 0). */
#define TOP_BITS(bits, s) ((s) ? (unsigned)((bits) >> (64 - (s))) : 0u)

/* HUFF_EXTEND: magnitude bits ``v`` of size ``s`` as the difference they code. */
static int64_t dc_extend(unsigned v, int s)
{
    return s == 0 ? 0 : v < (1u << (s - 1)) ? (int64_t)v - (1 << s) + 1 : (int64_t)v;
}

/* Block ``b``'s DC difference added to its component's predictor in ``pred``: whether the DC
 * is past what an encoder of 8-bit samples writes (walk.dc_limit). */
static int dc_drifts(const struct walk *w, int64_t *pred, int b, int64_t diff)
{
    int c = w->block_comp[b];
    pred[c] += diff;
    return pred[c] > w->dc_limit[c] || pred[c] < -w->dc_limit[c];
}

/* The fast path's joint table, indexed by the next WALK_JOINT_AC_BITS bits (DC: _DC_BITS):
 * what to consume in one step, where libjpeg-turbo tests its bit buffer before each code and
 * before each code's magnitude bits. An entry holds a code and its magnitude bits, or several
 * such where all fit and none but the last ends the block (one lookup then decodes them all);
 * or a code alone where its magnitude bits do not fit. Its fields:
 *   JOINT_LENGTH       the bits it consumes;
 *   JOINT_BEFORE_TEST  those before a test within it: a lone code's (its magnitude bits come
 *                      after the test), otherwise all (the test after them is the next code's);
 *   JOINT_ADVANCE      how far it moves k, the coefficient's index (an AC code that ends the
 *                      block counts 63; the sum is at most WALK_JOINT_MAX_RUN + 63);
 *   JOINT_TAIL         the bits after its last test where that test is within it: the last
 *                      code's magnitude bits, or the last code where it has none; 0 where the
 *                      test is at its start (one code alone);
 *   JOINT_LAST_INDEX   the last k it may start at, so that its last code is still the
 *                      block's: 63 less how far the codes before the last move k. 0 in
 *                      JOINT_NONE, where no code of the index's length or shorter fits. */
static void make_joint(struct huff_table *t, int dc, const struct huff_spec *spec,
                       const unsigned *code_of)
{
    int bits = dc ? WALK_JOINT_DC_BITS : WALK_JOINT_AC_BITS, mask = (1 << bits) - 1;
    uint32_t single[1 << WALK_JOINT_AC_BITS];
    for (int look = 0; look <= mask; look++)
        single[look] = JOINT_NONE;
    int p = 0;
    for (int l = 1; l <= 16; l++) {
        for (int i = 1; i <= spec->bits[l]; i++, p++) {
            int value = spec->val[p], magnitude = dc ? value : value & 15, run = value >> 4;
            if (l > bits || magnitude > 15)
                continue;
            uint32_t advance = dc ? 0 : magnitude ? run + 1 : run == 15 ? 16 : 63;
            uint32_t whole = l + magnitude <= bits, length = (uint32_t)(l + magnitude);
            uint32_t entry = JOINT(length, whole ? length : (uint32_t)l, advance,
                                   whole ? (uint32_t)magnitude : 0, 63);
            int look = (int)(code_of[p] << (bits - l));
            for (int ctr = 1 << (bits - l); ctr > 0; ctr--, look++) {
                single[look] = entry;
                if (dc && whole) /* the magnitude bits follow the code within the index */
                    t->dc_diff[look] = (int16_t)dc_extend(
                        (unsigned)(look >> (bits - l - magnitude)) & ((1u << magnitude) - 1),
                        magnitude);
            }
        }
    }
    memcpy(t->joint, single, sizeof(uint32_t) << bits);
    if (dc)
        return;
    for (int look = 0; look <= mask; look++) {
        uint32_t last = single[look], used = JOINT_LENGTH(last), advance = 0;
        int codes = 1;
        while (last != JOINT_NONE && JOINT_BEFORE_TEST(last) == JOINT_LENGTH(last) &&
               JOINT_ADVANCE(last) != 63 &&
               advance + JOINT_ADVANCE(last) <= WALK_JOINT_MAX_RUN) {
            uint32_t next = single[(look << used) & mask], rest = JOINT_LENGTH(next);
            if (next == JOINT_NONE || JOINT_BEFORE_TEST(next) != rest ||
                used + rest > (uint32_t)bits)
                break;
            advance += JOINT_ADVANCE(last);
            used += rest;
            last = next;
            codes++;
        }
        if (codes == 1)
            continue;
        uint32_t tail = JOINT_TAIL(last) ? JOINT_TAIL(last) : JOINT_LENGTH(last);
        t->joint[look] = JOINT(used, used, advance + JOINT_ADVANCE(last), tail, 63 - advance);
    }
}

/* jpeg_make_d_derived_tbl: WALK_OK, or the error that table makes. */
static enum walk_state make_table(struct walk *w, int dc, int number, struct huff_table *t)
{
    if (number > 3)
        return WALK_ERROR(w, "Huffman table 0x%02x was not defined", number);
    const struct huff_spec *spec = dc ? &w->dc_specs[number] : &w->ac_specs[number];
    if (!spec->defined)
        return WALK_ERROR(w, "Huffman table 0x%02x was not defined", number);
    char size[257];
    unsigned code_of[257];
    int p = 0;
    for (int l = 1; l <= 16; l++) {
        if (p + spec->bits[l] > 256)
            return WALK_ERROR(w, "bogus Huffman table definition");
        for (int i = 0; i < spec->bits[l]; i++)
            size[p++] = (char)l;
    }
    size[p] = 0;
    int symbols = p;
    unsigned code = 0;
    int si = size[0];
    p = 0;
    while (size[p]) {
        while (size[p] == si) {
            code_of[p++] = code;
            code++;
        }
        if (code >= (1u << si))
            return WALK_ERROR(w, "bogus Huffman table definition");
        code <<= 1;
        si++;
    }
    p = 0;
    for (int l = 1; l <= 16; l++) {
        if (spec->bits[l]) {
            t->valoffset[l] = p - (int32_t)code_of[p];
            p += spec->bits[l];
            t->maxcode[l] = (int32_t)code_of[p - 1];
        } else {
            t->maxcode[l] = -1;
        }
    }
    t->valoffset[17] = 0;
    t->maxcode[17] = 0xFFFFF;
    for (int i = 0; i < (1 << WALK_LOOKAHEAD); i++)
        t->look8[i] = (WALK_LOOKAHEAD + 1) << WALK_LOOKAHEAD;
    p = 0;
    for (int l = 1; l <= 16; l++) {
        for (int i = 1; i <= spec->bits[l]; i++, p++) {
            if (l <= WALK_LOOKAHEAD) {
                int look = (int)(code_of[p] << (WALK_LOOKAHEAD - l));
                for (int ctr = 1 << (WALK_LOOKAHEAD - l); ctr > 0; ctr--)
                    t->look8[look++] = (uint16_t)((l << WALK_LOOKAHEAD) | spec->val[p]);
            }
        }
    }
    memcpy(t->val, spec->val, 256);
    if (dc)
        for (int i = 0; i < symbols; i++)
            if (spec->val[i] > 15)
                return WALK_ERROR(w, "bogus Huffman table definition");
    make_joint(t, dc, spec, code_of);
    return WALK_OK;
}

/* jdmarker.c's next_marker: the next marker into unread_marker, warning of bytes skipped. */
static enum walk_state next_marker(struct walk *w)
{
    int c;
    for (;;) {
        if (w->pos >= w->n)
            return walk_ran_out(w);
        c = w->data[w->pos++];
        while (c != 0xFF) {
            w->discarded++;
            if (w->pos >= w->n)
                return walk_ran_out(w);
            c = w->data[w->pos++];
        }
        do {
            if (w->pos >= w->n)
                return walk_ran_out(w);
            c = w->data[w->pos++];
        } while (c == 0xFF);
        if (c != 0)
            break;
        w->discarded += 2;
    }
    w->unread_marker = c;
    w->marker_at = w->pos - 2;
    if (w->discarded)
        return walk_say(w, "%lu extraneous bytes before marker 0x%02x at byte %zu", w->discarded,
                        c, w->marker_at);
    return WALK_OK;
}

#if defined(__GNUC__)
#define WALK_LIKELY(x) __builtin_expect(!!(x), 1)
#define WALK_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define WALK_LIKELY(x) (x)
#define WALK_UNLIKELY(x) (x)
#endif

/* Eight bytes from ``at``, the first the most significant. */
static uint64_t load_be64(const unsigned char *at)
{
    uint64_t word;
    memcpy(&word, at, 8);
#if defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    return __builtin_bswap64(word);
#elif defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return word;
#else
    word = 0;
    for (int i = 0; i < 8; i++)
        word = (word << 8) | at[i];
    return word;
#endif
}

/* jpeg_fill_bit_buffer: loads bytes up to 57 bits or a marker; warns where ``bits`` are
 * wanted past a marker. */
static enum walk_state fill_bits(struct walk *w, int bits)
{
    if (w->unread_marker == 0) {
        int bytes = (WALK_MIN_GET_BITS - w->bits_left + 7) / 8;
        if (bytes > 0 && w->pos + 8 <= w->n) { /* at once, where none of them is an FF */
            uint64_t word = load_be64(w->data + w->pos);
            uint64_t inverse = ~word | (bytes < 8 ? ~(uint64_t)0 >> 8 * bytes : 0);
            if (((inverse - 0x0101010101010101ULL) & ~inverse & 0x8080808080808080ULL) == 0) {
                w->buffer = bytes < 8 ? w->buffer << 8 * bytes | word >> (64 - 8 * bytes) : word;
                w->pos += (size_t)bytes;
                w->bits_left += 8 * bytes;
                return WALK_OK;
            }
        }
        while (w->bits_left < WALK_MIN_GET_BITS) {
            if (w->pos >= w->n)
                return walk_ran_out(w);
            int c = w->data[w->pos++];
            if (c == 0xFF) {
                do {
                    if (w->pos >= w->n)
                        return walk_ran_out(w);
                    c = w->data[w->pos++];
                } while (c == 0xFF);
                if (c == 0) {
                    c = 0xFF;
                } else {
                    w->unread_marker = c;
                    w->marker_at = w->pos - 2;
                    goto no_more_bytes;
                }
            }
            w->buffer = (w->buffer << 8) | (unsigned)c;
            w->bits_left += 8;
        }
        return WALK_OK;
    }
no_more_bytes:
    if (bits > w->bits_left) {
        char where[64];
        return walk_say(w, "premature end of data segment: marker 0x%02x at byte %zu, %s",
                        w->unread_marker, w->marker_at, walk_where(w, where, sizeof where));
    }
    return WALK_OK;
}

#define WALK_BITS(w, n) ((int)((w)->buffer >> ((w)->bits_left -= (n))) & ((1 << (n)) - 1))

/* HUFF_DECODE and jpeg_huff_decode (the slow path): the next symbol into ``*symbol``. */
static enum walk_state slow_symbol(struct walk *w, const struct huff_table *t, int *symbol)
{
    enum walk_state state;
    int nb;
    if (w->bits_left < WALK_LOOKAHEAD) {
        if ((state = fill_bits(w, 0)) != WALK_OK)
            return state;
        if (w->bits_left < WALK_LOOKAHEAD) {
            nb = 1;
            goto slow;
        }
    }
    int look = (int)(w->buffer >> (w->bits_left - WALK_LOOKAHEAD)) & 0xFF;
    nb = t->look8[look] >> WALK_LOOKAHEAD;
    if (nb <= WALK_LOOKAHEAD) {
        w->bits_left -= nb;
        *symbol = t->look8[look] & 0xFF;
        return WALK_OK;
    }
slow:
    if (w->bits_left < nb && (state = fill_bits(w, nb)) != WALK_OK)
        return state;
    int32_t code = WALK_BITS(w, nb);
    int l = nb;
    while (code > t->maxcode[l]) {
        code <<= 1;
        if (w->bits_left < 1 && (state = fill_bits(w, 1)) != WALK_OK)
            return state;
        code |= WALK_BITS(w, 1);
        l++;
    }
    if (l > 16) {
        char where[64];
        return walk_say(w, "bad Huffman code in %s", walk_where(w, where, sizeof where));
    }
    *symbol = t->val[(code + t->valoffset[l]) & 0xFF];
    return WALK_OK;
}

/* A joint entry for the next bits of the slow path's buffer, where it holds enough of them. */
#define SLOW_ENTRY(w, t, index_bits)                                                       \
    ((w)->bits_left >= (index_bits)                                                        \
         ? (t)->joint[(w)->buffer >> ((w)->bits_left - (index_bits)) &                     \
                      ((1u << (index_bits)) - 1)]                                          \
         : JOINT_NONE)

/* Whether an entry taken at index k, now ``next``, put a coefficient or a run of zeros past
 * the block's end: an entry whose last code is an end of block moves k by 63 or more, and no
 * other by as much. */
#define PAST_THE_BLOCK(next, entry) ((next) > 64 && JOINT_ADVANCE(entry) < 63)

/* decode_mcu_slow without the coefficients. libjpeg-turbo fills its bit buffer here before a
 * code where fewer than 8 bits are left and before magnitude bits that are not all there:
 * a joint entry that leaves 8 bits or more holds no such test, and is consumed at once;
 * elsewhere each code is read as libjpeg-turbo reads it. */
static enum walk_state slow_mcu(struct walk *w)
{
    enum walk_state state;
    int s;
    for (int b = 0; b < w->blocks; b++) {
        uint32_t entry = SLOW_ENTRY(w, w->block_dc[b], WALK_JOINT_DC_BITS);
        unsigned magnitude = 0;
        if (entry != JOINT_NONE && w->bits_left - (int)JOINT_LENGTH(entry) >= WALK_LOOKAHEAD) {
            s = DC_MAGNITUDE(entry);
            w->bits_left -= (int)JOINT_LENGTH(entry);
            magnitude = (unsigned)(w->buffer >> w->bits_left) & ((1u << s) - 1);
        } else {
            if ((state = slow_symbol(w, w->block_dc[b], &s)) != WALK_OK)
                return state;
            if (s) {
                if (w->bits_left < s && (state = fill_bits(w, s)) != WALK_OK)
                    return state;
                magnitude = (unsigned)WALK_BITS(w, s);
            }
        }
        w->own_reading |= dc_drifts(w, w->dc_pred, b, dc_extend(magnitude, s));
        for (int k = 1; k < 64;) {
            entry = SLOW_ENTRY(w, w->block_ac[b], WALK_JOINT_AC_BITS);
            if (k <= (int)JOINT_LAST_INDEX(entry) &&
                w->bits_left - (int)JOINT_LENGTH(entry) >= WALK_LOOKAHEAD) {
                w->bits_left -= (int)JOINT_LENGTH(entry);
                k += (int)JOINT_ADVANCE(entry);
                w->own_reading |= PAST_THE_BLOCK(k, entry);
                continue;
            }
            if ((state = slow_symbol(w, w->block_ac[b], &s)) != WALK_OK)
                return state;
            int r = s >> 4;
            s &= 15;
            if (s) {
                k += r + 1;
                if (w->bits_left < s && (state = fill_bits(w, s)) != WALK_OK)
                    return state;
                w->bits_left -= s;
            } else {
                if (r != 15)
                    break;
                k += 16;
            }
            w->own_reading |= k > 64;
        }
    }
    return WALK_OK;
}

/* HUFF_DECODE_FAST's symbol at the top of ``bits``, its code's length into ``*length``: a bad
 * code (none in 16 bits) takes 17 bits and reads as 0. */
static int fast_symbol(uint64_t bits, const struct huff_table *t, int *length)
{
    unsigned entry = t->look8[bits >> (64 - WALK_LOOKAHEAD)];
    int l = (int)(entry >> WALK_LOOKAHEAD);
    if (l <= WALK_LOOKAHEAD) {
        *length = l;
        return (int)(entry & 0xFF);
    }
    int32_t window = (int32_t)(bits >> 48);
    while (l <= 16 && (window >> (16 - l)) > t->maxcode[l])
        l++;
    *length = l;
    return l > 16 ? 0 : t->val[((window >> (16 - l)) + t->valoffset[l]) & 0xFF];
}

/* decode_mcu_fast without the coefficients, over many MCUs at once. The scan's bytes up to its
 * first marker, as FILL_BIT_BUFFER_FAST's GET_BYTE reads them (an FF 00 as one FF), are copied
 * once, and codes are read from that copy with a bit buffer refilled whenever it runs low.
 * libjpeg-turbo's own fills decide which MCU meets a marker first, and they need not be
 * repeated code by code: it tests its bit buffer before each code and before each code's
 * magnitude bits, takes six bytes where 16 bits or fewer are left, and no two tests are more
 * than 17 bits apart; so after an MCU it has filled as often as the MCU's last test needed and
 * no more (bulk_filled). An MCU whose fills would meet the marker is left to slow_mcu, as is
 * every MCU that starts within the last WALK_FAST_BYTES a block of the file.
 *
 * One chain of codes leaves a core waiting on each table lookup, so the copy is cut in up to
 * BULK_STREAMS pieces, each read by a stream of its own, in step with the others. A stream
 * that starts within the data starts at a guess (a block's first code at the piece's first
 * bit), and Huffman codes soon fall back into step: once a stream reaches where the next one
 * started, it compares each block it starts with the next stream's first BULK_RECORDS blocks,
 * and where one starts at the same bit with the same block of the MCU, the next stream read
 * from there what this one would have, and this one stops. Only a DC's predictor differs,
 * by a constant per component that the meeting gives; the records let the DCs read before it
 * be checked with it. A stream that passes the next one's records without meeting them reads
 * on in its place. Where anything cannot be joined so, one stream reads the whole copy. */

#define BULK_PAD 4096        /* zeros after the copy: more than an MCU's codes can span */
#define BULK_STREAMS 2       /* the most streams in step */
#define BULK_RECORDS 512     /* blocks a stream records where it did not start the copy */
#define BULK_MIN_PIECE 16384 /* the fewest bytes a stream is given to read */

/* The bytes from ``at`` as GET_BYTE reads them, into ``out``: how many, up to the first FF
 * not followed by 00, or the file's last byte (GET_BYTE looks at the byte after each).
 * ``*limit`` gets how many places there are among them for an MCU to start at within the
 * file's first ``start_by`` bytes: before each byte there, and before the marker; ``*end``,
 * where in the file the bytes after them begin. */
static size_t bulk_unstuff(const unsigned char *d, size_t at, size_t n, size_t start_by,
                           unsigned char *out, size_t *limit, size_t *end)
{
    size_t made = 0;
    *limit = 0;
    while (at + 1 < n) {
        const unsigned char *ff = memchr(d + at, 0xFF, n - 1 - at);
        size_t run = ff ? (size_t)(ff - d) - at : n - 1 - at;
        memcpy(out + made, d + at, run);
        if (at < start_by)
            *limit = made + (start_by - at < run ? start_by - at : run);
        made += run;
        at += run;
        if (!ff)
            break;
        if (d[at + 1] != 0) { /* a marker: an MCU may start right before it */
            if (at < start_by)
                *limit = made + 1;
            break;
        }
        if (at < start_by)
            *limit = made + 1;
        out[made++] = 0xFF;
        at += 2;
    }
    *end = at;
    return made;
}

/* The bits after a joint entry's last test (see make_joint): JOINT_TAIL, or for an entry of one
 * code, its magnitude bits, or the code where it has none. */
#define BULK_TAIL(entry)                                                                   \
    (JOINT_TAIL(entry)                    ? (int)JOINT_TAIL(entry)                          \
     : JOINT_BEFORE_TEST(entry) < JOINT_LENGTH(entry)                                      \
         ? (int)(JOINT_LENGTH(entry) - JOINT_BEFORE_TEST(entry))                           \
         : (int)JOINT_LENGTH(entry))

/* Eight bytes from ``p`` below the ``count`` bits at the top of ``bits``: 56 or more then. */
#define BULK_REFILL(bits, count, p)                                                        \
    do {                                                                                   \
        (bits) |= load_be64(p) >> (count);                                                 \
        (p) += (63 - (count)) >> 3;                                                        \
        (count) |= 56;                                                                     \
    } while (0)

/* A block a stream started, as the stream before it may meet it. */
struct bulk_record {
    int64_t at;      /* the block's first bit */
    int64_t pred[4]; /* the DC predictors before it */
    int64_t dc;      /* its component's predictor after its DC */
    uint64_t mcus;   /* the MCUs the stream had ended before it */
    uint64_t own;    /* and its count of libjpeg-turbo's own readings */
    int block;       /* which block of the MCU it is */
};

enum bulk_stop { BULK_RUNNING, BULK_MET, BULK_END };

struct bulk_stream {
    /* the bit buffer: ``count`` bits at the top of ``bits``, then those from ``p``; k, the
     * next coefficient of the block, and joint, the block's AC table. While the streams run,
     * these live in bulk_run's locals. */
    const unsigned char *p;
    uint64_t bits;
    int count, k;
    const uint32_t *joint;
    int block;             /* the block of the MCU being read */
    int64_t pred[4];       /* the DC predictors: true ones in stream 0, else off by a constant */
    uint64_t mcus, own;    /* MCUs ended; libjpeg-turbo's own readings (drifts in stream 0) */
    int64_t last_test;     /* the last test of the last MCU ended, -1 before one */
    int tail;              /* the bits after the last code's test */
    int64_t start;         /* the first bit it read */
    int64_t watch;         /* from this bit on, it looks out for the next stream */
    int64_t mark_from;     /* from this bit on, bulk_mark sees the blocks it starts */
    int next;              /* that stream, -1 for none */
    int seen;              /* how many of that stream's records it has passed */
    int dead;              /* read by the stream before it, in its place */
    enum bulk_stop stop;
    int met_record;        /* BULK_MET: the record it met */
    /* the MCU being read as it began, where a fill in it might meet the marker */
    struct {
        const unsigned char *p;
        uint64_t bits;
        int count;
        int64_t pred[4];
        uint64_t own;
        int records;
        int64_t low[4], high[4];
    } mcu_start;
    /* the blocks it started, where it did not start the copy */
    struct bulk_record *records;
    int recorded;
    struct bulk_record *recording; /* the block being read, where it is recorded */
    int64_t low[4], high[4];       /* its predictors after BULK_RECORDS blocks, least and most */
};

struct bulk {
    struct walk *w;
    const unsigned char *copy;
    size_t made, end;  /* the copy's bytes, and where in the file the bytes after them begin */
    int64_t first;     /* the walk's bits before the copy's first byte */
    int64_t available; /* the bits before the marker */
    int64_t near_end;  /* an MCU that starts past this bit may have a fill meet the marker */
    int64_t limit;     /* an MCU starts on the fast path where fewer bytes than this are read */
    unsigned long long mcus; /* the MCUs left in the scan */
    struct bulk_stream streams[BULK_STREAMS];
    int changed; /* a stream stopped or was passed since bulk_run began */
};

/* Where libjpeg-turbo has filled to once an MCU whose last test is at ``last_test`` ends: the
 * fewest fills of 48 bits that leave 17 at that test. */
static int64_t bulk_filled(const struct bulk *bulk, int64_t last_test)
{
    int64_t need = last_test + 17 - bulk->first;
    return bulk->first + (need > 0 ? 48 * ((need + 47) / 48) : 0);
}

/* The bit a stream's buffer has read to. */
#define BULK_AT(bulk, p, count) ((bulk)->first + 8 * (int64_t)((p) - (bulk)->copy) - (count))

/* Stream ``i`` starts an MCU (its buffer in the struct): its stop where the MCU would not be
 * on the fast path or (in stream 0, the only one that knows) is past the scan's last; else
 * its start kept where a fill in it might meet the marker. */
static void bulk_mcu_start(struct bulk *bulk, int i)
{
    struct bulk_stream *s = &bulk->streams[i];
    int64_t filled = s->last_test < 0 ? bulk->first : bulk_filled(bulk, s->last_test);
    if ((filled - bulk->first) / 8 >= bulk->limit || (i == 0 && s->mcus == bulk->mcus)) {
        s->stop = BULK_END;
        bulk->changed = 1;
        return;
    }
    if (BULK_AT(bulk, s->p, s->count) <= bulk->near_end)
        return;
    s->mcu_start.p = s->p;
    s->mcu_start.bits = s->bits;
    s->mcu_start.count = s->count;
    memcpy(s->mcu_start.pred, s->pred, sizeof s->pred);
    s->mcu_start.own = s->own;
    s->mcu_start.records = s->recorded;
    memcpy(s->mcu_start.low, s->low, sizeof s->low);
    memcpy(s->mcu_start.high, s->high, sizeof s->high);
}

/* Stream ``i`` ends an MCU (its buffer in the struct): back to the MCU's start, and its stop,
 * where a fill would meet the marker; then the next MCU's start. */
static void bulk_mcu_end(struct bulk *bulk, int i)
{
    struct bulk_stream *s = &bulk->streams[i];
    int64_t last_test = BULK_AT(bulk, s->p, s->count) - s->tail;
    if (bulk_filled(bulk, last_test) > bulk->available) {
        /* only an MCU that starts past near_end gets here, and it was kept */
        s->p = s->mcu_start.p;
        s->bits = s->mcu_start.bits;
        s->count = s->mcu_start.count;
        memcpy(s->pred, s->mcu_start.pred, sizeof s->pred);
        s->own = s->mcu_start.own;
        s->recorded = s->mcu_start.records;
        memcpy(s->low, s->mcu_start.low, sizeof s->low);
        memcpy(s->high, s->mcu_start.high, sizeof s->high);
        s->stop = BULK_END;
        bulk->changed = 1;
        return;
    }
    s->last_test = last_test;
    s->mcus++;
    s->block = 0;
    bulk_mcu_start(bulk, i);
}

/* Where a stream's bulk_mark next has work: at once while it records, else at its watch. */
static void bulk_mark_from(struct bulk_stream *s)
{
    s->mark_from = s->records != NULL && s->recorded < BULK_RECORDS ? INT64_MIN : s->watch;
}

/* Stream ``i`` starts a block at bit ``at``, past its watch or while it records: whether it met
 * the next stream there (its stop); if not, the block's record, where it keeps one. */
static void bulk_mark(struct bulk *bulk, int i, int64_t at)
{
    struct bulk_stream *s = &bulk->streams[i];
    while (s->next >= 0 && at >= s->watch) {
        struct bulk_stream *t = &bulk->streams[s->next];
        while (s->seen < t->recorded && t->records[s->seen].at < at)
            s->seen++;
        if (s->seen < t->recorded) {
            const struct bulk_record *r = &t->records[s->seen];
            if (r->at == at && r->block == s->block) {
                s->stop = BULK_MET;
                s->met_record = s->seen;
                bulk->changed = 1;
                return;
            }
            break;
        }
        if (t->recorded < BULK_RECORDS && t->stop == BULK_RUNNING)
            break; /* it has not come so far yet */
        t->dead = 1; /* passed: this stream reads on in its place */
        bulk->changed = 1;
        s->next = t->next;
        s->watch = s->next >= 0 ? bulk->streams[s->next].start : INT64_MAX;
        s->seen = 0;
    }
    s->recording = NULL;
    if (s->records != NULL && s->recorded < BULK_RECORDS) {
        struct bulk_record *record = s->recording = &s->records[s->recorded++];
        record->at = at;
        memcpy(record->pred, s->pred, sizeof s->pred);
        record->mcus = s->mcus;
        record->own = s->own;
        record->block = s->block;
    }
    bulk_mark_from(s);
}

/* Stream ``i`` starts block s->block on its buffer in bulk_run's locals: the look-out, the
 * record, the block's DC. */
static inline __attribute__((always_inline)) void
bulk_block(struct bulk *bulk, int i, uint64_t *bits, int *count, const unsigned char **p,
           int *k, const uint32_t **joint)
{
    struct bulk_stream *s = &bulk->streams[i];
    struct walk *w = bulk->w;
    int64_t at = BULK_AT(bulk, *p, *count);
    if (at >= s->mark_from) {
        bulk_mark(bulk, i, at);
        if (s->stop != BULK_RUNNING)
            return;
    }
    const struct huff_table *dc = w->block_dc[s->block];
    if (*count < 32)
        BULK_REFILL(*bits, *count, *p);
    unsigned look = (unsigned)(*bits >> (64 - WALK_JOINT_DC_BITS));
    uint32_t entry = dc->joint[look];
    int size, length;
    int64_t diff;
    if (entry == JOINT_NONE) {
        size = fast_symbol(*bits, dc, &length);
        s->own += length > 16;
        *bits <<= length;
        *count -= length;
        diff = dc_extend(TOP_BITS(*bits, size), size);
    } else {
        length = (int)(JOINT_LENGTH(entry));
        size = DC_MAGNITUDE(entry);
        diff = JOINT_BEFORE_TEST(entry) == JOINT_LENGTH(entry)
                   ? dc->dc_diff[look]
                   : dc_extend(TOP_BITS(*bits << (length - size), size), size);
        length -= size;
        *bits <<= length;
        *count -= length;
    }
    *bits <<= size;
    *count -= size;
    int c = w->block_comp[s->block];
    if (i == 0) {
        s->own += dc_drifts(w, s->pred, s->block, diff);
    } else {
        s->pred[c] += diff;
        if (s->recording != NULL) {
            s->recording->dc = s->pred[c];
            s->recording = NULL;
        } else {
            s->low[c] = s->pred[c] < s->low[c] ? s->pred[c] : s->low[c];
            s->high[c] = s->pred[c] > s->high[c] ? s->pred[c] : s->high[c];
        }
    }
    *k = 1;
    *joint = w->block_ac[s->block]->joint;
}

/* Stream ``i``'s AC step with ``entry``, the joint entry at its bits, where that entry ends
 * the block or holds no code whole; then the next block, where the block ended. */
static inline __attribute__((always_inline)) void
bulk_step(struct bulk *bulk, int i, uint32_t entry, uint64_t *bits, int *count,
          const unsigned char **p, int *k, const uint32_t **joint)
{
    struct bulk_stream *s = &bulk->streams[i];
    struct walk *w = bulk->w;
    int next = *k + (int)JOINT_ADVANCE(entry);
    if (*k > (int)JOINT_LAST_INDEX(entry)) {
        /* no code fits the index, or the block ends within the entry */
        int size, length, run;
        if (*count < 32)
            BULK_REFILL(*bits, *count, *p);
        size = fast_symbol(*bits, w->block_ac[s->block], &length);
        s->own += length > 16;
        *bits <<= length;
        *count -= length;
        run = size >> 4;
        size &= 15;
        *k += size ? run + 1 : run == 15 ? 16 : 64;
        s->own += *k > 64 && (size || run == 15);
        *bits <<= size;
        *count -= size;
        if (*k >= 64)
            s->tail = size ? size : length;
    } else {
        *k = next;
        s->own += PAST_THE_BLOCK(next, entry);
        *bits <<= entry & 63;
        *count -= (int)(entry & 63);
        s->tail = BULK_TAIL(entry);
    }
    if (*k < 64)
        return;
    if (++s->block == w->blocks) {
        s->p = *p, s->bits = *bits, s->count = *count;
        bulk_mcu_end(bulk, i);
        *p = s->p, *bits = s->bits, *count = s->count;
        if (s->stop != BULK_RUNNING)
            return;
    }
    bulk_block(bulk, i, bits, count, p, k, joint);
}

/* One stream's buffer in bulk_run's locals; the entry at its bits, and k after it; that entry
 * taken; the locals put back. */
#define BULK_LOCALS(j)                                                                     \
    struct bulk_stream *s##j = &bulk->streams[active[j]];                                  \
    uint64_t bits##j = s##j->bits;                                                         \
    int count##j = s##j->count, k##j = s##j->k, next##j;                                   \
    const unsigned char *p##j = s##j->p;                                                   \
    const uint32_t *joint##j = s##j->joint;                                                \
    uint32_t entry##j
#define BULK_LOOK(j)                                                                       \
    entry##j = joint##j[bits##j >> (64 - WALK_JOINT_AC_BITS)];                             \
    next##j = k##j + (int)JOINT_ADVANCE(entry##j)
#define BULK_TAKE(j)                                                                       \
    (bits##j <<= entry##j & 63, count##j -= (int)(entry##j & 63), k##j = next##j)
/* One stream's step in bulk_run's loop: its entry taken, or given to bulk_step; where that
 * stops a stream or passes one, the loop ends at once, before a passed stream's step. */
#define BULK_GO(j, out)                                                                    \
    do {                                                                                   \
        if (WALK_LIKELY(next##j < 64)) {                                                   \
            BULK_TAKE(j);                                                                  \
        } else {                                                                           \
            bulk_step(bulk, active[j], entry##j, &bits##j, &count##j, &p##j, &k##j,        \
                      &joint##j);                                                          \
            BULK_REFILL(bits##j, count##j, p##j);                                          \
            if (WALK_UNLIKELY(bulk->changed))                                              \
                goto out;                                                                  \
        }                                                                                  \
    } while (0)
#define BULK_SAVE(j)                                                                       \
    (s##j->bits = bits##j, s##j->count = count##j, s##j->k = k##j, s##j->p = p##j,         \
     s##j->joint = joint##j)

/* The running streams in ``active``, in step, until one of them stops or another is passed.
 * A refill leaves 56 bits or more, enough for two entries (27 bits at most each); bulk_step
 * refills where it needs more, and BULK_GO after it. */
static void bulk_run(struct bulk *bulk, const int *active, int count)
{
    if (count == 1) {
        BULK_LOCALS(0);
        for (;;) {
            BULK_REFILL(bits0, count0, p0);
            BULK_LOOK(0);
            BULK_GO(0, out1);
            BULK_LOOK(0);
            BULK_GO(0, out1);
        }
    out1:
        BULK_SAVE(0);
    } else {
        BULK_LOCALS(0);
        BULK_LOCALS(1);
        for (;;) {
            BULK_REFILL(bits0, count0, p0);
            BULK_REFILL(bits1, count1, p1);
            BULK_LOOK(0);
            BULK_LOOK(1);
            BULK_GO(0, out2);
            BULK_GO(1, out2);
            BULK_LOOK(0);
            BULK_LOOK(1);
            BULK_GO(0, out2);
            BULK_GO(1, out2);
        }
    out2:
        BULK_SAVE(0);
        BULK_SAVE(1);
    }
}

/* ``count`` streams from their pieces' starts to their stops. */
static void bulk_read(struct bulk *bulk, struct bulk_record *records, int count)
{
    struct walk *w = bulk->w;
    for (int i = 0; i < count; i++) {
        struct bulk_stream *s = &bulk->streams[i];
        memset(s, 0, sizeof *s);
        int64_t byte = bulk->limit * i / count;
        s->p = bulk->copy + byte;
        s->start = bulk->first + 8 * byte;
        s->count = i == 0 ? w->bits_left : 0;
        s->bits = i == 0 && s->count ? w->buffer << (64 - s->count) : 0;
        if (i == 0)
            memcpy(s->pred, w->dc_pred, sizeof s->pred);
        s->last_test = -1;
        s->records = i == 0 ? NULL : records + (size_t)(i - 1) * BULK_RECORDS;
        for (int c = 0; c < 4; c++) {
            s->low[c] = INT64_MAX;
            s->high[c] = INT64_MIN;
        }
    }
    for (int i = 0; i < count; i++) {
        struct bulk_stream *s = &bulk->streams[i];
        s->next = i + 1 < count ? i + 1 : -1;
        s->watch = s->next >= 0 ? bulk->streams[s->next].start : INT64_MAX;
        bulk_mark_from(s);
        bulk_mcu_start(bulk, i);
        if (s->stop == BULK_RUNNING)
            bulk_block(bulk, i, &s->bits, &s->count, &s->p, &s->k, &s->joint);
    }
    for (;;) {
        int active[BULK_STREAMS], running = 0;
        for (int i = 0; i < count; i++)
            if (bulk->streams[i].stop == BULK_RUNNING && !bulk->streams[i].dead)
                active[running++] = i;
        if (running == 0)
            return;
        bulk->changed = 0;
        bulk_run(bulk, active, running);
    }
}

/* The streams joined where each met the next: 1, and the walk where libjpeg-turbo would
 * stand after them; 0 where they cannot be joined, the walk as it was. */
static int bulk_join(struct bulk *bulk)
{
    struct walk *w = bulk->w;
    int64_t delta[4] = {0, 0, 0, 0};
    uint64_t mcus = 0, own = 0, own_before = 0, mcus_before = 0;
    int i = 0;
    const struct bulk_record *met = NULL;
    while (bulk->streams[i].stop == BULK_MET) {
        const struct bulk_stream *s = &bulk->streams[i], *t = &bulk->streams[s->next];
        if (s->met_record >= t->recorded) /* dropped by a stream going back from the marker */
            return 0;
        met = &t->records[s->met_record];
        own += s->own - own_before;
        mcus += s->mcus - mcus_before;
        own_before = met->own;
        mcus_before = met->mcus;
        for (int c = 0; c < 4; c++)
            delta[c] += s->pred[c] - met->pred[c];
        /* the DCs it read from the meeting on, with the true predictors */
        for (int r = s->met_record; r < t->recorded; r++) {
            int c = w->block_comp[t->records[r].block];
            int64_t dc = t->records[r].dc + delta[c];
            own += dc > w->dc_limit[c] || dc < -w->dc_limit[c];
        }
        for (int c = 0; c < 4; c++)
            own += t->low[c] <= t->high[c] &&
                   (t->high[c] + delta[c] > w->dc_limit[c] ||
                    t->low[c] + delta[c] < -w->dc_limit[c]);
        i = s->next;
    }
    const struct bulk_stream *s = &bulk->streams[i];
    mcus += s->mcus - mcus_before;
    if (mcus > bulk->mcus) /* a stream read on past the scan's last MCU */
        return 0;
    own += s->own - own_before;
    /* libjpeg-turbo's bit buffer holds the bits filled and not yet used, the last of those
     * filled */
    int64_t filled = mcus ? bulk_filled(bulk, s->last_test) : bulk->first;
    int64_t from_copy = (filled - bulk->first) / 8;
    int left = (int)(filled - BULK_AT(bulk, s->p, s->count));
    uint64_t buffer = from_copy >= 8 ? load_be64(bulk->copy + from_copy - 8) : 0;
    if (from_copy < 8) {
        for (int64_t b = 0; b < from_copy; b++)
            buffer = buffer << 8 | bulk->copy[b];
        buffer = from_copy > 0 ? buffer | w->buffer << (8 * from_copy) : w->buffer;
    }
    w->buffer = left ? buffer & (~(uint64_t)0 >> (64 - left)) : 0;
    w->bits_left = left;
    /* where the copy's byte from_copy begins in the file: as far before its end as the bytes
     * after it took there, an FF 00 for each FF */
    w->pos = bulk->end;
    for (size_t b = (size_t)from_copy; b < bulk->made; b++)
        w->pos -= bulk->copy[b] == 0xFF ? 2 : 1;
    w->own_reading |= own > 0;
    for (int c = 0; c < 4; c++)
        w->dc_pred[c] = s->pred[c] + delta[c];
    w->mcu += mcus;
    return 1;
}

/* The MCUs from w->mcu on, as above, while they stay on libjpeg-turbo's fast path (where it
 * takes the first: no restart interval, no marker met, ``fast_bytes`` left); the walk then
 * stands where libjpeg-turbo would, read by up to BULK_STREAMS streams of ``piece`` bytes or
 * more each. WALK_OK, or WALK_NO_MEMORY with the walk as it was. */
static enum walk_state bulk_mcus(struct walk *w, size_t fast_bytes, size_t piece)
{
    const size_t start = w->pos;
    size_t records_at = (w->n - start + BULK_PAD + 15) & ~(size_t)15;
    unsigned char *copy =
        malloc(records_at + sizeof(struct bulk_record) * BULK_RECORDS * (BULK_STREAMS - 1));
    if (copy == NULL)
        return WALK_NO_MEMORY;
    size_t limit, end;
    size_t made = bulk_unstuff(w->data, start, w->n, w->n - fast_bytes + 1, copy, &limit, &end);
    memset(copy + made, 0, BULK_PAD);
    struct bulk_record *records = (struct bulk_record *)(copy + records_at);
    struct bulk bulk_state, *bulk = &bulk_state;
    bulk->w = w;
    bulk->copy = copy;
    bulk->made = made;
    bulk->end = end;
    bulk->first = w->bits_left;
    bulk->available = bulk->first + 8 * (int64_t)made;
    /* an MCU's codes span at most 32 bits a coefficient; then a fill of 48 after 17 */
    bulk->near_end = bulk->available - (int64_t)w->blocks * 64 * 32 - 17 - 48;
    bulk->limit = (int64_t)limit;
    bulk->mcus = w->mcus - w->mcu;
    int streams = BULK_STREAMS;
    while (streams > 1 && limit / (size_t)streams < (piece ? piece : 1))
        streams--;
    bulk_read(bulk, records, streams);
    if (!bulk_join(bulk)) {
        bulk_read(bulk, records, 1);
        bulk_join(bulk);
    }
    free(copy);
    return WALK_OK;
}

/* process_restart and read_restart_marker: whole bytes left in the bit buffer count as
 * extraneous (warned of where next_marker next runs); a marker but the expected RSTn warns. */
static enum walk_state walk_restart(struct walk *w)
{
    enum walk_state state;
    w->discarded += (unsigned)w->bits_left / 8;
    w->bits_left = 0;
    if (w->unread_marker == 0 && (state = next_marker(w)) != WALK_OK)
        return state;
    if (w->unread_marker != 0xD0 + w->next_restart)
        return walk_say(w, "found marker 0x%02x instead of RST%d at byte %zu", w->unread_marker,
                        w->next_restart, w->marker_at);
    w->unread_marker = 0;
    w->next_restart = (w->next_restart + 1) & 7;
    memset(w->dc_pred, 0, sizeof w->dc_pred);
    return WALK_OK;
}

/* start_input_pass and the scan's MCUs, as decode_mcu reads them. */
static enum walk_state walk_scan(struct walk *w, const unsigned char *sos, int count)
{
    enum walk_state state;
    struct walk_component *in_scan[4];
    for (int i = 0; i < count; i++) {
        int id = sos[1 + 2 * i], tables = sos[2 + 2 * i], ci = 0;
        while (ci < w->count && w->comps[ci].id != id)
            ci++;
        for (int j = 0; j < i && ci < w->count; j++)
            if (in_scan[j] == &w->comps[ci])
                ci = w->count;
        if (ci == w->count)
            return WALK_ERROR(w, "invalid component ID %d in SOS", id);
        in_scan[i] = &w->comps[ci];
        in_scan[i]->dc = tables >> 4;
        in_scan[i]->ac = tables & 15;
    }
    const unsigned char *spectral = sos + 1 + 2 * count;
    if (w->scans == 0) { /* jdinput.c's initial_setup: the header's, left to the decoder */
        if (w->width > 65500 || w->height > 65500)
            return WALK_UNJUDGED;
        w->multiple_scans = count < w->count;
        for (int i = 0; i < 4; i++) { /* jinit_huff_decoder's std_huff_tables */
            struct huff_spec *spec = i < 2 ? &w->dc_specs[i] : &w->ac_specs[i - 2];
            if (!spec->defined) {
                spec->defined = 1;
                memcpy(spec->bits, STD_BITS[i], 17);
                memset(spec->val, 0, 256);
                memcpy(spec->val, STD_VALS[i], 162);
            }
        }
    } else if (!w->multiple_scans) {
        return walk_say(w, "didn't expect more than one scan");
    }
    w->in_scans = 1;
    w->scans++;
    unsigned long long per_row, rows;
    if (count == 1) {
        struct walk_component *c = in_scan[0];
        per_row = ((unsigned long long)w->width * c->h + 8 * w->max_h - 1) / (8 * w->max_h);
        rows = ((unsigned long long)w->height * c->v + 8 * w->max_v - 1) / (8 * w->max_v);
        w->blocks = 1;
        w->block_dc[0] = &w->dc_tables[c->dc & 3]; /* a table past 3 fails below */
        w->block_ac[0] = &w->ac_tables[c->ac & 3];
        w->block_comp[0] = 0;
    } else {
        per_row = ((unsigned long long)w->width + 8 * w->max_h - 1) / (8 * w->max_h);
        rows = ((unsigned long long)w->height + 8 * w->max_v - 1) / (8 * w->max_v);
        w->blocks = 0;
        for (int i = 0; i < count; i++) {
            struct walk_component *c = in_scan[i];
            if (w->blocks + c->h * c->v > WALK_MAX_BLOCKS)
                return WALK_ERROR(w, "sampling factors too large for interleaved scan");
            for (int j = 0; j < c->h * c->v; j++) {
                w->block_comp[w->blocks] = i;
                w->block_dc[w->blocks] = &w->dc_tables[c->dc & 3];
                w->block_ac[w->blocks++] = &w->ac_tables[c->ac & 3];
            }
        }
    }
    for (int i = 0; i < count; i++) {
        if (!w->quant_defined[in_scan[i]->quant & 3] || in_scan[i]->quant > 3)
            return WALK_ERROR(w, "quantization table 0x%02x was not defined", in_scan[i]->quant);
        /* An encoder's DC is the block's mean less 128, times 8, over the step, rounded: at
         * most (1024 + step / 2) / step in size; a step's more is left for other rounding. A
         * step of 0 makes every DC 0. */
        int step = w->quant_dc[in_scan[i]->quant];
        w->dc_limit[i] = step ? (1024 + step) / step : INT_MAX;
        w->dc_pred[i] = 0;
    }
    if (spectral[0] != 0 || spectral[1] != 63 || spectral[2] != 0)
        return walk_say(w, "invalid SOS parameters for sequential JPEG");
    for (int i = 0; i < count; i++) {
        int dc = in_scan[i]->dc, ac = in_scan[i]->ac;
        if ((state = make_table(w, 1, dc, &w->dc_tables[dc & 3])) != WALK_OK ||
            (state = make_table(w, 0, ac, &w->ac_tables[ac & 3])) != WALK_OK)
            return state;
    }
    w->mcus = per_row * rows;
    w->bits_left = 0;
    w->buffer = 0;
    w->next_restart = 0;
    unsigned restarts_to_go = w->restart_interval;
    size_t fast_bytes = (size_t)WALK_FAST_BYTES * (size_t)w->blocks;
    for (w->mcu = 0; w->mcu < w->mcus; w->mcu++) {
        if (w->restart_interval) {
            if (restarts_to_go == 0) {
                if ((state = walk_restart(w)) != WALK_OK)
                    return state;
                restarts_to_go = w->restart_interval;
            }
            restarts_to_go--;
        } else if (w->n - w->pos >= fast_bytes && w->unread_marker == 0) {
            /* the fast path from here, as far as it goes; the MCU it stops at (if any) is the
             * slow path's, whose fills may leave the next on the fast path again */
            if ((state = bulk_mcus(w, fast_bytes, w->bulk_piece)) != WALK_OK)
                return state;
            if (w->mcu == w->mcus)
                break;
        }
        if ((state = slow_mcu(w)) != WALK_OK)
            return state;
    }
    return WALK_OK;
}

/* Two bytes, big-endian, where the data has them. */
#define WALK_U16(w, at) (((unsigned)(w)->data[at] << 8) | (w)->data[(at) + 1])

/* jdmarker.c's read_markers from SOI to EOI, each SOS's scan walked on the way. */
static enum walk_state walk_jpeg(struct walk *w)
{
    enum walk_state state;
    if (w->n < 4 || w->data[0] != 0xFF || w->data[1] != 0xD8)
        return WALK_UNJUDGED;
    w->pos = 2;
    int saw_sof = 0;
    for (;;) {
        if (w->unread_marker == 0 && (state = next_marker(w)) != WALK_OK)
            return state;
        int marker = w->unread_marker;
        w->unread_marker = 0;
        if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7))
            continue; /* RSTn, TEM: no parameters */
        if (marker == 0xD9)
            return w->in_scans ? WALK_OK : WALK_UNJUDGED;
        if (marker == 0xD8)
            return WALK_ERROR(w, "two SOI markers");
        if (w->pos + 2 > w->n)
            return walk_ran_out(w);
        unsigned length = WALK_U16(w, w->pos);
        size_t start = w->pos + 2, end = w->pos + length;
        int known = marker == 0xC0 || marker == 0xC1 || marker == 0xC4 || marker == 0xDA ||
                    marker == 0xDB || marker == 0xDD;
        if (marker == 0xDA && w->pos + 3 <= w->n && (length < 3 || w->data[start] < 1 ||
                                                     w->data[start] > 4 ||
                                                     length != 6 + 2u * w->data[start]))
            return WALK_ERROR(w, "bogus marker length"); /* get_sos checks before reading */
        if (known && length < 2)
            return WALK_ERROR(w, "bogus marker length");
        if (known && end > w->n) /* after a scan, a length that a damaged byte made too long */
            return WALK_ERROR(w, "marker 0x%02x at byte %zu runs past the end of the file",
                              marker, w->pos - 2);
        if (marker == 0xC0 || marker == 0xC1) {
            if (saw_sof)
                return WALK_ERROR(w, "two SOF markers");
            saw_sof = 1;
            if (length < 8)
                return WALK_UNJUDGED;
            w->height = (int)WALK_U16(w, start + 1);
            w->width = (int)WALK_U16(w, start + 3);
            w->count = w->data[start + 5];
            if (w->data[start] != 8 || !w->width || !w->height || !w->count ||
                w->count > WALK_MAX_COMPONENTS || length != 8 + 3u * (unsigned)w->count)
                return WALK_UNJUDGED; /* 12-bit samples, DNL or a bad header: not walked */
            for (int i = 0; i < w->count; i++) {
                const unsigned char *c = w->data + start + 6 + 3 * i;
                w->comps[i].id = c[0];
                w->comps[i].h = c[1] >> 4;
                w->comps[i].v = c[1] & 15;
                w->comps[i].quant = c[2];
                if (w->comps[i].h < 1 || w->comps[i].h > 4 || w->comps[i].v < 1 ||
                    w->comps[i].v > 4)
                    return WALK_UNJUDGED;
                if (w->comps[i].h > w->max_h)
                    w->max_h = w->comps[i].h;
                if (w->comps[i].v > w->max_v)
                    w->max_v = w->comps[i].v;
            }
        } else if (marker >= 0xC2 && marker <= 0xCF && marker != 0xC4 && marker != 0xCC) {
            return saw_sof ? WALK_ERROR(w, "two SOF markers") : WALK_UNJUDGED;
        } else if (marker == 0xC4) { /* get_dht */
            size_t at = start;
            long left = (long)length - 2;
            while (left > 16) {
                int index = w->data[at], total = 0;
                uint8_t bits[17] = {0};
                for (int i = 1; i <= 16; i++)
                    total += bits[i] = w->data[at + i];
                left -= 17;
                at += 17;
                if (total > 256 || total > left)
                    return WALK_ERROR(w, "bogus Huffman table definition");
                int ac = index & 0x10, number = index & ~0x10;
                if (number < 0 || number > 3)
                    return WALK_ERROR(w, "bogus DHT index %d", number);
                struct huff_spec *spec = ac ? &w->ac_specs[number] : &w->dc_specs[number];
                spec->defined = 1;
                memcpy(spec->bits, bits, 17);
                memset(spec->val, 0, 256);
                memcpy(spec->val, w->data + at, (size_t)total);
                at += (size_t)total;
                left -= total;
            }
            if (left != 0)
                return WALK_ERROR(w, "bogus marker length");
        } else if (marker == 0xDB) { /* get_dqt */
            size_t at = start;
            long left = (long)length - 2;
            while (left > 0) {
                int number = w->data[at] & 15, precision = w->data[at] >> 4;
                if (number > 3)
                    return WALK_ERROR(w, "bogus DQT index %d", number);
                if (at + 1 + 64 * (precision ? 2 : 1) > end)
                    return WALK_UNJUDGED;
                w->quant_defined[number] = 1;
                w->quant_dc[number] = precision ? (int)WALK_U16(w, at + 1) : w->data[at + 1];
                at += 1 + 64 * (precision ? 2 : 1);
                left -= 1 + 64 * (precision ? 2 : 1);
            }
            if (left != 0)
                return WALK_ERROR(w, "bogus marker length");
        } else if (marker == 0xDD) { /* get_dri */
            if (length != 4)
                return WALK_ERROR(w, "bogus marker length");
            w->restart_interval = WALK_U16(w, start);
        } else if (marker == 0xDA) { /* get_sos, then the scan */
            int count = length >= 3 ? w->data[start] : 0;
            if (!saw_sof)
                return WALK_UNJUDGED;
            if (length != 6 + 2u * (unsigned)count || count < 1 || count > 4)
                return WALK_ERROR(w, "bogus marker length");
            w->pos = end;
            if ((state = walk_scan(w, w->data + start, count)) != WALK_OK)
                return state;
            continue;
        } else if ((marker >= 0xE0 && marker <= 0xEF) || marker == 0xFE || marker == 0xDC ||
                   marker == 0xCC) {
            /* APPn, COM, DNL (skip_variable), DAC: a length under 2 skips nothing */
            if (length >= 2 && end > w->n)
                return walk_ran_out(w);
            w->pos = length >= 2 ? end : w->pos + 2;
            continue;
        } else {
            return WALK_ERROR(w, "unsupported marker type 0x%02x", marker);
        }
        w->pos = end;
    }
}

/* The walk's verdict as jpeg_scan_damage gives it; the walk freed. */
static PyObject *walk_verdict(struct walk *w, enum walk_state state)
{
    if (state == WALK_NO_MEMORY) {
        free(w);
        return PyErr_NoMemory();
    }
    PyObject *result = state == WALK_DAMAGED ? PyUnicode_FromString(w->reason)
                       : w->own_reading      ? Py_NewRef(Py_False)
                                             : Py_NewRef(Py_None);
    free(w);
    return result;
}

/* jpeg_scan_damage(data[, piece]): see the module's docstring below. */
static PyObject *jpeg_scan_damage(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "jpeg_scan_damage(data[, piece]) takes 1 or 2 arguments");
        return NULL;
    }
    size_t piece = BULK_MIN_PIECE;
    if (nargs == 2) {
        piece = PyLong_AsSize_t(args[1]);
        if (piece == (size_t)-1 && PyErr_Occurred())
            return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    struct walk *w = calloc(1, sizeof *w);
    if (w == NULL) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    enum walk_state state;
    Py_BEGIN_ALLOW_THREADS
    w->data = view.buf;
    w->n = (size_t)view.len;
    w->bulk_piece = piece;
    state = walk_jpeg(w);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return walk_verdict(w, state);
}

/* Opens ``arg`` (a path) and sizes it, with the GIL let go: 1 with *fd and *size set for a
 * regular file of at least one byte; 0 (fd closed) for any other, which Python's reading words
 * or reads whole; -1 with OSError set. */
static int open_sized(PyObject *arg, int *fd, size_t *size)
{
    PyObject *path;
    if (!PyUnicode_FSConverter(arg, &path))
        return -1;
    const char *name = PyBytes_AsString(path);
    int error = 0;
    struct stat info;
    Py_BEGIN_ALLOW_THREADS
    *fd = open(name, O_RDONLY | O_CLOEXEC);
    if (*fd < 0)
        error = errno;
    else if (fstat(*fd, &info) != 0)
        error = errno;
    Py_END_ALLOW_THREADS
    Py_DECREF(path);
    if (error) {
        if (*fd >= 0)
            close(*fd);
        errno = error;
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, arg);
        return -1;
    }
    if (!S_ISREG(info.st_mode) || info.st_size <= 0) {
        close(*fd);
        return 0;
    }
    *size = (size_t)info.st_size;
    return 1;
}

/* Reads ``size`` bytes of ``fd`` into ``bytes`` and closes it, without the GIL (the caller let
 * it go): 0 where it read exactly that many and the file held no more, else an errno, or -1 for
 * a file that changed size as it was read. */
static int read_whole(int fd, unsigned char *bytes, size_t size)
{
    size_t done = 0;
    int result = 0;
    while (done < size) {
        ssize_t part = read(fd, bytes + done, size - done);
        if (part < 0 && errno == EINTR)
            continue;
        if (part <= 0) {
            result = part < 0 ? errno : -1;
            break;
        }
        done += (size_t)part;
    }
    if (result == 0) { /* and no more */
        unsigned char more;
        ssize_t part;
        while ((part = read(fd, &more, 1)) < 0 && errno == EINTR)
            ;
        result = part < 0 ? errno : part != 0 ? -1 : 0;
    }
    close(fd);
    return result;
}

/* read_walked(path): see the module's docstring below. */
static PyObject *read_walked(PyObject *module, PyObject *arg)
{
    (void)module;
    int fd;
    size_t size;
    int opened = open_sized(arg, &fd, &size);
    if (opened <= 0)
        return opened < 0 ? NULL : Py_NewRef(Py_None);
    PyObject *data = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (data == NULL) {
        close(fd);
        return NULL;
    }
    struct walk *w = NULL; /* a JPEG's, the only kind walked */
    unsigned char *bytes = (unsigned char *)PyBytes_AsString(data);
    int read_result;
    enum walk_state state = WALK_OK;
    Py_BEGIN_ALLOW_THREADS
    read_result = read_whole(fd, bytes, size);
    if (read_result == 0 && size >= 2 && bytes[0] == 0xFF && bytes[1] == 0xD8) {
        if ((w = calloc(1, sizeof *w)) == NULL) {
            state = WALK_NO_MEMORY;
        } else {
            w->data = bytes;
            w->n = size;
            w->bulk_piece = BULK_MIN_PIECE;
            state = walk_jpeg(w);
        }
    }
    Py_END_ALLOW_THREADS
    if (read_result != 0) {
        Py_DECREF(data);
        if (read_result < 0) /* it changed size as it was read: read_file's */
            Py_RETURN_NONE;
        errno = read_result;
        return PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, arg);
    }
    PyObject *verdict =
        w != NULL || state == WALK_NO_MEMORY ? walk_verdict(w, state) : Py_NewRef(Py_None);
    if (verdict == NULL) {
        Py_DECREF(data);
        return NULL;
    }
    PyObject *result = PyTuple_Pack(2, data, verdict);
    Py_DECREF(data);
    Py_DECREF(verdict);
    return result;
}

/* read_into(path, take): see the module's docstring below. */
static PyObject *read_into(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "read_into(path, take) takes 2 arguments");
        return NULL;
    }
    int fd;
    size_t size;
    int opened = open_sized(args[0], &fd, &size);
    if (opened <= 0)
        return opened < 0 ? NULL : Py_NewRef(Py_None);
    PyObject *buffer = PyObject_CallFunction(args[1], "n", (Py_ssize_t)size);
    Py_buffer view;
    if (buffer == NULL || PyObject_GetBuffer(buffer, &view, PyBUF_WRITABLE) < 0) {
        Py_XDECREF(buffer);
        close(fd);
        return NULL;
    }
    if ((size_t)view.len < size) {
        PyBuffer_Release(&view);
        Py_DECREF(buffer);
        close(fd);
        PyErr_Format(PyExc_ValueError, "take(%zd) gave a buffer of %zd bytes", (Py_ssize_t)size,
                     view.len);
        return NULL;
    }
    int read_result;
    Py_BEGIN_ALLOW_THREADS
    read_result = read_whole(fd, view.buf, size);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (read_result != 0) {
        Py_DECREF(buffer);
        if (read_result < 0) /* it changed size as it was read: read_file's */
            Py_RETURN_NONE;
        errno = read_result;
        return PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, args[0]);
    }
    return Py_BuildValue("(Nn)", buffer, (Py_ssize_t)size);
}

/* uninitialized(size): see the module's docstring below. */
static PyObject *uninitialized(PyObject *module, PyObject *arg)
{
    (void)module;
    Py_ssize_t size = PyLong_AsSsize_t(arg);
    if (size == -1 && PyErr_Occurred())
        return NULL;
    if (size < 0) {
        PyErr_SetString(PyExc_ValueError, "uninitialized(size) takes a size of 0 or more");
        return NULL;
    }
    return PyByteArray_FromStringAndSize(NULL, size);
}

static uint32_t get_u32(const unsigned char *at)
{
    return (uint32_t)at[0] << 24 | (uint32_t)at[1] << 16 | (uint32_t)at[2] << 8 | at[3];
}

/* libdeflate: that of the `deflate` package (a wheel that carries it whole, its symbols
 * exported), whose path edgecli.native gives (use_libdeflate), else the system's (Debian's
 * libdeflate0, which libtiff brings). It inflates a PNG's stream in about 0.4 times zlib's time
 * and checks a chunk's CRC in a tenth of it. Loaded once, with no header needed: a build
 * without it, or a machine without either, inflates and checks with zlib. */
struct libdeflate_api {
    void *(*alloc)(void);
    void (*free)(void *);
    int (*zlib_ex)(void *, const void *, size_t, void *, size_t, size_t *, size_t *);
    uint32_t (*crc32)(uint32_t, const void *, size_t);
    const char *whose; /* "the deflate package's", "the system's" */
};
static struct libdeflate_api libdeflate;
static pthread_once_t libdeflate_once = PTHREAD_ONCE_INIT;
static char libdeflate_path[4096]; /* the deflate package's library, where use_libdeflate named it */

static int load_libdeflate_from(void *library, const char *whose)
{
    if (library == NULL)
        return 0;
    void *alloc = dlsym(library, "libdeflate_alloc_decompressor");
    void *release = dlsym(library, "libdeflate_free_decompressor");
    void *zlib_ex = dlsym(library, "libdeflate_zlib_decompress_ex");
    void *crc = dlsym(library, "libdeflate_crc32");
    if (alloc == NULL || release == NULL || zlib_ex == NULL || crc == NULL) {
        dlclose(library);
        return 0;
    }
    memcpy(&libdeflate.alloc, &alloc, sizeof alloc);
    memcpy(&libdeflate.free, &release, sizeof release);
    memcpy(&libdeflate.zlib_ex, &zlib_ex, sizeof zlib_ex);
    memcpy(&libdeflate.crc32, &crc, sizeof crc);
    libdeflate.whose = whose;
    return 1;
}

static void load_libdeflate(void)
{
    /* Lazily bound: the package's library is a Python extension, whose calls into Python
     * are never made here. */
    if (libdeflate_path[0] != '\0' &&
        load_libdeflate_from(dlopen(libdeflate_path, RTLD_LAZY | RTLD_LOCAL),
                             "the deflate package's"))
        return;
    load_libdeflate_from(dlopen("libdeflate.so.0", RTLD_NOW | RTLD_LOCAL), "the system's");
}

/* A chunk's CRC (of its type and data), by libdeflate where loaded, else zlib. */
static uint32_t chunk_crc(const unsigned char *at, size_t length)
{
    pthread_once(&libdeflate_once, load_libdeflate);
    if (libdeflate.crc32 != NULL)
        return libdeflate.crc32(0, at, length);
    return (uint32_t)crc32(0L, at, (uInt)length);
}

/* png_idat_run(data, position): the run of IDAT chunks of the PNG file ``data`` from the chunk
 * at ``position`` on, each whole and passing its CRC check, walked without the GIL: (the
 * position of the first chunk after the run, or of the first one that is cut short or fails
 * its CRC, which the caller then judges; the (data offset, length) of each IDAT of the run as
 * native uint64 pairs packed in one bytes object; the sum of their lengths). A file's IDATs
 * are hundreds of chunks of a few KB each (FFmpeg writes 4 KB ones), which
 * edgecli.decode.png_layout would otherwise walk in Python, holding the GIL; a Python pair
 * for each would be hundreds of objects a file made, read back and freed under it. */
static PyObject *png_idat_run(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "png_idat_run(data, position) takes 2 arguments");
        return NULL;
    }
    Py_ssize_t position = PyLong_AsSsize_t(args[1]);
    if (position < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "png_idat_run: position must not be negative");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *data = view.buf;
    size_t n = (size_t)view.len, pos = (size_t)position, count = 0, room = 64;
    uint64_t *found = malloc(room * 2 * sizeof *found);
    int no_memory = found == NULL;
    Py_BEGIN_ALLOW_THREADS
    while (!no_memory && pos <= n && n - pos >= 12 && memcmp(data + pos + 4, "IDAT", 4) == 0) {
        uint32_t length = get_u32(data + pos);
        if (length > 0x7fffffffu || n - pos - 12 < length)
            break; /* past PNG's limit or cut short: the caller's walk says so */
        if (chunk_crc(data + pos + 4, (size_t)length + 4) != get_u32(data + pos + 8 + length))
            break;
        if (count == room) {
            uint64_t *more = realloc(found, room * 4 * sizeof *found);
            if (more == NULL) {
                no_memory = 1;
                break;
            }
            found = more, room *= 2;
        }
        found[2 * count] = pos + 8, found[2 * count + 1] = length;
        ++count;
        pos += 12 + (size_t)length;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (no_memory) {
        free(found);
        return PyErr_NoMemory();
    }
    unsigned long long total = 0;
    for (size_t i = 0; i < count; ++i)
        total += found[2 * i + 1];
    PyObject *spans = PyBytes_FromStringAndSize((const char *)found,
                                                (Py_ssize_t)(count * 2 * sizeof *found));
    free(found);
    if (spans == NULL)
        return NULL;
    return Py_BuildValue("(nNK)", (Py_ssize_t)pos, spans, total);
}

/* The arguments of png_gather and png_decode: a bytes-like ``in``, the (offset, length)
 * pairs of spans of it (``count`` of them, 2 * count integers), each checked to lie in it,
 * and a writable ``out``. The spans come as png_idat_run gives them, native uint64 pairs
 * packed in a bytes-like object: read without making an object a span. */
struct spanned {
    Py_buffer in, out;
    uint64_t *spans;
    Py_ssize_t count;
};

static void close_spanned(struct spanned *s)
{
    PyBuffer_Release(&s->in);
    PyBuffer_Release(&s->out);
    free(s->spans);
}

/* 0 with ``s`` open (close_spanned releases it), or -1 with an exception set. */
static int open_spanned(const char *call, PyObject *data, PyObject *chunks, PyObject *out,
                        struct spanned *s)
{
    Py_buffer packed;
    if (PyObject_GetBuffer(chunks, &packed, PyBUF_SIMPLE) < 0)
        return -1;
    if (packed.len % (Py_ssize_t)(2 * sizeof *s->spans) != 0) {
        PyBuffer_Release(&packed);
        PyErr_Format(PyExc_ValueError, "%s: the spans are not whole (offset, length) pairs",
                     call);
        return -1;
    }
    s->count = packed.len / (Py_ssize_t)(2 * sizeof *s->spans);
    s->spans = malloc((size_t)packed.len + 2 * sizeof *s->spans);
    if (s->spans != NULL)
        memcpy(s->spans, packed.buf, (size_t)packed.len);
    PyBuffer_Release(&packed);
    if (s->spans == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (PyObject_GetBuffer(data, &s->in, PyBUF_SIMPLE) < 0) {
        free(s->spans);
        return -1;
    }
    if (PyObject_GetBuffer(out, &s->out, PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&s->in);
        free(s->spans);
        return -1;
    }
    for (Py_ssize_t i = 0; i < s->count; ++i) {
        uint64_t offset = s->spans[2 * i], length = s->spans[2 * i + 1];
        if (offset > (uint64_t)s->in.len || length > (uint64_t)s->in.len - offset) {
            close_spanned(s);
            PyErr_Format(PyExc_ValueError, "%s: a chunk lies outside the data", call);
            return -1;
        }
    }
    return 0;
}

/* png_gather(parts, out): for each (data, chunks, at) of ``parts``, the (offset, length) spans
 * ``chunks`` (png_idat_run's) of ``data`` copied end to end into ``out`` from ``at`` on, all
 * of them without the GIL: a batch of PNGs costs one hand-off of it, not one a file. The bytes
 * copied; ValueError where a span lies outside its data, or a part runs past ``out``'s end. */
static PyObject *png_gather(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "png_gather(parts, out) takes 2 arguments");
        return NULL;
    }
    PyObject *parts = PySequence_Tuple(args[0]);
    if (parts == NULL)
        return NULL;
    Py_ssize_t count = PyTuple_Size(parts), opened = 0;
    struct spanned *all = calloc((size_t)count + 1, sizeof *all);
    uint64_t *at = calloc((size_t)count + 1, sizeof *at);
    PyObject *result = NULL;
    if (all == NULL || at == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (; opened < count; ++opened) {
        PyObject *data, *chunks;
        unsigned long long where;
        if (!PyArg_ParseTuple(PyTuple_GetItem(parts, opened), "OOK", &data, &chunks, &where))
            goto done;
        struct spanned *s = &all[opened];
        if (open_spanned("png_gather", data, chunks, args[1], s) < 0)
            goto done;
        at[opened] = where;
        uint64_t total = 0;
        for (Py_ssize_t i = 0; i < s->count; ++i)
            total += s->spans[2 * i + 1];
        if (where > (uint64_t)s->out.len || total > (uint64_t)s->out.len - where) {
            close_spanned(s);
            PyErr_SetString(PyExc_ValueError, "png_gather: the output is too small");
            goto done;
        }
    }
    uint64_t copied = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < count; ++k) {
        const struct spanned *s = &all[k];
        unsigned char *to = (unsigned char *)s->out.buf + at[k];
        for (Py_ssize_t i = 0; i < s->count; ++i) {
            size_t length = (size_t)s->spans[2 * i + 1];
            memcpy(to, (const unsigned char *)s->in.buf + s->spans[2 * i], length);
            to += length;
            copied += length;
        }
    }
    Py_END_ALLOW_THREADS
    result = PyLong_FromUnsignedLongLong(copied);
done:
    for (Py_ssize_t k = 0; k < opened; ++k)
        close_spanned(&all[k]);
    free(all);
    free(at);
    Py_DECREF(parts);
    return result;
}

/* png_decode: a gray, gray+alpha, RGB or RGBA PNG of 8 or 16 bits a sample (not interlaced)
 * into the BGR frame cv2.imdecode(IMREAD_COLOR) gives for it: each sample's high byte, gray
 * copied to all three, alpha dropped, red and blue swapped. Only where libpng would decode the
 * image data without a word: zlib fed a row of output at a time, as libpng feeds it (so a
 * distance past the window the stream's header names fails here as there; libdeflate inflates
 * it whole where that window is 32 KB, and no distance can pass it), each row's filter type at
 * most 4, and the stream ending exactly after the last row with every IDAT byte read (libpng
 * warns of more, or of less).
 * Anything else returns 0, and the caller has cv2 decode the file (its frame, warning or
 * error). Paeth's predictor is computed without branches: a photograph's choices are too
 * random for a branch predictor, and that is where libpng spends a third of a frame. */
static inline int paeth_predict(int a, int b, int c)
{
    int pa = abs(b - c), pb = abs(a - c), pc = abs(a + b - c - c);
    int take_a = -((pa <= pb) & (pa <= pc)), take_b = -(pb <= pc); /* all ones, or zero */
    int not_a = c ^ ((b ^ c) & take_b);
    return not_a ^ ((a ^ not_a) & take_a);
}

/* One row's Sub (1), Average (3) or Paeth (4) filter undone in place below an undone row
 * ``above``, ``bpp`` bytes a pixel. Each byte depends on the one a pixel to its left: kept in
 * ``left[]`` rather than read back from the row, whose store the next pixel's load would wait
 * for. Inlined for each constant ``kind`` and ``bpp``, so that no branch is left in the loop
 * and ``left[]`` and ``upper_left[]`` live in registers. */
static inline __attribute__((always_inline)) void
unfilter_left(int kind, unsigned char *row, const unsigned char *above, size_t row_bytes,
              size_t bpp)
{
    int left[8] = {0}, upper_left[8] = {0};
    for (size_t i = 0; i + bpp <= row_bytes; i += bpp) {
        for (size_t k = 0; k < bpp; k++) {
            int up = above[i + k], predicted;
            if (kind == 1)
                predicted = left[k];
            else if (kind == 3)
                predicted = (left[k] + up) >> 1;
            else
                predicted = paeth_predict(left[k], up, upper_left[k]);
            left[k] = (row[i + k] + predicted) & 0xff;
            row[i + k] = (unsigned char)left[k];
            upper_left[k] = up;
        }
    }
}

#define UNFILTER_KIND(kind)                                                                    \
    switch (bpp) {                                                                             \
    case 1: unfilter_left(kind, row, above, row_bytes, 1); break;                              \
    case 2: unfilter_left(kind, row, above, row_bytes, 2); break;                              \
    case 3: unfilter_left(kind, row, above, row_bytes, 3); break;                              \
    case 4: unfilter_left(kind, row, above, row_bytes, 4); break;                              \
    case 6: unfilter_left(kind, row, above, row_bytes, 6); break;                              \
    default: unfilter_left(kind, row, above, row_bytes, 8); break;                             \
    }

/* Row ``y`` of ``filtered`` (a filter byte, then ``row_bytes`` bytes, each row) undone in
 * place, ``bpp`` bytes a pixel (1, 2, 3, 4, 6 or 8), the row above it undone already; 0 where
 * its filter byte is over 4. */
static int png_unfilter_row(unsigned char *filtered, size_t y, size_t row_bytes, size_t bpp)
{
    unsigned char kind = filtered[y * (row_bytes + 1)];
    unsigned char *row = filtered + y * (row_bytes + 1) + 1;
    const unsigned char *above = row - (row_bytes + 1);
    size_t left = bpp < row_bytes ? bpp : row_bytes, i;
    if (kind > 4)
        return 0;
    if (y == 0) { /* the row above the first is zeros: Up is None, Paeth is Sub */
        if (kind == 1 || kind == 4)
            for (i = left; i < row_bytes; i++)
                row[i] = (unsigned char)(row[i] + row[i - bpp]);
        else if (kind == 3)
            for (i = left; i < row_bytes; i++)
                row[i] = (unsigned char)(row[i] + (row[i - bpp] >> 1));
    } else if (kind == 2) { /* Up: no byte depends on another of its row */
        for (i = 0; i < row_bytes; i++)
            row[i] = (unsigned char)(row[i] + above[i]);
    } else if (kind == 1) {
        UNFILTER_KIND(1)
    } else if (kind == 3) {
        UNFILTER_KIND(3)
    } else if (kind == 4) {
        UNFILTER_KIND(4)
    }
    return 1;
}
#undef UNFILTER_KIND

/* The image data of ``idat`` (count spans of ``data``) inflated into ``filtered``, a row of
 * ``row_size`` bytes a call, ``height`` rows: 1 where the stream is exactly those rows. */
static int png_inflate_rows(const unsigned char *data, const uint64_t *spans, Py_ssize_t count,
                            unsigned char *filtered, size_t row_size, size_t height)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 0) != Z_OK) /* 0: the window the stream's header names */
        return 0;
    Py_ssize_t next = 0;
    int ok = 1, status = Z_OK;
    for (size_t y = 0; y < height && ok; y++) {
        z.next_out = filtered + y * row_size;
        z.avail_out = (uInt)row_size;
        while (z.avail_out > 0) {
            if (z.avail_in == 0) {
                if (next == count) {
                    ok = 0;
                    break;
                }
                z.next_in = (Bytef *)(data + spans[2 * next]);
                z.avail_in = (uInt)spans[2 * next + 1];
                next++;
                continue;
            }
            status = inflate(&z, Z_NO_FLUSH);
            int last = status == Z_STREAM_END && z.avail_out == 0 && y + 1 == height;
            if (status != Z_OK && !last) {
                ok = 0;
                break;
            }
        }
    }
    if (ok && status != Z_STREAM_END) { /* the end may follow in bytes not read yet */
        unsigned char spare;
        for (;;) {
            if (z.avail_in == 0) {
                if (next == count)
                    break;
                z.next_in = (Bytef *)(data + spans[2 * next]);
                z.avail_in = (uInt)spans[2 * next + 1];
                next++;
                continue;
            }
            z.next_out = &spare;
            z.avail_out = 1;
            status = inflate(&z, Z_NO_FLUSH);
            if (status != Z_OK || z.avail_out == 0) /* an error, or data past the last row */
                break;
        }
    }
    while (next < count && spans[2 * next + 1] == 0) /* empty IDATs after the stream's end */
        next++;
    ok = ok && status == Z_STREAM_END && z.avail_in == 0 && next == count;
    inflateEnd(&z);
    return ok;
}

/* The image data inflated whole by libdeflate: 1 where the stream, every IDAT byte of it,
 * inflates to exactly ``size`` bytes with its Adler-32 right; -1 where libdeflate is not at
 * hand (or memory ran out): zlib's turn. Only for a stream whose header names a 32 KB window:
 * no distance can reach past it, so inflating whole accepts what libpng's row by row does. */
static int png_inflate_whole(const unsigned char *data, const uint64_t *spans, Py_ssize_t count,
                             unsigned char *filtered, size_t size)
{
    pthread_once(&libdeflate_once, load_libdeflate);
    if (libdeflate.zlib_ex == NULL)
        return -1;
    size_t total = 0;
    for (Py_ssize_t i = 0; i < count; i++)
        total += spans[2 * i + 1];
    if (total < 2)
        return -1;
    unsigned char *stream = malloc(total);
    if (stream == NULL)
        return -1;
    unsigned char *to = stream;
    for (Py_ssize_t i = 0; i < count; i++) {
        memcpy(to, data + spans[2 * i], spans[2 * i + 1]);
        to += spans[2 * i + 1];
    }
    void *decompressor = (stream[0] >> 4) == 7 ? libdeflate.alloc() : NULL; /* a 32 KB window */
    if (decompressor == NULL) {
        free(stream);
        return -1;
    }
    size_t read = 0, written = 0;
    int result = libdeflate.zlib_ex(decompressor, stream, total, filtered, size, &read, &written);
    libdeflate.free(decompressor);
    free(stream);
    return result == 0 && read == total && written == size;
}

/* png_inflater(): which inflater png_decode takes for a stream of a 32 KB window. */
static PyObject *png_inflater(PyObject *module, PyObject *unused)
{
    (void)module, (void)unused;
    pthread_once(&libdeflate_once, load_libdeflate);
    if (libdeflate.zlib_ex == NULL)
        return PyUnicode_FromString("zlib");
    return PyUnicode_FromFormat("libdeflate (%s)", libdeflate.whose);
}

/* use_libdeflate(path): the deflate package's library for png_decode and png_idat_run, where
 * it loads, before the system's; heeded only before either has run. */
static PyObject *use_libdeflate(PyObject *module, PyObject *arg)
{
    (void)module;
    PyObject *encoded = NULL;
    if (!PyUnicode_FSConverter(arg, &encoded))
        return NULL;
    const char *path = PyBytes_AsString(encoded);
    if (path != NULL && strlen(path) < sizeof libdeflate_path)
        strcpy(libdeflate_path, path);
    Py_DECREF(encoded);
    if (path == NULL)
        return NULL;
    return png_inflater(module, NULL);
}

static PyObject *png_decode(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "png_decode(data, idat, width, height, channels, "
                                         "depth, out) takes 7 arguments");
        return NULL;
    }
    uint32_t width, height;
    long channels = PyLong_AsLong(args[4]), depth = PyLong_AsLong(args[5]);
    if (parse_size(args[2], "width", &width) < 0 || parse_size(args[3], "height", &height) < 0 ||
        PyErr_Occurred())
        return NULL;
    if (channels < 1 || channels > 4 || (depth != 8 && depth != 16)) {
        PyErr_SetString(PyExc_ValueError, "png_decode: 1 to 4 channels of 8 or 16 bits");
        return NULL;
    }
    struct spanned s;
    if (open_spanned("png_decode", args[0], args[1], args[6], &s) < 0)
        return NULL;
    const uint64_t *spans = s.spans;
    Py_ssize_t count = s.count;
    size_t pixel_bytes = (size_t)channels * (size_t)(depth / 8), sample = (size_t)(depth / 8);
    size_t row_bytes = (size_t)width * pixel_bytes, pixels = (size_t)width * height;
    int fits = (uint64_t)s.out.len == (uint64_t)pixels * 3;
    for (Py_ssize_t i = 0; i < count && fits; ++i)
        fits = spans[2 * i + 1] <= UINT32_MAX; /* (zlib's avail_in) */
    unsigned char *filtered = fits ? malloc((row_bytes + 1) * (size_t)height) : NULL;
    int decoded = 0;
    if (filtered != NULL) {
        Py_BEGIN_ALLOW_THREADS
        int whole = count ? png_inflate_whole(s.in.buf, spans, count, filtered,
                                              (row_bytes + 1) * (size_t)height)
                          : 0;
        if (whole < 0)
            whole = png_inflate_rows(s.in.buf, spans, count, filtered, row_bytes + 1, height);
        /* Each row to BGR as soon as it is undone, while it is still in the cache. */
        decoded = whole;
        unsigned char *bgr = s.out.buf;
        for (size_t y = 0; y < height && decoded; y++) {
            if (!(decoded = png_unfilter_row(filtered, y, row_bytes, pixel_bytes)))
                break;
            const unsigned char *row = filtered + y * (row_bytes + 1) + 1;
            unsigned char *to = bgr + y * (size_t)width * 3;
            if (channels <= 2) { /* gray, and gray+alpha: the gray three times */
                for (size_t x = 0; x < width; x++, to += 3, row += pixel_bytes)
                    to[0] = to[1] = to[2] = row[0];
            } else { /* RGB, and RGBA: blue, green, red (big-endian: high bytes) */
                for (size_t x = 0; x < width; x++, to += 3, row += pixel_bytes) {
                    to[0] = row[2 * sample];
                    to[1] = row[sample];
                    to[2] = row[0];
                }
            }
        }
        Py_END_ALLOW_THREADS
        free(filtered);
    }
    close_spanned(&s);
    if (!fits) {
        PyErr_SetString(PyExc_ValueError, "png_decode: out is not height x width x 3 bytes");
        return NULL;
    }
    return PyBool_FromLong(decoded); /* (False too where the malloc failed: cv2 may manage) */
}

static PyObject *runtime_zlib_version(PyObject *module, PyObject *unused)
{
    (void)module, (void)unused;
    return PyUnicode_FromString(zlibVersion());
}

static PyMethodDef methods[] = {
    {"encode_rows", (PyCFunction)(void (*)(void))encode_rows, METH_FASTCALL,
     "encode_rows(scanlines, width) -> bytes\n\nThe 1-bit grayscale PNG of a map ``width`` "
     "pixels wide from its scanlines (a C-contiguous buffer of whole rows of 1 + ceil(width / "
     "8) bytes, the filter byte 0 first), as edgecli.output.png.png_from_rows_1bit makes it."},
    {"encode_map", (PyCFunction)(void (*)(void))encode_map, METH_FASTCALL,
     "encode_map(pixels, width) -> bytes\n\nThe 1-bit grayscale PNG of a C-contiguous uint8 map "
     "of rows ``width`` pixels long, a nonzero pixel white, as "
     "edgecli.output.png.encode_png_1bit makes it."},
    {"png_from_zlib", (PyCFunction)(void (*)(void))png_from_zlib, METH_FASTCALL,
     "png_from_zlib(stream, width, height) -> bytes\n\nThe 1-bit grayscale PNG of ``width`` x "
     "``height`` pixels around the zlib stream of its scanlines (a C-contiguous buffer), as "
     "edgecli.output.png.png_from_zlib_1bit makes it: the chunks and their CRCs."},
    {"write_file", (PyCFunction)(void (*)(void))write_file, METH_FASTCALL,
     "write_file(data, temporary, path) -> None\n\nCreate ``temporary`` (which must not exist: "
     "O_EXCL, mode 0666 less the umask), write the bytes-like ``data`` into it, close it and "
     "rename it to ``path``; on a failure after creating it, remove it. Raises the OSError "
     "of the system call that failed, as the os module's calls would."},
    {"jpeg_scan_damage", (PyCFunction)(void (*)(void))jpeg_scan_damage, METH_FASTCALL,
     "jpeg_scan_damage(data, piece=16384) -> str | None | False\n\nThe first warning or error "
     "libjpeg-turbo meets in the scans of the sequential Huffman JPEG file ``data`` (a "
     "bytes-like object), in its words; None where it meets none, and where ``data`` is no "
     "such file (progressive, arithmetic-coded, 12-bit, a header libjpeg-turbo refuses, cut "
     "short without EOI); False where it meets none but reads codes silently in a way of its "
     "own: a bad code its fast path takes for a 0, a coefficient past a block's end, or a DC "
     "no encoder of 8-bit samples writes. A scan is read in up to two pieces at once, "
     "each of ``piece`` bytes or more; the answer is the same for any ``piece``."},
    {"read_walked", read_walked, METH_O,
     "read_walked(path) -> (bytes, verdict) | None\n\nThe whole of the regular file at "
     "``path``, read with the GIL let go twice (open and size, then read, close and walk), and "
     "jpeg_scan_damage's verdict on those bytes (None for a file that is no JPEG). None where "
     "the file is not regular, is empty, or changed size as it was read: Python's reading of "
     "it says why, or reads it whole. Raises the OSError of the system call that failed."},
    {"read_into", (PyCFunction)(void (*)(void))read_into, METH_FASTCALL,
     "read_into(path, take) -> (buffer, size) | None\n\nThe whole of the regular file at "
     "``path`` read into ``take(size)``, a writable buffer of at least its ``size`` bytes, "
     "with the GIL let go twice (open and size, then read and close): (that buffer, size). "
     "None where the file is not regular or is empty (take never called), or changed size "
     "as it was read: Python's reading of it says why, or reads it whole. Raises the "
     "OSError of the system call that failed, or what take raised."},
    {"uninitialized", uninitialized, METH_O,
     "uninitialized(size) -> bytearray\n\nA bytearray of ``size`` bytes left as the "
     "allocator gives them: a large one's pages are touched first by whoever writes them, "
     "not here (bytearray(size) writes zeros into every page, holding the GIL)."},
    {"png_idat_run", (PyCFunction)(void (*)(void))png_idat_run, METH_FASTCALL,
     "png_idat_run(data, position): the run of whole IDAT chunks from position on, their CRCs "
     "checked: (the position after it, their (data offset, length) pairs as native uint64 "
     "packed in bytes, the sum of their lengths)."},
    {"png_gather", (PyCFunction)(void (*)(void))png_gather, METH_FASTCALL,
     "png_gather(parts, out): for each (data, chunks, at) of parts, the (offset, length) "
     "spans chunks of data end to end into out from at on, without the GIL; the bytes "
     "copied."},
    {"png_decode", (PyCFunction)(void (*)(void))png_decode, METH_FASTCALL,
     "png_decode(data, idat, width, height, channels, depth, out) -> bool\n\nThe "
     "non-interlaced PNG ``data`` (its IDAT spans ``idat``, packed as png_idat_run's; 1, 2, "
     "3 or 4 channels: gray, gray+alpha, RGB, RGBA; of 8 or 16 bits) decoded into ``out``, a "
     "writable buffer of height x width x 3 bytes, as cv2.imdecode's BGR frame; False, "
     "``out`` then unspecified, where libpng would not decode the image data without a word "
     "(cv2 must then decode it)."},
    {"use_libdeflate", use_libdeflate, METH_O,
     "use_libdeflate(path) -> str\n\nTake the libdeflate at ``path`` (the deflate package's) "
     "for png_decode and png_idat_run where it loads, before the system's; heeded only before "
     "either has run. What png_inflater then says."},
    {"png_inflater", png_inflater, METH_NOARGS,
     "png_inflater() -> str\n\nThe inflater of png_decode: 'libdeflate (the deflate "
     "package's)', 'libdeflate (the system's)' (libdeflate.so.0) or 'zlib'."},
    {"zlib_version", runtime_zlib_version, METH_NOARGS,
     "zlib_version() -> str\n\nThe version of the zlib this module runs on."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "edgecli._native",
    "1-bit PNGs encoded, files written atomically and JPEG scans checked, without the GIL "
    "(see _native.c).",
    0,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__native(void)
{
    return PyModuleDef_Init(&module_def);
}
