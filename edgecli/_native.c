/* edgecli._native: what the worker threads do for each PNG, without the GIL: encode it
 * (1-bit grayscale), or wrap the GPU's zlib stream of it in its chunks, and write a file
 * atomically.
 *
 * Encoding makes the same bytes as edgecli.png's Python encoder (png_from_rows_1bit,
 * encode_png_1bit) where both link the same zlib: each scanline a filter byte 0 then the
 * pixels as bits, deflated at zlib's default level with the Z_RLE strategy, window 15,
 * memLevel 9; chunks IHDR, one IDAT, IEND. What differs is the GIL: the Python encoder wins it
 * back after each zlib call and holds it while it joins the chunks (and np.packbits holds it
 * throughout), so the worker threads queue for it once a PNG per step; here a PNG costs one
 * release, for the whole of the packing, deflate, checksums and chunks. Writing is
 * edgecli.sinks.write_atomic's: the Python os calls there win the GIL back after each of its
 * four system calls; write_file makes the same calls in one release. edgecli.png and
 * edgecli.sinks use this module where it was built (setup.py builds it optionally) and their
 * own code elsewhere; tests/test_native.py and tests/test_files.py hold the two to the same
 * results.
 *
 * Limited API (3.11: the buffer protocol): one build serves every later CPython.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
/* The most bytes of scanlines or pixels a call takes (2 GiB - 1): edgecli.png encodes larger
 * maps in Python. */
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

static PyObject *runtime_zlib_version(PyObject *module, PyObject *unused)
{
    (void)module, (void)unused;
    return PyUnicode_FromString(zlibVersion());
}

static PyMethodDef methods[] = {
    {"encode_rows", (PyCFunction)(void (*)(void))encode_rows, METH_FASTCALL,
     "encode_rows(scanlines, width) -> bytes\n\nThe 1-bit grayscale PNG of a map ``width`` "
     "pixels wide from its scanlines (a C-contiguous buffer of whole rows of 1 + ceil(width / "
     "8) bytes, the filter byte 0 first), as edgecli.png.png_from_rows_1bit makes it."},
    {"encode_map", (PyCFunction)(void (*)(void))encode_map, METH_FASTCALL,
     "encode_map(pixels, width) -> bytes\n\nThe 1-bit grayscale PNG of a C-contiguous uint8 map "
     "of rows ``width`` pixels long, a nonzero pixel white, as edgecli.png.encode_png_1bit makes "
     "it."},
    {"png_from_zlib", (PyCFunction)(void (*)(void))png_from_zlib, METH_FASTCALL,
     "png_from_zlib(stream, width, height) -> bytes\n\nThe 1-bit grayscale PNG of ``width`` x "
     "``height`` pixels around the zlib stream of its scanlines (a C-contiguous buffer), as "
     "edgecli.png.png_from_zlib_1bit makes it: the chunks and their CRCs."},
    {"write_file", (PyCFunction)(void (*)(void))write_file, METH_FASTCALL,
     "write_file(data, temporary, path) -> None\n\nCreate ``temporary`` (which must not exist: "
     "O_EXCL, mode 0666 less the umask), write the bytes-like ``data`` into it, close it and "
     "rename it to ``path``; on a failure after creating it, remove it. Raises the OSError "
     "of the system call that failed, as the os module's calls would."},
    {"zlib_version", runtime_zlib_version, METH_NOARGS,
     "zlib_version() -> str\n\nThe version of the zlib this module runs on."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "edgecli._native",
    "1-bit PNGs encoded, and files written atomically, without the GIL (see _native.c).",
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
