// deflate.cu: the zlib streams of 1-bit PNG scanlines, on the GPU, byte for byte as zlib makes
// them with edgecli's settings (edgecli.output.png: level 6, window 15, memLevel 9, Z_RLE).
//
// Why it can be exact: with Z_RLE, zlib's deflate_rle() matches only at distance 1, greedily,
// and what it emits depends on the bytes alone. A run of L equal bytes (the byte before it
// differs, or there is none) becomes a literal, then as many 258-byte matches as fit in the
// other L - 1 bytes, then a match of the r < 258 bytes left if r >= 3, else r literals. So every
// run's tokens are known from its start and length, in parallel. zlib closes a block after
// every 32767 tokens (lit_bufsize - 1 with memLevel 9) and at the end, where the last block may
// hold none; each block is coded as trees.c's _tr_flush_block() chooses: static or dynamic
// Huffman codes built by build_tree() (a heap with depth tie-breaks, gen_bitlen()'s overflow
// fix) and sent by send_all_trees(), which the functions below follow line for line. Where
// zlib could store a block instead (stored_len + 4 <= the coded length), the choice hangs on
// its window's position (buf != NULL), which is not reproduced: the frame is flagged, and the
// host compresses it with zlib itself. That only happens to incompressible rows. Held to zlib
// 1.2.13 (tests/test_deflate.py) and 1.3 (the GPU tests); edgecli.edges.cuda_deflate checks the
// host's own encoder against it before a run uses it.
//
// The shared part (DEFLATE_FN functions) also compiles as C on the host, with DEFLATE_HOST, for
// the serial reference that tests/test_deflate.py holds to zlib on machines without a GPU.
//
// Kernel deflate_rle: one block of DEFLATE_THREADS threads a frame; thread t owns a contiguous
// chunk of the frame's bytes and the runs that start in it. Phases, a __syncthreads() apart:
//   0. zero the frame's output; Adler-32 partial sums; each chunk's first run start
//   1. each run's end (the next run start: in the chunk, or the first of a later chunk, by a
//      suffix minimum), its tokens counted; an exclusive scan gives each thread's first token
//   2. per block of 32767 tokens, the symbol frequencies (shared-memory histograms, groups of
//      DEFLATE_GROUP blocks) and the byte where each block starts
//   3. one thread a block (DEFLATE_BUILDERS at once, in different warps, their trees in shared
//      memory) builds its trees and header, or flags the frame
//   4. the bits of each thread's tokens, scanned: each token's bit position
//   5. the tokens' codes OR-ed into place; the block headers, end-of-block codes, the zlib
//      header and the Adler-32 trailer by single threads
// Output: frame f's zlib stream from out + f * out_words (32-bit words), its length in sizes[f],
// or -1 where the host must compress it.

#ifdef DEFLATE_HOST
#include <string.h>
#define DEFLATE_FN static
#else
#define DEFLATE_FN __device__ static
#endif

#define DEFLATE_LITERALS 256
#define DEFLATE_END_BLOCK 256
#define DEFLATE_L_CODES 286 /* literals, end of block, 29 length codes */
#define DEFLATE_D_CODES 30
#define DEFLATE_BL_CODES 19
#define DEFLATE_HEAP_SIZE (2 * DEFLATE_L_CODES + 1)
#define DEFLATE_MAX_BITS 15
#define DEFLATE_MAX_BL_BITS 7
#define DEFLATE_MAX_MATCH 258
#define DEFLATE_BLOCK_TOKENS 32767 /* zlib's lit_bufsize - 1 at memLevel 9 */
#define DEFLATE_HEADER_WORDS 144   /* a dynamic block's header: at most 4498 bits */
#define DEFLATE_STATIC 1
#define DEFLATE_DYNAMIC 2
#define DEFLATE_STORED 0 /* zlib might store it: the host compresses the frame */
#define DEFLATE_BLOCK_BYTES 2920 /* sizeof(deflate_block), a block's scratch */

typedef struct {
    unsigned short fc; /* zlib's Freq, then Code (a union in trees.c) */
    unsigned short dl; /* zlib's Dad, then Len */
} deflate_ct;

// zlib's per-block tree state of trees.c, where one thread builds a block's trees (in shared
// memory on the GPU: every step reads and writes it).
typedef struct {
    deflate_ct ltree[DEFLATE_HEAP_SIZE];
    deflate_ct dtree[2 * DEFLATE_D_CODES + 1];
    deflate_ct bltree[2 * DEFLATE_BL_CODES + 1];
    short heap[2 * DEFLATE_L_CODES + 1];
    unsigned char depth[2 * DEFLATE_L_CODES + 1];
    unsigned short bl_count[DEFLATE_MAX_BITS + 1];
    unsigned short next_code[DEFLATE_MAX_BITS + 1]; /* gen_codes' (here: no stack) */
    int heap_len, heap_max;
    int l_max_code, d_max_code;
    unsigned long long opt_len, static_len; /* zlib's ulg: 64 bits, wrapping as it does */
} deflate_trees;

// One block: its counts, the codes its tokens are sent with, its header, where it goes.
typedef struct {
    unsigned int lfreq[DEFLATE_L_CODES];  /* literal/length counts, 1 for the end of block */
    unsigned int matches;                 /* distance code 0's count: every match */
    deflate_ct lcode[DEFLATE_L_CODES];    /* Code in fc, Len in dl */
    deflate_ct dcode;                     /* distance 1's */
    long long first_byte, stored_len;     /* the bytes the block's tokens cover */
    long long body_bits;                  /* its tokens' codes, without end of block */
    long long start_bit;                  /* where the block's 3 header bits go */
    long long first_token_bits;           /* what a token's bit prefix is offset by */
    int method;                           /* DEFLATE_STATIC, _DYNAMIC or _STORED */
    int header_bits;                      /* the 3 bits and, dynamic, the trees */
    unsigned int header[DEFLATE_HEADER_WORDS];
} deflate_block;

#ifdef __cplusplus
static_assert(sizeof(deflate_block) == DEFLATE_BLOCK_BYTES,
              "edgecli.edges.variants.DEFLATE_BLOCK_BYTES");
#endif

// ---- deflate's constants, as functions (no tables to place in device memory) --------------

DEFLATE_FN int deflate_extra_lbits(int code) { /* of length code 0..28 */
    return (code < 8 || code == 28) ? 0 : (code - 4) >> 2;
}

DEFLATE_FN int deflate_base_length(int code) { /* match length - 3 at the code's start */
    if (code < 8) return code;
    if (code == 28) return 0;
    return (4 + (code & 3)) << ((code - 4) >> 2);
}

DEFLATE_FN int deflate_length_code(int lc) { /* zlib's _length_code[match length - 3] */
    if (lc < 8) return lc;
    if (lc == 255) return 28;
    int e = 0;
    while ((lc >> (e + 3)) != 0) e++; /* e = floor(log2(lc)) - 2: the extra bits */
    return 4 * e + 4 + ((lc >> e) & 3);
}

DEFLATE_FN int deflate_extra_dbits(int code) { return code < 4 ? 0 : (code - 2) >> 1; }

DEFLATE_FN int deflate_extra_blbits(int code) {
    return code == 16 ? 2 : code == 17 ? 3 : code == 18 ? 7 : 0;
}

DEFLATE_FN int deflate_bl_order(int rank) { /* 16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, ... */
    return (unsigned char)"\x10\x11\x12\x00\x08\x07\x09\x06\x0a\x05\x0b\x04\x0c\x03\x0d\x02\x0e\x01\x0f"[rank];
}

DEFLATE_FN unsigned deflate_reverse(unsigned code, int len) { /* zlib's bi_reverse */
    unsigned res = 0;
    do {
        res |= code & 1;
        code >>= 1, res <<= 1;
    } while (--len > 0);
    return res >> 1;
}

DEFLATE_FN int deflate_static_llen(int n) {
    return n <= 143 ? 8 : n <= 255 ? 9 : n <= 279 ? 7 : 8;
}

DEFLATE_FN unsigned deflate_static_lcode(int n) { /* static_ltree[n].Code */
    unsigned code = n <= 143 ? 0x30 + n : n <= 255 ? 0x190 + (n - 144) : n <= 279 ? n - 256
                                                                                 : 0xc0 + (n - 280);
    return deflate_reverse(code, deflate_static_llen(n));
}

// ---- a run's tokens --------------------------------------------------------------------------

// The token after a run's first (its literal, the run's byte), with ``*rest`` bytes of the run
// still to go: a match of 258 while 3 or more are left (the last match takes what is left),
// then literals. Returns 0 for a literal, else the match length; *rest shrinks by what it covers.
DEFLATE_FN int deflate_run_next(long long* rest) {
    int match = *rest >= 3 ? (*rest >= DEFLATE_MAX_MATCH ? DEFLATE_MAX_MATCH : (int)*rest) : 0;
    *rest -= match ? match : 1;
    return match;
}

// ---- bits ------------------------------------------------------------------------------------

// OR ``len`` (<= 32) bits of ``value`` into the stream at bit ``pos`` of ``words`` (zeroed
// first), least significant bit first, as zlib's send_bits() sends them.
DEFLATE_FN void deflate_put(unsigned int* words, long long pos, unsigned long long value,
                            int len) {
    if (len == 0) return;
    long long w = pos >> 5;
    int shift = (int)(pos & 31);
    unsigned long long v = (value & ((len == 32) ? 0xffffffffull : ((1ull << len) - 1)))
                           << shift;
#ifdef DEFLATE_HOST
    words[w] |= (unsigned int)v;
    if (shift + len > 32) words[w + 1] |= (unsigned int)(v >> 32);
#else
    atomicOr(words + w, (unsigned int)v);
    if (shift + len > 32) atomicOr(words + w + 1, (unsigned int)(v >> 32));
#endif
}

// The block's own header buffer (one thread writes it): plain ORs.
DEFLATE_FN void deflate_header_bits(deflate_block* s, unsigned value, int len) {
    long long pos = s->header_bits;
    int shift = (int)(pos & 31);
    unsigned long long v = (unsigned long long)(value & ((1u << len) - 1)) << shift;
    s->header[pos >> 5] |= (unsigned int)v;
    if (shift + len > 32) s->header[(pos >> 5) + 1] |= (unsigned int)(v >> 32);
    s->header_bits += len;
}

// ---- trees.c -------------------------------------------------------------------------------

#define DEFLATE_SMALLER(tree, n, m, depth) \
    (tree[n].fc < tree[m].fc || (tree[n].fc == tree[m].fc && depth[n] <= depth[m]))

DEFLATE_FN void deflate_pqdownheap(deflate_trees* s, deflate_ct* tree, int k) {
    int v = s->heap[k];
    int j = k << 1;
    while (j <= s->heap_len) {
        if (j < s->heap_len && DEFLATE_SMALLER(tree, s->heap[j + 1], s->heap[j], s->depth)) j++;
        if (DEFLATE_SMALLER(tree, v, s->heap[j], s->depth)) break;
        s->heap[k] = s->heap[j];
        k = j;
        j <<= 1;
    }
    s->heap[k] = v;
}

// Which tree: 0 literal/length, 1 distance, 2 bit length (trees.c's static_tree_desc).
DEFLATE_FN int deflate_elems(int which) {
    return which == 0 ? DEFLATE_L_CODES : which == 1 ? DEFLATE_D_CODES : DEFLATE_BL_CODES;
}

DEFLATE_FN int deflate_extra(int which, int n) { /* extra bits of element n, 0 for none */
    if (which == 0) return n > DEFLATE_LITERALS ? deflate_extra_lbits(n - DEFLATE_LITERALS - 1) : 0;
    return which == 1 ? deflate_extra_dbits(n) : deflate_extra_blbits(n);
}

DEFLATE_FN int deflate_static_len(int which, int n) { return which == 0 ? deflate_static_llen(n) : 5; }

DEFLATE_FN void deflate_gen_bitlen(deflate_trees* s, deflate_ct* tree, int which, int max_code) {
    int max_length = which == 2 ? DEFLATE_MAX_BL_BITS : DEFLATE_MAX_BITS;
    int h, n, m, bits, xbits, overflow = 0;
    unsigned short f;
    for (bits = 0; bits <= DEFLATE_MAX_BITS; bits++) s->bl_count[bits] = 0;
    tree[s->heap[s->heap_max]].dl = 0; /* root of the heap */
    for (h = s->heap_max + 1; h < DEFLATE_HEAP_SIZE; h++) {
        n = s->heap[h];
        bits = tree[tree[n].dl].dl + 1;
        if (bits > max_length) bits = max_length, overflow++;
        tree[n].dl = (unsigned short)bits;
        if (n > max_code) continue; /* not a leaf node */
        s->bl_count[bits]++;
        xbits = deflate_extra(which, n);
        f = tree[n].fc;
        s->opt_len += (unsigned long long)f * (unsigned)(bits + xbits);
        if (which != 2)
            s->static_len += (unsigned long long)f * (unsigned)(deflate_static_len(which, n) + xbits);
    }
    if (overflow == 0) return;
    do {
        bits = max_length - 1;
        while (s->bl_count[bits] == 0) bits--;
        s->bl_count[bits]--;
        s->bl_count[bits + 1] += 2;
        s->bl_count[max_length]--;
        overflow -= 2;
    } while (overflow > 0);
    for (bits = max_length; bits != 0; bits--) {
        n = s->bl_count[bits];
        while (n != 0) {
            m = s->heap[--h];
            if (m > max_code) continue;
            if ((unsigned)tree[m].dl != (unsigned)bits) {
                s->opt_len += ((unsigned long long)bits - tree[m].dl) * tree[m].fc;
                tree[m].dl = (unsigned short)bits;
            }
            n--;
        }
    }
}

DEFLATE_FN void deflate_gen_codes(deflate_ct* tree, int max_code, const unsigned short* bl_count,
                                  unsigned short* next_code) {
    unsigned code = 0;
    int bits, n;
    for (bits = 1; bits <= DEFLATE_MAX_BITS; bits++) {
        code = (code + bl_count[bits - 1]) << 1;
        next_code[bits] = (unsigned short)code;
    }
    for (n = 0; n <= max_code; n++) {
        int len = tree[n].dl;
        if (len == 0) continue;
        tree[n].fc = (unsigned short)deflate_reverse(next_code[len]++, len);
    }
}

DEFLATE_FN int deflate_build_tree(deflate_trees* s, deflate_ct* tree, int which) {
    int elems = deflate_elems(which);
    int n, m, max_code = -1, node;
    s->heap_len = 0, s->heap_max = DEFLATE_HEAP_SIZE;
    for (n = 0; n < elems; n++) {
        if (tree[n].fc != 0) {
            s->heap[++(s->heap_len)] = max_code = n;
            s->depth[n] = 0;
        } else {
            tree[n].dl = 0;
        }
    }
    while (s->heap_len < 2) {
        node = s->heap[++(s->heap_len)] = (max_code < 2 ? ++max_code : 0);
        tree[node].fc = 1;
        s->depth[node] = 0;
        s->opt_len--;
        if (which != 2) s->static_len -= deflate_static_len(which, node);
    }
    for (n = s->heap_len / 2; n >= 1; n--) deflate_pqdownheap(s, tree, n);
    node = elems;
    do {
        n = s->heap[1]; /* pqremove */
        s->heap[1] = s->heap[s->heap_len--];
        deflate_pqdownheap(s, tree, 1);
        m = s->heap[1];
        s->heap[--(s->heap_max)] = n;
        s->heap[--(s->heap_max)] = m;
        tree[node].fc = (unsigned short)(tree[n].fc + tree[m].fc);
        s->depth[node] = (unsigned char)((s->depth[n] >= s->depth[m] ? s->depth[n] : s->depth[m]) + 1);
        tree[n].dl = tree[m].dl = (unsigned short)node;
        s->heap[1] = node++;
        deflate_pqdownheap(s, tree, 1);
    } while (s->heap_len >= 2);
    s->heap[--(s->heap_max)] = s->heap[1];
    deflate_gen_bitlen(s, tree, which, max_code);
    deflate_gen_codes(tree, max_code, s->bl_count, s->next_code);
    return max_code;
}

// One bit length code of a tree's description, with its extra bits: counted (zlib's
// scan_tree, ``send`` 0) or sent (send_tree, ``send`` 1).
DEFLATE_FN void deflate_length_symbol(deflate_trees* w, deflate_block* s, int code, int extra,
                                      int extra_bits, int send) {
    if (!send) {
        w->bltree[code].fc++;
        return;
    }
    deflate_header_bits(s, w->bltree[code].fc, w->bltree[code].dl);
    if (extra_bits) deflate_header_bits(s, extra, extra_bits);
}

// zlib's scan_tree (send 0: the bit length codes' counts) and send_tree (send 1: the codes),
// which walk a tree's code lengths alike.
DEFLATE_FN void deflate_walk_tree(deflate_trees* w, deflate_block* s, deflate_ct* tree, int max_code,
                                  int send) {
    int n, prevlen = -1, curlen, nextlen = tree[0].dl, count = 0, max_count = 7, min_count = 4;
    if (nextlen == 0) max_count = 138, min_count = 3;
    if (!send) tree[max_code + 1].dl = (unsigned short)0xffff; /* guard */
    for (n = 0; n <= max_code; n++) {
        curlen = nextlen;
        nextlen = tree[n + 1].dl;
        if (++count < max_count && curlen == nextlen) {
            continue;
        } else if (count < min_count) {
            do {
                deflate_length_symbol(w, s, curlen, 0, 0, send);
            } while (--count != 0);
        } else if (curlen != 0) {
            if (curlen != prevlen) {
                deflate_length_symbol(w, s, curlen, 0, 0, send);
                count--;
            }
            deflate_length_symbol(w, s, 16, count - 3, 2, send);
        } else if (count <= 10) {
            deflate_length_symbol(w, s, 17, count - 3, 3, send);
        } else {
            deflate_length_symbol(w, s, 18, count - 11, 7, send);
        }
        count = 0;
        prevlen = curlen;
        if (nextlen == 0) {
            max_count = 138, min_count = 3;
        } else if (curlen == nextlen) {
            max_count = 6, min_count = 3;
        } else {
            max_count = 7, min_count = 4;
        }
    }
}

// Before: s->lfreq and s->matches hold the block's counts (lfreq[256] = 1, the end of block),
// s->stored_len its bytes. After: s->method, and unless DEFLATE_STORED, s->lcode / s->dcode
// hold the codes the tokens are sent with, s->header and s->header_bits the block's header,
// s->body_bits its tokens' bits. ``w``: the trees' workspace, zlib's _tr_flush_block() on it.
DEFLATE_FN void deflate_plan_block(deflate_trees* w, deflate_block* s, int last) {
    int n;
    for (n = 0; n < DEFLATE_HEAP_SIZE; n++) w->ltree[n].fc = w->ltree[n].dl = 0;
    for (n = 0; n < 2 * DEFLATE_D_CODES + 1; n++) w->dtree[n].fc = w->dtree[n].dl = 0;
    for (n = 0; n < 2 * DEFLATE_BL_CODES + 1; n++) w->bltree[n].fc = w->bltree[n].dl = 0;
    for (n = 0; n < DEFLATE_L_CODES; n++) w->ltree[n].fc = (unsigned short)s->lfreq[n];
    w->dtree[0].fc = (unsigned short)s->matches;
    w->opt_len = w->static_len = 0;
    w->l_max_code = deflate_build_tree(w, w->ltree, 0);
    w->d_max_code = deflate_build_tree(w, w->dtree, 1);
    deflate_walk_tree(w, s, w->ltree, w->l_max_code, 0); /* build_bl_tree */
    deflate_walk_tree(w, s, w->dtree, w->d_max_code, 0);
    deflate_build_tree(w, w->bltree, 2);
    int max_blindex;
    for (max_blindex = DEFLATE_BL_CODES - 1; max_blindex >= 3; max_blindex--)
        if (w->bltree[deflate_bl_order(max_blindex)].dl != 0) break;
    w->opt_len += 3 * ((unsigned long long)max_blindex + 1) + 5 + 5 + 4;
    unsigned long long opt_lenb = (w->opt_len + 3 + 7) >> 3;
    unsigned long long static_lenb = (w->static_len + 3 + 7) >> 3;
    if (static_lenb <= opt_lenb) opt_lenb = static_lenb;
    for (n = 0; n < DEFLATE_HEADER_WORDS; n++) s->header[n] = 0;
    s->header_bits = 0;
    if ((unsigned long long)s->stored_len + 4 <= opt_lenb) {
        s->method = DEFLATE_STORED;
        return;
    }
    if (static_lenb == opt_lenb) {
        s->method = DEFLATE_STATIC;
        deflate_header_bits(s, (DEFLATE_STATIC << 1) + last, 3);
        for (n = 0; n < DEFLATE_L_CODES; n++) {
            s->lcode[n].fc = (unsigned short)deflate_static_lcode(n);
            s->lcode[n].dl = (unsigned short)deflate_static_llen(n);
        }
        s->dcode.fc = 0, s->dcode.dl = 5; /* static_dtree[0]: code 0 reversed */
    } else {
        s->method = DEFLATE_DYNAMIC;
        deflate_header_bits(s, (DEFLATE_DYNAMIC << 1) + last, 3);
        int lcodes = w->l_max_code + 1, dcodes = w->d_max_code + 1, blcodes = max_blindex + 1;
        deflate_header_bits(s, lcodes - 257, 5);
        deflate_header_bits(s, dcodes - 1, 5);
        deflate_header_bits(s, blcodes - 4, 4);
        for (int rank = 0; rank < blcodes; rank++)
            deflate_header_bits(s, w->bltree[deflate_bl_order(rank)].dl, 3);
        deflate_walk_tree(w, s, w->ltree, lcodes - 1, 1);
        deflate_walk_tree(w, s, w->dtree, dcodes - 1, 1);
        for (n = 0; n < DEFLATE_L_CODES; n++) s->lcode[n] = w->ltree[n];
        s->dcode = w->dtree[0];
    }
    long long bits = (long long)s->matches * s->dcode.dl;
    for (n = 0; n < DEFLATE_L_CODES; n++)
        if (n != DEFLATE_END_BLOCK)
            bits += (long long)s->lfreq[n] * (s->lcode[n].dl + deflate_extra(0, n));
    s->body_bits = bits;
}

// A token's code: literal ``byte`` (match == 0) or a match of ``match`` bytes at distance 1,
// its bits (at most 15 + 5 + 15) in *low and *high (bit 32 on), their count returned.
DEFLATE_FN int deflate_token_code(const deflate_block* s, int match, int byte,
                                  unsigned long long* code) {
    if (match == 0) {
        *code = s->lcode[byte].fc;
        return s->lcode[byte].dl;
    }
    int lc = match - 3, c = deflate_length_code(lc);
    const deflate_ct* l = &s->lcode[c + DEFLATE_LITERALS + 1];
    int extra = deflate_extra_lbits(c), len = l->dl;
    unsigned long long bits = l->fc;
    if (extra) bits |= (unsigned long long)(lc - deflate_base_length(c)) << len, len += extra;
    bits |= (unsigned long long)s->dcode.fc << len; /* distance 1: code 0, no extra bits */
    *code = bits;
    return len + s->dcode.dl;
}

DEFLATE_FN int deflate_token_symbol(int match, int byte) {
    return match == 0 ? byte : deflate_length_code(match - 3) + DEFLATE_LITERALS + 1;
}

// Adler-32 of bytes [first, end) of a stream of n: (sum of b, sum of (n - i) b), not reduced.
DEFLATE_FN void deflate_adler_part(const unsigned char* bytes, long long first, long long end,
                                   long long n, unsigned long long* a, unsigned long long* b) {
    unsigned long long sa = 0, sb = 0;
    for (long long i = first; i < end; i++) {
        sa += bytes[i];
        sb += (unsigned long long)(n - i) % 65521u * bytes[i];
        if ((i & 4095) == 4095) sa %= 65521u, sb %= 65521u;
    }
    *a = sa % 65521u;
    *b = sb % 65521u;
}

DEFLATE_FN long long deflate_blocks_for(long long tokens) { return tokens / DEFLATE_BLOCK_TOKENS + 1; }

#ifdef DEFLATE_HOST
// ---- the serial reference (host only) ------------------------------------------------------

// The bound on a frame's zlib stream of n bytes (edgecli.edges.variants.deflate_out_bytes): 2
// header bytes, at most deflate_blocks_for(n) blocks each coded shorter than stored
// (stored_len + 4 bytes), the Adler-32; rounded up to whole words.
long long deflate_out_bytes(long long n) { return ((n + 4 * deflate_blocks_for(n) + 8) + 3) / 4 * 4; }

long long deflate_block_bytes(void) { return (long long)sizeof(deflate_block); }

// The zlib stream of in[0..n) into words (deflate_out_bytes(n) bytes, any contents), with
// blocks[deflate_blocks_for(n)] as scratch: its length, or -1 where zlib might store a block.
long long deflate_serial(const unsigned char* in, long long n, unsigned int* words,
                         deflate_block* blocks) {
    long long tokens = 0, i, a, rest;
    memset(words, 0, (size_t)deflate_out_bytes(n));
    for (a = 0; a < n; a = i) { /* count */
        for (i = a + 1; i < n && in[i] == in[a]; i++) {}
        for (tokens++, rest = i - a - 1; rest > 0; tokens++) deflate_run_next(&rest);
    }
    long long nb = deflate_blocks_for(tokens), k = 0, at = 0;
    for (long long b = 0; b < nb; b++) {
        memset(blocks[b].lfreq, 0, sizeof blocks[b].lfreq);
        blocks[b].lfreq[DEFLATE_END_BLOCK] = 1;
        blocks[b].matches = 0;
        blocks[b].first_byte = n;
    }
    for (a = 0; a < n; a = i) { /* frequencies, blocks' first bytes */
        for (i = a + 1; i < n && in[i] == in[a]; i++) {}
        int match = 0;
        for (rest = i - a - 1;; match = deflate_run_next(&rest)) {
            deflate_block* s = &blocks[k / DEFLATE_BLOCK_TOKENS];
            if (k++ % DEFLATE_BLOCK_TOKENS == 0) s->first_byte = at;
            s->lfreq[deflate_token_symbol(match, in[a])]++;
            s->matches += match != 0;
            at += match ? match : 1;
            if (rest == 0) break;
        }
    }
    long long pos = 16;
    deflate_trees trees;
    deflate_put(words, 0, 0x0178, 16); /* 0x78 0x01: deflate, 32K window, level flags 0 (Z_RLE) */
    for (long long b = 0; b < nb; b++) {
        deflate_block* s = &blocks[b];
        s->stored_len = (b + 1 < nb ? blocks[b + 1].first_byte : n) - s->first_byte;
        deflate_plan_block(&trees, s, b == nb - 1);
        if (s->method == DEFLATE_STORED) return -1;
        s->start_bit = pos;
        pos += s->header_bits + s->body_bits + s->lcode[DEFLATE_END_BLOCK].dl;
    }
    k = 0;
    long long bit = 0;
    for (a = 0; a < n; a = i) { /* emit */
        for (i = a + 1; i < n && in[i] == in[a]; i++) {}
        int match = 0;
        for (rest = i - a - 1;; match = deflate_run_next(&rest)) {
            deflate_block* s = &blocks[k / DEFLATE_BLOCK_TOKENS];
            unsigned long long code;
            if (k++ % DEFLATE_BLOCK_TOKENS == 0) bit = s->start_bit + s->header_bits;
            int len = deflate_token_code(s, match, in[a], &code);
            deflate_put(words, bit, code, len < 32 ? len : 32);
            if (len > 32) deflate_put(words, bit + 32, code >> 32, len - 32);
            bit += len;
            if (rest == 0) break;
        }
    }
    for (long long b = 0; b < nb; b++) {
        deflate_block* s = &blocks[b];
        for (int w = 0; w * 32 < s->header_bits; w++) {
            int len = s->header_bits - 32 * w;
            deflate_put(words, s->start_bit + 32 * w, s->header[w], len < 32 ? len : 32);
        }
        const deflate_ct* end = &s->lcode[DEFLATE_END_BLOCK];
        deflate_put(words, s->start_bit + s->header_bits + s->body_bits, end->fc, end->dl);
    }
    unsigned long long sa, sb;
    deflate_adler_part(in, 0, n, n, &sa, &sb);
    unsigned long long adler = (((sb + (unsigned long long)n) % 65521u) << 16) | ((sa + 1) % 65521u);
    long long bytes = (pos + 7) / 8;
    unsigned char* out = (unsigned char*)words;
    for (int q = 0; q < 4; q++) out[bytes + q] = (unsigned char)(adler >> (24 - 8 * q));
    return bytes + 4;
}
#endif

#ifndef DEFLATE_HOST
// ---- the kernel ------------------------------------------------------------------------------

#define DEFLATE_THREADS 512
#define DEFLATE_WARPS (DEFLATE_THREADS / 32)
#define DEFLATE_GROUP 16   /* blocks whose histograms share memory at once */
#define DEFLATE_BUILDERS 8 /* threads building blocks' trees at once, each in shared memory */

// An exclusive prefix sum over the block's threads, and the total; every thread must call it.
__device__ static long long deflate_scan(long long v, long long* total, long long* sums) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    long long x = v;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        long long y = __shfl_up_sync(0xffffffffu, x, d);
        if (lane >= d) x += y;
    }
    if (lane == 31) sums[warp] = x;
    __syncthreads();
    if (warp == 0) {
        long long w = lane < DEFLATE_WARPS ? sums[lane] : 0;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            long long y = __shfl_up_sync(0xffffffffu, w, d);
            if (lane >= d) w += y;
        }
        if (lane < DEFLATE_WARPS) sums[lane] = w; /* inclusive, by warp */
    }
    __syncthreads();
    long long before = (warp ? sums[warp - 1] : 0) + x - v;
    *total = sums[DEFLATE_WARPS - 1];
    __syncthreads(); /* sums is free again */
    return before;
}

// Calls visit(match, byte, first_byte) for each token of the runs that start in [first, end)
// (first: the chunk's first run start), whose last may run on to next_start: the literal, then
// deflate_run_next()'s tokens.
template <typename Visit>
__device__ static void deflate_walk(const unsigned char* bytes, long long first, long long end,
                                    long long next_start, Visit visit) {
    long long i = first;
    while (i < end) {
        const unsigned char v = bytes[i];
        long long j = i + 1;
        while (j < end && bytes[j] == v) j++;
        long long at = i, rest = (j < end ? j : next_start) - i - 1;
        visit(0, v, at++);
        while (rest > 0) {
            const int match = deflate_run_next(&rest);
            visit(match, v, at);
            at += match ? match : 1;
        }
        i = j;
    }
}

// A thread's place in the frame's tokens: token k, in block b, whose first token ``k`` is when
// ``starts`` is set; step() moves on one token without a division.
struct deflate_cursor {
    long long k, b, next;
    __device__ explicit deflate_cursor(long long first)
        : k(first), b(first / DEFLATE_BLOCK_TOKENS), next((b + 1) * DEFLATE_BLOCK_TOKENS) {}
    __device__ bool starts() const { return k == next - DEFLATE_BLOCK_TOKENS; }
    __device__ void step() {
        if (++k == next) b++, next += DEFLATE_BLOCK_TOKENS;
    }
};

// rows:   n_frames x frame_bytes, each frame's 1-bit PNG scanlines (filter bytes included).
// out:    n_frames x out_words 32-bit words; frame f's zlib stream from out + f * out_words.
// sizes:  n_frames: the stream's length in bytes, or -1 where the host must compress it.
// blocks: n_frames x blocks_per_frame (deflate_blocks_for(frame_bytes)) scratch blocks.
// grid:   n_frames blocks of DEFLATE_THREADS threads.
extern "C" __global__ void __launch_bounds__(DEFLATE_THREADS, 1)
deflate_rle(const unsigned char* __restrict__ rows, long long frame_bytes,
            unsigned int* __restrict__ out, long long out_words, long long* __restrict__ sizes,
            deflate_block* __restrict__ blocks, int blocks_per_frame) {
    __shared__ long long sums[DEFLATE_WARPS];
    __shared__ long long starts[DEFLATE_THREADS];
    __shared__ union { /* phase 2's histograms, then phase 3's trees */
        unsigned int hist[DEFLATE_GROUP][DEFLATE_L_CODES + 1]; /* + matches */
        deflate_trees trees[DEFLATE_BUILDERS];
    } shared;
    unsigned int(*hist)[DEFLATE_L_CODES + 1] = shared.hist;
    __shared__ int stored;
    const int t = threadIdx.x;
    const long long n = frame_bytes;
    const unsigned char* bytes = rows + (long long)blockIdx.x * n;
    unsigned int* words = out + (long long)blockIdx.x * out_words;
    deflate_block* frame_blocks = blocks + (long long)blockIdx.x * blocks_per_frame;

    // 0. zeros; Adler-32 parts; the chunk's first run start
    for (long long w = t; w < out_words; w += DEFLATE_THREADS) words[w] = 0u;
    const long long chunk = (n + DEFLATE_THREADS - 1) / DEFLATE_THREADS;
    const long long c0 = min(n, (long long)t * chunk), c1 = min(n, c0 + chunk);
    unsigned long long adler_a, adler_b;
    deflate_adler_part(bytes, c0, c1, n, &adler_a, &adler_b);
    long long first = c1;
    for (long long i = c0; i < c1; i++) {
        if (i == 0 || bytes[i] != bytes[i - 1]) {
            first = i;
            break;
        }
    }
    starts[t] = first < c1 ? first : n;
    if (t == 0) stored = 0;
    __syncthreads();
    for (int d = 1; d < DEFLATE_THREADS; d <<= 1) { /* suffix minimum */
        long long other = t + d < DEFLATE_THREADS ? starts[t + d] : n;
        __syncthreads();
        starts[t] = min(starts[t], other);
        __syncthreads();
    }
    const long long next_start = t + 1 < DEFLATE_THREADS ? starts[t + 1] : n;
    long long sum_a, sum_b;
    deflate_scan((long long)adler_a, &sum_a, sums);
    deflate_scan((long long)adler_b, &sum_b, sums);

    // 1. tokens
    long long count = 0;
    deflate_walk(bytes, first, c1, next_start, [&](int, int, long long) { count++; });
    long long tokens;
    const long long first_token = deflate_scan(count, &tokens, sums);
    const long long nb = deflate_blocks_for(tokens);
    if (nb > blocks_per_frame) { /* cannot happen: tokens <= bytes */
        if (t == 0) sizes[blockIdx.x] = -1;
        return;
    }
    for (long long b = t; b < nb; b += DEFLATE_THREADS) frame_blocks[b].first_byte = n;
    __syncthreads();

    // 2. frequencies, DEFLATE_GROUP blocks at a time; each block's first byte
    for (long long g = 0; g < nb; g += DEFLATE_GROUP) {
        for (int i = t; i < DEFLATE_GROUP * (DEFLATE_L_CODES + 1); i += DEFLATE_THREADS)
            (&hist[0][0])[i] = 0u;
        __syncthreads();
        deflate_cursor token(first_token);
        deflate_walk(bytes, first, c1, next_start, [&](int match, int byte, long long at) {
            const long long b = token.b;
            if (b >= g && b < g + DEFLATE_GROUP) {
                if (token.starts()) frame_blocks[b].first_byte = at;
                atomicAdd(&hist[b - g][deflate_token_symbol(match, byte)], 1u);
                if (match) atomicAdd(&hist[b - g][DEFLATE_L_CODES], 1u);
            }
            token.step();
        });
        __syncthreads();
        const long long in_group = min((long long)DEFLATE_GROUP, nb - g);
        for (long long i = t; i < in_group * (DEFLATE_L_CODES + 1); i += DEFLATE_THREADS) {
            const long long b = i / (DEFLATE_L_CODES + 1);
            const int symbol = (int)(i % (DEFLATE_L_CODES + 1));
            deflate_block* s = &frame_blocks[g + b];
            if (symbol == DEFLATE_L_CODES)
                s->matches = hist[b][symbol];
            else
                s->lfreq[symbol] = symbol == DEFLATE_END_BLOCK ? 1u : hist[b][symbol];
        }
        __syncthreads();
    }

    // 3. each block's trees and header, one thread a block (each in a warp of its own)
    if ((t & 31) == 0 && (t >> 5) < DEFLATE_BUILDERS) {
        for (long long b = t >> 5; b < nb; b += DEFLATE_BUILDERS) {
            deflate_block* s = &frame_blocks[b];
            s->stored_len = (b + 1 < nb ? frame_blocks[b + 1].first_byte : n) - s->first_byte;
            deflate_plan_block(&shared.trees[t >> 5], s, b == nb - 1);
            if (s->method == DEFLATE_STORED) stored = 1;
        }
    }
    __syncthreads();
    if (stored) {
        if (t == 0) sizes[blockIdx.x] = -1;
        return;
    }
    __shared__ long long total_bits, body_total;
    if (t == 0) { /* where each block starts; first_token_bits: what a token's prefix is offset by */
        long long pos = 16, headers = 16, body = 0;
        for (long long b = 0; b < nb; b++) {
            deflate_block* s = &frame_blocks[b];
            s->start_bit = pos;
            headers += s->header_bits;
            s->first_token_bits = headers;
            headers += s->lcode[DEFLATE_END_BLOCK].dl;
            pos += s->header_bits + s->body_bits + s->lcode[DEFLATE_END_BLOCK].dl;
            body += s->body_bits;
        }
        total_bits = pos;
        body_total = body;
    }
    __syncthreads();

    // 4. each token's bit position
    long long bits = 0;
    deflate_cursor counted(first_token);
    deflate_walk(bytes, first, c1, next_start, [&](int match, int byte, long long) {
        unsigned long long code;
        bits += deflate_token_code(&frame_blocks[counted.b], match, byte, &code);
        counted.step();
    });
    long long all_bits;
    long long position = deflate_scan(bits, &all_bits, sums);
    if (all_bits != body_total) { /* the plan and the tokens disagree: let the host do it */
        if (t == 0) sizes[blockIdx.x] = -1;
        return;
    }

    // 5. the codes
    deflate_cursor sent(first_token);
    deflate_walk(bytes, first, c1, next_start, [&](int match, int byte, long long) {
        const deflate_block* s = &frame_blocks[sent.b];
        unsigned long long code;
        const int len = deflate_token_code(s, match, byte, &code);
        const long long pos = position + s->first_token_bits;
        deflate_put(words, pos, code, len < 32 ? len : 32);
        if (len > 32) deflate_put(words, pos + 32, code >> 32, len - 32);
        position += len;
        sent.step();
    });
    if ((t & 31) == 0) {
        for (long long b = t >> 5; b < nb; b += DEFLATE_WARPS) {
            const deflate_block* s = &frame_blocks[b];
            for (int w = 0; w * 32 < s->header_bits; w++) {
                const int len = s->header_bits - 32 * w;
                deflate_put(words, s->start_bit + 32 * w, s->header[w], len < 32 ? len : 32);
            }
            const deflate_ct* end = &s->lcode[DEFLATE_END_BLOCK];
            deflate_put(words, s->start_bit + s->header_bits + s->body_bits, end->fc, end->dl);
        }
    }
    if (t == 0) deflate_put(words, 0, 0x0178, 16);
    __syncthreads();
    if (t == 0) {
        const unsigned long long a = (1 + (unsigned long long)sum_a) % 65521u;
        const unsigned long long b = ((unsigned long long)(n % 65521) + sum_b) % 65521u;
        const unsigned long long adler = (b << 16) | a;
        const long long at = (total_bits + 7) / 8;
        for (int q = 0; q < 4; q++) deflate_put(words, 8 * (at + q), adler >> (24 - 8 * q), 8);
        sizes[blockIdx.x] = at + 4;
    }
}
#endif
