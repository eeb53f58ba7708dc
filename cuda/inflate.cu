// inflate.cu: a batch of zlib streams (RFC 1950 around RFC 1951 deflate) inflated on the GPU,
// each to exactly zlib's bytes or to a status saying why not. edgecli.decode.gpu.inflate
// compiles and launches it and names the statuses.
//
// Kernel inflate_zlib: one block of INFLATE_THREADS (two warps) a stream; stream i is
// src[src_start[i] .. src_start[i + 1]) and must inflate to exactly the bytes of
// dst[dst_start[i] .. dst_start[i + 1]); status[i] is INFLATE_OK or the first failure found.
//
// Why this shape. Inside a stream deflate is sequential: a Huffman code's length is known only
// once it is decoded, and a match copies bytes written just before it. The parallelism is across
// streams (a batch of hundreds of PNG frames), so a stream gets a small block and many blocks
// share an SM; within the block the one serial job, decoding symbols, is kept apart from
// everything that is not serial, as RAPIDS cuDF's gpuinflate.cu splits decoding from copying:
//   - warp 0 decodes. Its 32 lanes run the same decoding on the same data (the bit buffer and
//     every table read are warp-uniform, so this costs what one lane would), which lets the
//     whole warp fill a block's Huffman tables in parallel without handing state between
//     lanes. Symbols go into a queue in shared memory: literals, matches (length, distance),
//     stored runs (an input offset and length).
//   - warp 1 writes what the previous queue says, in order, a lane a byte: each step takes as
//     many whole literals and matches as fit in 32 bytes and read nothing written in the step
//     (PNG rows match bytes a row or more back, so most do); a longer or self-overlapping
//     match, or a stored run, goes 32 bytes a step on its own. A match reads its source from
//     the stream's own output, which warp 1 alone writes (a __syncwarp() between steps makes
//     each step's bytes visible to the next): a window in shared memory would cost 32 KB a
//     block, and shared memory is what bounds how many streams an SM holds at once.
//   The two queues alternate: in round r warp 0 fills queue r % 2 while warp 1 drains queue
//   (r - 1) % 2; one __syncthreads() a round hands them over.
// Huffman tables follow libdeflate's idea: one lookup of the next INFLATE_LITLEN_BITS bits
// resolves every shorter code and already says what the symbol means (a literal's byte, or two
// literals' where both codes fit, a length's base and extra bits); the rare longer codes are
// resolved canonically from the code counts (as zlib's puff.c does) instead of subtables,
// which keeps the tables small. Decoding runs unchecked (inflate_decode_fast) wherever the
// input, the output and the queue have room for what one pass can take, which is all of a
// stream but its ends; a checked loop does the ends and the rare symbols. Input is staged in a
// shared-memory ring that warp 0 refills at each round's start with coalesced loads; a read
// past the ring falls back to global memory, so the ring's size bounds speed only, never
// correctness. Adler-32 is made of sums over the bytes: each lane of warp 1 adds up the bytes
// it writes (and each times its position), the lanes' sums combine at the end, and the output
// is never read back.
//
// Untrusted input: every bit read is checked against the stream's end, or read only where
// more bits remain than a pass of the unchecked loop reads; every table is judged as zlib's
// inflate_table() judges it (over-subscribed codes are refused, incomplete ones too unless a
// single one-bit code, and always for the code-length code); every symbol, length and
// distance is checked before it is queued, so warp 1 only writes inside the stream's output.
// Each loop consumes input bits or emits output bytes, so no input makes a block run long.
// Where zlib's verdict depends on how its caller feeds it (libpng inflates row by row with
// the window its header names: a distance beyond that window, or output that ends early or goes
// on) the status says so, and the host decides with the CPU's own decoder.

#define INFLATE_THREADS 64
// Blocks (streams) an SM holds at once, which bounds the registers a thread may use: a stream
// waits on its own serial decoding most of the time, so the rate is the streams in flight.
// Set per architecture to as many as its compiler fits in registers without spilling (make
// kernel-check): Blackwell's compiler takes more registers for this code than Hopper's.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900
#define INFLATE_MIN_BLOCKS 14
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
#define INFLATE_MIN_BLOCKS 8
#else
#define INFLATE_MIN_BLOCKS 12
#endif
#define INFLATE_QUEUE 128 /* symbols a round */
#define INFLATE_RING_WORDS 512 /* 32-bit words of input staged in shared memory (2^k) */
#define INFLATE_LITLEN_BITS 10
#define INFLATE_DIST_BITS 8
#define INFLATE_CODELEN_BITS 7 /* every code-length code fits: no slow path */
#define INFLATE_MAX_BITS 15
#define INFLATE_MAX_LENS 320 /* 288 literal/length + 32 distance code lengths */

// Statuses: edgecli/decode/gpu/inflate.py gives each one's reason.
#define INFLATE_OK 0
#define INFLATE_TRUNCATED 1
#define INFLATE_HEADER_CHECK 2
#define INFLATE_HEADER_METHOD 3
#define INFLATE_HEADER_WINDOW 4
#define INFLATE_HEADER_DICTIONARY 5
#define INFLATE_BLOCK_TYPE 6
#define INFLATE_STORED_LENGTH 7
#define INFLATE_TOO_MANY_CODES 8
#define INFLATE_CODE_LENGTHS_SET 9
#define INFLATE_LENGTH_REPEAT 10
#define INFLATE_MISSING_END_OF_BLOCK 11
#define INFLATE_LITLEN_SET 12
#define INFLATE_DISTANCE_SET 13
#define INFLATE_LITLEN_CODE 14
#define INFLATE_DISTANCE_CODE 15
#define INFLATE_DISTANCE_TOO_FAR 16
#define INFLATE_ADLER 17
#define INFLATE_BAD_RANGE 18
// Where zlib's verdict depends on its caller: the host decides.
#define INFLATE_BEYOND_WINDOW 19
#define INFLATE_OUTPUT_LONG 20
#define INFLATE_OUTPUT_SHORT 21
#define INFLATE_TRAILING 22

// A table entry: bits 0-3 the code's length, 4-7 the extra bits that follow it, 8-9 its kind,
// 16-31 its value (a literal's byte, a length's or a distance's base, a code-length symbol).
// A code the table does not resolve has length 0 and kind INFLATE_INVALID, so the kind alone
// tells a literal the table resolves. A literal/length table's literal entry may hold the
// literal after it too, where both codes fit in the lookup's bits (libdeflate's and zlib-ng's
// trick): bits 4-7 its code's length (0: none), 24-31 its byte.
#define INFLATE_LITERAL 0
#define INFLATE_LENGTH 1 /* a length, or in the distance table a distance */
#define INFLATE_END 2
#define INFLATE_INVALID 3 /* literal/length 286-287, distance 30-31: in fixed codes only */

// The alphabet a table decodes, for what its entries mean.
#define INFLATE_ALPHABET_LITLEN 0
#define INFLATE_ALPHABET_DIST 1
#define INFLATE_ALPHABET_CODELEN 2

// A queue entry: the kind in bits 30-31 and the byte count below, then a 32-bit argument (a
// literal's byte, or two literals' bytes first one lowest, a match's distance, a stored run's
// offset in the stream).
#define INFLATE_OP_LITERAL 0u
#define INFLATE_OP_MATCH 1u
#define INFLATE_OP_STORED 2u

// Decoder states between symbols.
#define INFLATE_AT_HEADER 0
#define INFLATE_AT_BLOCK 1
#define INFLATE_IN_CODES 2
#define INFLATE_AT_TRAILER 3
#define INFLATE_DONE 4

#define INFLATE_ADLER_MOD 65521u

struct inflate_shared {
    unsigned litlen[1 << INFLATE_LITLEN_BITS];
    unsigned dist[1 << INFLATE_DIST_BITS];
    unsigned codelen[1 << INFLATE_CODELEN_BITS];
    unsigned queue[2][2 * INFLATE_QUEUE];  // two words an entry
    unsigned ring[INFLATE_RING_WORDS];  // input word w at w % INFLATE_RING_WORDS
    unsigned char lens[INFLATE_MAX_LENS];
    unsigned short codes[INFLATE_MAX_LENS];  // a table build's canonical code of each symbol
    unsigned short litlen_count[INFLATE_MAX_BITS + 1], dist_count[INFLATE_MAX_BITS + 1];
    unsigned short code_count[INFLATE_MAX_BITS + 1];  // the code-length code's
    unsigned short next_code[INFLATE_MAX_BITS + 1], next_index[INFLATE_MAX_BITS + 1];
    unsigned short litlen_sorted[288], dist_sorted[32], code_sorted[19];
    int queued[2];
    int ended[2];  // whether the round's queue is the stream's last (by the round's parity)
    int status;
    int built_ok;
    unsigned adler_expected;
};

// What a table entry for `symbol` of `alphabet` says, less its code length.
__device__ __forceinline__ static unsigned inflate_payload(int alphabet, unsigned symbol) {
    if (alphabet == INFLATE_ALPHABET_CODELEN) return symbol << 16;
    if (alphabet == INFLATE_ALPHABET_LITLEN) {
        if (symbol < 256) return (symbol << 16) | (INFLATE_LITERAL << 8);
        if (symbol == 256) return INFLATE_END << 8;
        if (symbol > 285) return INFLATE_INVALID << 8;
        const unsigned i = symbol - 257;  // lengths 3-10 one apiece, then 4 codes an extra bit
        if (i < 8) return ((3 + i) << 16) | (INFLATE_LENGTH << 8);
        if (i == 28) return (258u << 16) | (INFLATE_LENGTH << 8);
        const unsigned extra = (i - 4) / 4;
        return ((((4 + (i & 3)) << extra) + 3) << 16) | (INFLATE_LENGTH << 8) | (extra << 4);
    }
    if (symbol > 29) return INFLATE_INVALID << 8;
    if (symbol < 4) return ((symbol + 1) << 16) | (INFLATE_LENGTH << 8);
    const unsigned extra = (symbol - 2) / 2;  // distances 1-4 one apiece, then 2 codes a bit
    return ((((2 + (symbol & 1)) << extra) + 1) << 16) | (INFLATE_LENGTH << 8) | (extra << 4);
}

// Builds the `bits`-bit lookup `table` of the n code lengths in `lens`, and the counts and
// symbols in code order that resolve its longer codes (inflate_slow). Called by all of warp 0
// alike. False where zlib's inflate_table() refuses the lengths: over-subscribed, or incomplete
// other than by one one-bit code (the code-length code must be complete). No lengths at all are
// accepted, as zlib accepts them: every code is then invalid.
__device__ static bool inflate_build(inflate_shared& s, const unsigned char* lens, unsigned n,
                                     int alphabet, unsigned* table, int bits,
                                     unsigned short* count, unsigned short* sorted,
                                     unsigned lane) {
    if (lane == 0) {
        for (int len = 0; len <= INFLATE_MAX_BITS; ++len) count[len] = 0;
        for (unsigned symbol = 0; symbol < n; ++symbol) ++count[lens[symbol]];
        count[0] = 0;
        int left = 1, max = 0;
        for (int len = 1; len <= INFLATE_MAX_BITS; ++len) {
            left = 2 * left - count[len];
            if (count[len]) max = len;
            if (left < 0) break;
        }
        bool ok = left >= 0 &&
                  (max == 0 || left == 0 || (alphabet != INFLATE_ALPHABET_CODELEN && max == 1));
        if (ok) {
            unsigned code = 0, index = 0;
            for (int len = 1; len <= INFLATE_MAX_BITS; ++len) {
                code = (code + count[len - 1]) << 1;
                s.next_code[len] = (unsigned short)code;
                s.next_index[len] = (unsigned short)index;
                index += count[len];
            }
            for (unsigned symbol = 0; symbol < n; ++symbol) {
                const int len = lens[symbol];
                if (len == 0) continue;
                s.codes[symbol] = s.next_code[len]++;
                sorted[s.next_index[len]++] = (unsigned short)symbol;
            }
        }
        s.built_ok = ok;
    }
    __syncwarp();
    const bool ok = s.built_ok;
    if (ok) {
        const unsigned size = 1u << bits;
        for (unsigned i = lane; i < size; i += 32) table[i] = INFLATE_INVALID << 8;  // slow path
        __syncwarp();
        for (unsigned symbol = lane; symbol < n; symbol += 32) {
            const unsigned len = lens[symbol];
            if (len == 0 || len > unsigned(bits)) continue;
            const unsigned entry = inflate_payload(alphabet, symbol) | len;
            for (unsigned i = __brev(s.codes[symbol]) >> (32 - len); i < size; i += 1u << len)
                table[i] = entry;
        }
        if (alphabet == INFLATE_ALPHABET_LITLEN) {
            // A literal's entry takes in the literal its other bits begin with, where that code
            // fits in them: the entry of those bits (high bits 0) resolves it. Entries read here
            // may be taking in their own second literal, which changes none of the fields read.
            __syncwarp();
            for (unsigned i = lane; i < size; i += 32) {
                const unsigned first = table[i], first_len = first & 15;
                if ((first & (3 << 8)) != INFLATE_LITERAL << 8 || first_len >= unsigned(bits))
                    continue;
                const unsigned second = table[i >> first_len], second_len = second & 15;
                if ((second & (3 << 8)) != INFLATE_LITERAL << 8 ||
                    first_len + second_len > unsigned(bits))
                    continue;
                table[i] = first | (second_len << 4) | ((second >> 16) & 0xff) << 24;
            }
        }
    }
    __syncwarp();  // the table is read by every lane; built_ok is written by the next build
    return ok;
}

// A code longer than the table's bits (or none at all) decoded from the low bits of `bits` as
// zlib's puff.c decodes: canonically, from the counts. (symbol << 4) | length, or -1 where the
// bits are no code (an incomplete code's unused patterns).
__device__ __forceinline__ static int inflate_slow(unsigned long long bits,
                                                   const unsigned short* count,
                                                   const unsigned short* sorted) {
    int code = 0, first = 0, index = 0;
    for (int len = 1; len <= INFLATE_MAX_BITS; ++len) {
        code |= int((bits >> (len - 1)) & 1);
        const int here = count[len];
        if (code - here < first) return (int(sorted[index + (code - first)]) << 4) | len;
        index += here;
        first = (first + here) << 1;
        code <<= 1;
    }
    return -1;
}

// Warp 0's decoding state, the same in every lane. Input is read in aligned 32-bit words (the
// stream's bytes 4w to 4w + 3, zeros past its end), so a refill is one shift: the next word is
// fetched as the previous one enters bitbuf, and its latency stays off the decoding path.
struct inflate_decoder {
    const unsigned char* src;
    unsigned long long bitbuf;  // bits not yet consumed, the next one lowest
    unsigned bitcnt;            // how many bits bitbuf holds (input or zeros past its end)
    unsigned left;              // input bits not yet consumed: the stream's end
    unsigned wpos;              // the word that enters bitbuf next
    unsigned next;              // that word, already fetched
    unsigned in_len;            // bytes
    unsigned ring_begin;        // the ring holds words [ring_begin, ring_end)
    unsigned ring_end;
    unsigned out_pos;  // output bytes queued so far
    unsigned out_size;
    unsigned window;  // the header's window size
    int state;
    int status;
    bool last;
    bool fixed;  // the tables hold the fixed codes
};

// Word w of the input from global memory, zeros past the end.
__device__ static unsigned inflate_global_word(const unsigned char* src, unsigned len,
                                               unsigned w) {
    unsigned word = 0;
    for (unsigned i = 0; i < 4; ++i)
        if (4 * w + i < len) word |= unsigned(src[4 * w + i]) << (8 * i);
    return word;
}

// Word w of the input: from the ring, or where the ring does not hold it from global memory.
__device__ __forceinline__ static unsigned inflate_word(const inflate_shared& s,
                                                        const inflate_decoder& d, unsigned w) {
    if (w - d.ring_begin < d.ring_end - d.ring_begin)
        return s.ring[w & (INFLATE_RING_WORDS - 1)];
    return inflate_global_word(d.src, d.in_len, w);
}

// At least 33 bits in bitbuf: each read of up to 32 bits follows one of these.
__device__ __forceinline__ static void inflate_refill(const inflate_shared& s,
                                                      inflate_decoder& d) {
    if (d.bitcnt <= 32) {
        d.bitbuf |= (unsigned long long)d.next << d.bitcnt;
        d.bitcnt += 32;
        d.next = inflate_word(s, d, ++d.wpos);
    }
}

// Reading starts over at input byte `pos` (after a stored block).
__device__ static void inflate_restart(const inflate_shared& s, inflate_decoder& d,
                                       unsigned pos) {
    const unsigned skip = (pos & 3) * 8;
    d.wpos = pos / 4;
    d.bitbuf = inflate_word(s, d, d.wpos) >> skip;
    d.bitcnt = 32 - skip;
    d.next = inflate_word(s, d, ++d.wpos);
}

__device__ __forceinline__ static unsigned inflate_peek(const inflate_decoder& d, unsigned n) {
    return unsigned(d.bitbuf & ((1ull << n) - 1));
}

// Consumes n bits (at most 32, after a refill), or fails the stream as truncated where it has
// fewer left.
__device__ __forceinline__ static bool inflate_take(inflate_decoder& d, unsigned n) {
    if (n > d.left) {
        d.status = INFLATE_TRUNCATED;
        return false;
    }
    d.left -= n;
    d.bitbuf >>= n;
    d.bitcnt -= n;
    return true;
}

__device__ __forceinline__ static void inflate_fail(inflate_decoder& d, int status) {
    d.status = status;
}

// Decodes the next literal/length or distance code with `table` (its `bits`), the slow path
// for longer codes. The entry (its length in bits 0-3), of kind INFLATE_INVALID where the bits
// are no code.
__device__ __forceinline__ static unsigned inflate_decode(unsigned long long bitbuf,
                                                          const unsigned* table, int bits,
                                                          const unsigned short* count,
                                                          const unsigned short* sorted,
                                                          int alphabet) {
    const unsigned entry = table[unsigned(bitbuf) & ((1u << bits) - 1)];
    if (entry & 15) return entry;
    const int slow = inflate_slow(bitbuf, count, sorted);
    if (slow < 0) return INFLATE_INVALID << 8;
    return inflate_payload(alphabet, unsigned(slow) >> 4) | (unsigned(slow) & 15);
}

// The order the code-length code's lengths come in (RFC 1951 3.2.7).
__device__ __forceinline__ static unsigned inflate_codelen_order(unsigned i) {
    const char* order = "\x10\x11\x12\x00\x08\x07\x09\x06\x0a\x05\x0b\x04\x0c\x03\x0d\x02\x0e"
                        "\x01\x0f";
    return (unsigned char)order[i];
}

// The fixed codes' tables (RFC 1951 3.2.6), 286-287 and 30-31 included as zlib includes them.
__device__ static void inflate_fixed_tables(inflate_shared& s, unsigned lane) {
    for (unsigned i = lane; i < 320; i += 32)
        s.lens[i] = i < 144 ? 8 : i < 256 ? 9 : i < 280 ? 7 : i < 288 ? 8 : 5;
    __syncwarp();
    inflate_build(s, s.lens, 288, INFLATE_ALPHABET_LITLEN, s.litlen, INFLATE_LITLEN_BITS,
                  s.litlen_count, s.litlen_sorted, lane);
    inflate_build(s, s.lens + 288, 32, INFLATE_ALPHABET_DIST, s.dist, INFLATE_DIST_BITS,
                  s.dist_count, s.dist_sorted, lane);
}

// A dynamic block's header: the code-length code, then the literal/length and distance code
// lengths, and their tables. False (the status set) where zlib refuses it or it is cut short.
__device__ static bool inflate_dynamic_tables(inflate_shared& s, inflate_decoder& d,
                                              unsigned lane) {
    inflate_refill(s, d);
    const unsigned nlen = 257 + inflate_peek(d, 5);
    const unsigned ndist = 1 + ((d.bitbuf >> 5) & 31);
    const unsigned ncode = 4 + ((d.bitbuf >> 10) & 15);
    if (!inflate_take(d, 14)) return false;
    if (nlen > 286 || ndist > 30) {
        inflate_fail(d, INFLATE_TOO_MANY_CODES);
        return false;
    }
    for (unsigned i = 0; i < 19; ++i) {
        unsigned len = 0;
        if (i < ncode) {
            inflate_refill(s, d);
            len = inflate_peek(d, 3);
            if (!inflate_take(d, 3)) return false;
        }
        if (lane == 0) s.lens[inflate_codelen_order(i)] = (unsigned char)len;
    }
    __syncwarp();
    if (!inflate_build(s, s.lens, 19, INFLATE_ALPHABET_CODELEN, s.codelen,
                       INFLATE_CODELEN_BITS, s.code_count, s.code_sorted, lane)) {
        inflate_fail(d, INFLATE_CODE_LENGTHS_SET);
        return false;
    }
    const unsigned total = nlen + ndist;
    unsigned have = 0, previous = 0;
    while (have < total) {
        inflate_refill(s, d);
        const unsigned entry = s.codelen[inflate_peek(d, INFLATE_CODELEN_BITS)];
        if ((entry & 15) == 0) {  // no code-length code at all: zlib fails such a block too
            inflate_fail(d, INFLATE_CODE_LENGTHS_SET);
            return false;
        }
        if (!inflate_take(d, entry & 15)) return false;
        const unsigned symbol = entry >> 16;
        unsigned value = 0, repeat = 1;
        if (symbol < 16) {
            value = symbol;
        } else {
            const unsigned extra = symbol == 16 ? 2 : symbol == 17 ? 3 : 7;
            repeat = (symbol == 18 ? 11 : 3) + inflate_peek(d, extra);
            if (!inflate_take(d, extra)) return false;
            if (symbol == 16) {
                if (have == 0) {
                    inflate_fail(d, INFLATE_LENGTH_REPEAT);
                    return false;
                }
                value = previous;
            }
            if (have + repeat > total) {
                inflate_fail(d, INFLATE_LENGTH_REPEAT);
                return false;
            }
        }
        if (lane == 0)
            for (unsigned i = 0; i < repeat; ++i) s.lens[have + i] = (unsigned char)value;
        have += repeat;
        previous = value;
    }
    __syncwarp();
    if (s.lens[256] == 0) {
        inflate_fail(d, INFLATE_MISSING_END_OF_BLOCK);
        return false;
    }
    if (!inflate_build(s, s.lens, nlen, INFLATE_ALPHABET_LITLEN, s.litlen, INFLATE_LITLEN_BITS,
                       s.litlen_count, s.litlen_sorted, lane)) {
        inflate_fail(d, INFLATE_LITLEN_SET);
        return false;
    }
    if (!inflate_build(s, s.lens + nlen, ndist, INFLATE_ALPHABET_DIST, s.dist, INFLATE_DIST_BITS,
                       s.dist_count, s.dist_sorted, lane)) {
        inflate_fail(d, INFLATE_DISTANCE_SET);
        return false;
    }
    return true;
}

// The zlib header, a block's header, or the trailer. False once the stream is done.
__device__ static bool inflate_headers(inflate_shared& s, inflate_decoder& d, unsigned* queue,
                                       int& queued, unsigned lane) {
    inflate_refill(s, d);
    if (d.state == INFLATE_AT_HEADER) {
        const unsigned cmf = inflate_peek(d, 8), flg = (d.bitbuf >> 8) & 255;
        if (!inflate_take(d, 16)) return false;
        if ((cmf * 256 + flg) % 31 != 0) inflate_fail(d, INFLATE_HEADER_CHECK);
        else if ((cmf & 15) != 8) inflate_fail(d, INFLATE_HEADER_METHOD);
        else if ((cmf >> 4) > 7) inflate_fail(d, INFLATE_HEADER_WINDOW);
        else if (flg & 0x20) inflate_fail(d, INFLATE_HEADER_DICTIONARY);
        if (d.status != INFLATE_OK) return false;
        d.window = 256u << (cmf >> 4);
        d.state = INFLATE_AT_BLOCK;
        return true;
    }
    if (d.state == INFLATE_AT_TRAILER) {
        inflate_take(d, d.left & 7);  // to a byte boundary: the input is whole bytes
        inflate_refill(s, d);
        const unsigned b = unsigned(d.bitbuf);
        const unsigned adler = (b << 24) | ((b & 0xff00) << 8) | ((b >> 8) & 0xff00) | (b >> 24);
        if (!inflate_take(d, 32)) return false;
        if (lane == 0) s.adler_expected = adler;
        if (d.out_pos < d.out_size) inflate_fail(d, INFLATE_OUTPUT_SHORT);
        else if (d.left != 0) inflate_fail(d, INFLATE_TRAILING);
        d.state = INFLATE_DONE;
        return false;
    }
    // A block's header.
    const unsigned head = inflate_peek(d, 3);
    if (!inflate_take(d, 3)) return false;
    d.last = head & 1;
    const unsigned type = head >> 1;
    if (type == 0) {  // stored: LEN, NLEN from the next byte boundary, then LEN bytes
        inflate_take(d, d.left & 7);
        inflate_refill(s, d);
        const unsigned len = inflate_peek(d, 16), nlen = (d.bitbuf >> 16) & 0xffff;
        if (!inflate_take(d, 32)) return false;
        if (len != (nlen ^ 0xffff)) {
            inflate_fail(d, INFLATE_STORED_LENGTH);
            return false;
        }
        const unsigned start = d.in_len - d.left / 8;
        if (len > d.left / 8) {
            inflate_fail(d, INFLATE_TRUNCATED);
            return false;
        }
        if (len > d.out_size - d.out_pos) {
            inflate_fail(d, INFLATE_OUTPUT_LONG);
            return false;
        }
        if (len) {
            if (lane == 0)
                queue[2 * queued] = (INFLATE_OP_STORED << 30) | len, queue[2 * queued + 1] = start;
            ++queued;
        }
        d.out_pos += len;
        d.left -= 8 * len;
        inflate_restart(s, d, start + len);
        d.state = d.last ? INFLATE_AT_TRAILER : INFLATE_AT_BLOCK;
        return true;
    }
    if (type == 3) {
        inflate_fail(d, INFLATE_BLOCK_TYPE);
        return false;
    }
    if (type == 1) {
        if (!d.fixed) inflate_fixed_tables(s, lane);
        d.fixed = true;
    } else {
        d.fixed = false;
        if (!inflate_dynamic_tables(s, d, lane)) return false;
    }
    d.state = INFLATE_IN_CODES;
    return true;
}

// The one or two literals of literal/length table `entry` consumed and queued, as one entry.
__device__ __forceinline__ static void inflate_fast_literals(inflate_decoder& d, unsigned entry,
                                                             unsigned* queue, int& queued,
                                                             unsigned lane) {
    const unsigned bits = (entry & 15) + ((entry >> 4) & 15), count = 1 + ((entry & 0xf0) != 0);
    d.bitbuf >>= bits;
    d.bitcnt -= bits;
    if (lane == 0) queue[2 * queued] = (INFLATE_OP_LITERAL << 30) | count,
                   queue[2 * queued + 1] = entry >> 16;
    ++queued;
    d.out_pos += count;
}

// The extra bits after the code of length or distance table `entry`, both consumed.
__device__ __forceinline__ static unsigned inflate_fast_extra(inflate_decoder& d, unsigned entry) {
    const unsigned code_bits = entry & 15, extra_bits = (entry >> 4) & 15;
    const unsigned extra = unsigned(d.bitbuf >> code_bits) & ((1u << extra_bits) - 1);
    d.bitbuf >>= code_bits + extra_bits;
    d.bitcnt -= code_bits + extra_bits;
    return extra;
}

// Warp 0's decoding while nothing can run out, which the checked loop in inflate_decode_round
// takes over from near the ends: the ring holds the words of the pass's two refills, the
// input has more bits left than a pass reads (at most a table entry's literals, a length and
// a distance with their extra bits: 10 + 10 + 5 + 15 + 13), the output has room for two
// literals and the longest match, the queue for two entries. So nothing is checked against
// the stream's end or the output's, and the literals of a table entry leave enough bits (a
// refill makes at least 32) for the next code and its extra bits without a refill between
// them. A literal/length code the table does not resolve, a block's end and an invalid code
// are left to the checked loop, unconsumed; a distance is judged as the checked loop does.
__device__ __forceinline__ static void inflate_decode_fast(inflate_shared& s, inflate_decoder& d,
                                                           unsigned* queue, int& queued,
                                                           unsigned lane) {
    const int ring_limit = int(d.ring_end) - 3;
    const int out_limit = int(d.out_size) - (2 + 258);
    const unsigned litlen_mask = (1u << INFLATE_LITLEN_BITS) - 1;
    while (queued < INFLATE_QUEUE - 1 && int(d.wpos) <= ring_limit &&
           int(d.out_pos) <= out_limit) {
        if (d.bitcnt <= 32) {
            d.bitbuf |= (unsigned long long)d.next << d.bitcnt;
            d.bitcnt += 32;
            d.next = s.ring[++d.wpos & (INFLATE_RING_WORDS - 1)];
        }
        unsigned entry = s.litlen[unsigned(d.bitbuf) & litlen_mask];
        if ((entry & (3 << 8)) == INFLATE_LITERAL << 8) {
            inflate_fast_literals(d, entry, queue, queued, lane);
            entry = s.litlen[unsigned(d.bitbuf) & litlen_mask];
            if ((entry & (3 << 8)) == INFLATE_LITERAL << 8) {
                inflate_fast_literals(d, entry, queue, queued, lane);
                continue;
            }
        }
        if ((entry & (3 << 8)) != INFLATE_LENGTH << 8) break;  // for the checked loop
        const unsigned length = (entry >> 16) + inflate_fast_extra(d, entry);
        if (d.bitcnt <= 32) {
            d.bitbuf |= (unsigned long long)d.next << d.bitcnt;
            d.bitcnt += 32;
            d.next = s.ring[++d.wpos & (INFLATE_RING_WORDS - 1)];
        }
        const unsigned code = inflate_decode(d.bitbuf, s.dist, INFLATE_DIST_BITS, s.dist_count,
                                             s.dist_sorted, INFLATE_ALPHABET_DIST);
        if (((code >> 8) & 3) == INFLATE_INVALID) {
            inflate_fail(d, INFLATE_DISTANCE_CODE);
            break;
        }
        const unsigned distance = (code >> 16) + inflate_fast_extra(d, code);
        if (distance > min(d.out_pos, d.window)) {
            inflate_fail(d, distance > d.out_pos ? INFLATE_DISTANCE_TOO_FAR
                                                 : INFLATE_BEYOND_WINDOW);
            break;
        }
        if (lane == 0) queue[2 * queued] = (INFLATE_OP_MATCH << 30) | length,
                       queue[2 * queued + 1] = distance;
        ++queued;
        d.out_pos += length;
    }
    // The bits consumed are those of the words before wpos less the bitcnt not yet consumed.
    d.left = 8 * d.in_len - (32 * d.wpos - d.bitcnt);
}

// Warp 0's share of a round: the ring topped up, then symbols into `queue` until it is full,
// the ring runs short, or the stream ends. How many were queued.
__device__ static int inflate_decode_round(inflate_shared& s, inflate_decoder& d,
                                           unsigned* queue, unsigned lane) {
    // The ring moves on to the words [wpos, wpos + INFLATE_RING_WORDS): what it held of them
    // stays, the rest is loaded into the slots of words before wpos, which bitbuf has taken.
    const unsigned words = (d.in_len + 3) / 4;
    const unsigned end = min(words, d.wpos + INFLATE_RING_WORDS);
    const unsigned kept = d.wpos <= d.ring_end ? d.ring_end : d.wpos;
    for (unsigned w = kept + lane; w < end; w += 32)
        s.ring[w & (INFLATE_RING_WORDS - 1)] = inflate_global_word(d.src, d.in_len, w);
    d.ring_begin = d.wpos;
    d.ring_end = end;
    __syncwarp();
    int queued = 0;
    while (queued < INFLATE_QUEUE && d.status == INFLATE_OK) {
        if (d.state != INFLATE_IN_CODES) {
            if (!inflate_headers(s, d, queue, queued, lane)) break;
            continue;
        }
        inflate_decode_fast(s, d, queue, queued, lane);
        if (d.status != INFLATE_OK || queued == INFLATE_QUEUE) break;
        if (d.wpos + 2 > d.ring_end && d.ring_end < words) break;  // refill the ring first
        inflate_refill(s, d);
        const unsigned entry = inflate_decode(d.bitbuf, s.litlen, INFLATE_LITLEN_BITS,
                                              s.litlen_count, s.litlen_sorted,
                                              INFLATE_ALPHABET_LITLEN);
        const unsigned kind = (entry >> 8) & 3;
        if (kind == INFLATE_INVALID) {
            inflate_fail(d, INFLATE_LITLEN_CODE);
            break;
        }
        if (!inflate_take(d, entry & 15)) break;
        if (kind == INFLATE_LITERAL) {
            if (d.out_pos == d.out_size) {
                inflate_fail(d, INFLATE_OUTPUT_LONG);
                break;
            }
            if (lane == 0) queue[2 * queued] = (INFLATE_OP_LITERAL << 30) | 1,
                           queue[2 * queued + 1] = (entry >> 16) & 0xff;  // one literal only
            ++queued;
            ++d.out_pos;
            continue;
        }
        if (kind == INFLATE_END) {
            d.state = d.last ? INFLATE_AT_TRAILER : INFLATE_AT_BLOCK;
            continue;
        }
        const unsigned length_extra = (entry >> 4) & 15;
        const unsigned length = (entry >> 16) + inflate_peek(d, length_extra);
        if (!inflate_take(d, length_extra)) break;
        inflate_refill(s, d);
        const unsigned code = inflate_decode(d.bitbuf, s.dist, INFLATE_DIST_BITS, s.dist_count,
                                             s.dist_sorted, INFLATE_ALPHABET_DIST);
        if (((code >> 8) & 3) == INFLATE_INVALID) {
            inflate_fail(d, INFLATE_DISTANCE_CODE);
            break;
        }
        if (!inflate_take(d, code & 15)) break;
        const unsigned distance_extra = (code >> 4) & 15;
        const unsigned distance = (code >> 16) + inflate_peek(d, distance_extra);
        if (!inflate_take(d, distance_extra)) break;
        if (distance > d.out_pos) {
            inflate_fail(d, INFLATE_DISTANCE_TOO_FAR);
            break;
        }
        if (distance > d.window) {
            inflate_fail(d, INFLATE_BEYOND_WINDOW);
            break;
        }
        if (length > d.out_size - d.out_pos) {
            inflate_fail(d, INFLATE_OUTPUT_LONG);
            break;
        }
        if (lane == 0) queue[2 * queued] = (INFLATE_OP_MATCH << 30) | length,
                       queue[2 * queued + 1] = distance;
        ++queued;
        d.out_pos += length;
    }
    return queued;
}

// Warp 1's state: where it writes, and its lane's share of the output's Adler-32 sums.
struct inflate_writer {
    unsigned pos;      // output bytes written
    unsigned pos_mod;  // pos % 65521
    // Of this lane's bytes b at positions i: the sum of b, and of b * (i % 65521). Each term is
    // below 2^24 and a lane writes at most 2^26 bytes: 64 bits cannot overflow.
    unsigned long long sum, weighted;
};

__device__ __forceinline__ static unsigned inflate_mod_add(unsigned a, unsigned b) {
    const unsigned c = a + b;  // both below 65521
    return c >= INFLATE_ADLER_MOD ? c - INFLATE_ADLER_MOD : c;
}

// Writes `byte` at output position w.pos + k, where k % 65521 is given as position_mod.
__device__ __forceinline__ static void inflate_put(inflate_writer& w, unsigned char* dst,
                                                   unsigned k, unsigned position_mod,
                                                   unsigned char byte) {
    dst[w.pos + k] = byte;
    w.sum += byte;
    w.weighted += (unsigned long long)byte * position_mod;
}

// Warp 1's share of a round: the queue's `queued` symbols written.
__device__ static void inflate_write_round(inflate_writer& w, const unsigned* queue,
                                           int queued, const unsigned char* src,
                                           unsigned char* dst, unsigned lane) {
    int i = 0;
    while (i < queued) {
        // The entries from i on that one step can write, a lane a byte: up to 32 bytes, and of
        // matches only those whose every source byte was written before the step (a distance
        // at least the match's end within the step), so no lane waits for another.
        const int mine = i + int(lane);
        const unsigned head = mine < queued ? queue[2 * mine] : INFLATE_OP_STORED << 30;
        const unsigned value = mine < queued ? queue[2 * mine + 1] : 0;
        const unsigned op = head >> 30;
        unsigned end = head & 0x3fffffffu;  // the entry's end in the step: a prefix sum
        for (unsigned offset = 1; offset < 32; offset *= 2) {
            const unsigned before = __shfl_up_sync(0xffffffffu, end, offset);
            if (lane >= offset) end += before;
        }
        const unsigned start = end - (head & 0x3fffffffu);  // and its start
        const bool fits = op != INFLATE_OP_STORED && end <= 32 &&
                          (op == INFLATE_OP_LITERAL || value >= end);
        const unsigned misfits = __ballot_sync(0xffffffffu, !fits);
        const unsigned group = misfits ? unsigned(__ffs(int(misfits))) - 1 : 32;
        const unsigned my_mod = inflate_mod_add(w.pos_mod, lane);  // (pos + lane) % 65521
        if (group > 0) {
            unsigned ends = lane < group ? 1u << (end - 1) : 0;  // a bit at each entry's last byte
            for (int offset = 16; offset > 0; offset /= 2)
                ends |= __shfl_xor_sync(0xffffffffu, ends, offset);
            const unsigned total = __shfl_sync(0xffffffffu, end, int(group) - 1);
            // This lane's byte belongs to the entry after those that end before it.
            const int entry = min(__popc(ends & ((1u << lane) - 1)), 31);
            const unsigned entry_op = __shfl_sync(0xffffffffu, op, entry);
            const unsigned entry_value = __shfl_sync(0xffffffffu, value, entry);
            const unsigned entry_start = __shfl_sync(0xffffffffu, start, entry);
            // A match's source lies before the step (value >= end): no lane reads a byte
            // another writes in it.
            if (lane < total) {
                const unsigned char byte =
                    entry_op == INFLATE_OP_LITERAL
                        ? (unsigned char)(entry_value >> (8 * (lane - entry_start)))
                        : dst[w.pos + lane - entry_value];
                inflate_put(w, dst, lane, my_mod, byte);
            }
            w.pos += total;
            w.pos_mod = inflate_mod_add(w.pos_mod, total);
            i += int(group);
            __syncwarp();
            continue;
        }
        // A stored run, a match longer than 32 bytes or one that overlaps itself: on its own.
        const unsigned only = queue[2 * i], argument = queue[2 * i + 1];
        const unsigned length = only & 0x3fffffffu;
        unsigned k_mod = my_mod;  // (pos + k) % 65521 for this lane's k
        if (only >> 30 == INFLATE_OP_STORED) {
            for (unsigned k = lane; k < length; k += 32) {
                inflate_put(w, dst, k, k_mod, src[argument + k]);
                k_mod = inflate_mod_add(k_mod, 32);
            }
        } else {
            // Byte k copies the byte `argument` back; where the match overlaps itself that is
            // byte k % argument of the part before it, so every source byte was written before
            // the match began.
            for (unsigned k0 = 0; k0 < length; k0 += 32) {
                const unsigned k = k0 + lane;
                const unsigned back = argument < length ? k % argument : k;
                if (k < length) inflate_put(w, dst, k, k_mod, dst[w.pos - argument + back]);
                k_mod = inflate_mod_add(k_mod, 32);
            }
        }
        w.pos += length;
        w.pos_mod = (w.pos_mod + length) % INFLATE_ADLER_MOD;
        ++i;
        __syncwarp();
    }
}

extern "C" __global__ void __launch_bounds__(INFLATE_THREADS, INFLATE_MIN_BLOCKS)
    inflate_zlib(const unsigned char* __restrict__ src,
                 const unsigned long long* __restrict__ src_start,
                 unsigned char* __restrict__ dst,
                 const unsigned long long* __restrict__ dst_start, int* __restrict__ status,
                 unsigned n) {
    __shared__ inflate_shared s;
    const unsigned stream = blockIdx.x;
    if (stream >= n) return;
    const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const unsigned long long in_begin = src_start[stream], in_end = src_start[stream + 1];
    const unsigned long long out_begin = dst_start[stream], out_end = dst_start[stream + 1];
    // Offsets must run forward, and a stream's input bits and output bytes fit 31 bits (they
    // are counted in 32): else the stream is refused whole, before anything is written.
    if (in_end < in_begin || out_end < out_begin || in_end - in_begin > 0x0fffffffull ||
        out_end - out_begin > 0x7fffffffull) {
        if (threadIdx.x == 0) status[stream] = INFLATE_BAD_RANGE;
        return;
    }
    const unsigned char* in = src + in_begin;
    unsigned char* out = dst + out_begin;
    const unsigned out_size = unsigned(out_end - out_begin);

    inflate_decoder d;
    d.src = in;
    d.in_len = unsigned(in_end - in_begin);
    d.left = 8 * d.in_len;
    d.ring_begin = 0;
    d.ring_end = 0;
    inflate_restart(s, d, 0);
    d.out_pos = 0;
    d.out_size = out_size;
    d.window = 0;
    d.state = INFLATE_AT_HEADER;
    d.status = INFLATE_OK;
    d.last = false;
    d.fixed = false;
    inflate_writer w = {0, 0, 0, 0};  // warp 1's
    int last_round = -1;   // the round that queued the stream's last symbols, once known

    for (int round = 0;; ++round) {
        const int mine = round & 1, previous = mine ^ 1;
        if (warp == 0 && last_round < 0) {
            const int queued = inflate_decode_round(s, d, s.queue[mine], lane);
            if (lane == 0) {
                const bool ended = d.status != INFLATE_OK || d.state == INFLATE_DONE;
                s.queued[mine] = queued;
                s.ended[mine] = ended;
                if (ended) s.status = d.status;
            }
        } else if (warp == 1 && round > 0) {
            inflate_write_round(w, s.queue[previous], s.queued[previous], in, out, lane);
        }
        // Hands this round's queue to warp 1 and takes back the one it wrote. Slots of the
        // round's parity: the next round writes the other ones while this one's are read.
        __syncthreads();
        if (last_round < 0 && s.ended[mine]) last_round = round;
        if (last_round >= 0 && round > last_round) break;
    }
    if (s.status != INFLATE_OK) {
        if (threadIdx.x == 0) status[stream] = s.status;
        return;
    }

    // Adler-32 (RFC 1950) of bytes b_i, i < n: a = 1 + sum b_i and b = n + sum (n - i) b_i,
    // that is n (1 + sum b_i) - sum i b_i, mod 65521: from warp 1's sums, which wrote them all.
    if (warp == 1) {
        unsigned long long sum = w.sum % INFLATE_ADLER_MOD;
        unsigned long long weighted = w.weighted % INFLATE_ADLER_MOD;
        for (int offset = 16; offset > 0; offset /= 2) {
            sum += __shfl_down_sync(0xffffffffu, sum, offset);
            weighted += __shfl_down_sync(0xffffffffu, weighted, offset);
        }
        if (lane == 0) {
            const unsigned a = unsigned((1 + sum) % INFLATE_ADLER_MOD);
            const unsigned b = unsigned(((out_size % INFLATE_ADLER_MOD) * (unsigned long long)a +
                                         INFLATE_ADLER_MOD - weighted % INFLATE_ADLER_MOD) %
                                        INFLATE_ADLER_MOD);
            status[stream] = ((b << 16) | a) == s.adler_expected ? INFLATE_OK : INFLATE_ADLER;
        }
    }
}
