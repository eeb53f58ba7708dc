/* png_writers.py's C: one call a PNG, through ctypes (which lets go of the GIL for it):
   deflate the 1-bit scanlines (Z_RLE, as edgecli.png), the chunks, and the atomic write (open
   O_EXCL, write, close, rename). edgecli/_native.c is its product form, in two calls. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

static void put32(unsigned char *p, uint32_t v) {
    p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v;
}

/* The PNG's bytes only, into out (cap bytes): its length, or -1. For checking equality. */
long edgecli_png_bytes(const unsigned char *rows, size_t nbytes, uint32_t width, uint32_t height,
                       unsigned char *out, size_t cap) {
    z_stream z; memset(&z, 0, sizeof z);
    if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15, 9, Z_RLE) != Z_OK) return -1;
    if (cap < 53) return -1;
    z.next_in = (unsigned char *)rows; z.avail_in = nbytes;
    z.next_out = out + 41; z.avail_out = cap - 53;
    int rc = deflate(&z, Z_FINISH); size_t zlen = cap - 53 - z.avail_out; deflateEnd(&z);
    if (rc != Z_STREAM_END) return -1;
    unsigned char *p = out;
    memcpy(p, "\x89PNG\r\n\x1a\n", 8); p += 8;
    put32(p, 13); memcpy(p + 4, "IHDR", 4); put32(p + 8, width); put32(p + 12, height);
    p[16] = 1; p[17] = 0; p[18] = 0; p[19] = 0; p[20] = 0;
    put32(p + 21, crc32(0, p + 4, 17)); p += 25;
    put32(p, zlen); memcpy(p + 4, "IDAT", 4);
    uint32_t crc = crc32(0, p + 4, 4 + zlen); p += 8 + zlen;
    put32(p, crc); p += 4;
    memcpy(p, "\x00\x00\x00\x00IEND\xae\x42\x60\x82", 12); p += 12;
    return p - out;
}

/* Returns 0, an errno (> 0) from the file system, or -1 for zlib/memory. */
int edgecli_png_write(const unsigned char *rows, size_t nbytes, uint32_t width, uint32_t height,
                      const char *temp, const char *final) {
    size_t cap = nbytes + nbytes / 1000 + 4096; /* above deflateBound for Z_RLE */
    unsigned char *buf = malloc(cap);
    if (!buf) return -1;
    long len = edgecli_png_bytes(rows, nbytes, width, height, buf, cap);
    if (len < 0) { free(buf); return -1; }
    int fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) { int e = errno; free(buf); return e; }
    size_t done = 0;
    while (done < (size_t)len) {
        ssize_t n = write(fd, buf + done, len - done);
        if (n < 0) { if (errno == EINTR) continue; int e = errno; close(fd); unlink(temp); free(buf); return e; }
        done += n;
    }
    free(buf);
    if (close(fd) != 0) { int e = errno; unlink(temp); return e; }
    if (rename(temp, final) != 0) { int e = errno; unlink(temp); return e; }
    return 0;
}
