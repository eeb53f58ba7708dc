// jpeg_check.cu: the scan of each of a batch of baseline JPEG files checked on the GPU, so that
// the CPU need not read a file's Huffman codes before the JPEG engines decode it.
// edgecli.decode.gpu.jpeg_check launches it and names the statuses.
//
// Kernel jpeg_check: one block of CHECK_LANES threads (a warp) a file. File i is
// data[data_start[i] .. data_start[i + 1]), its plan plans[i * plan_stride ..] (made by
// edgecli._native.jpeg_scan_plan, which walked the file's markers up to the scan as
// libjpeg-turbo reads them: the layout below is _native.c's struct check_plan). status[i]
// becomes CHECK_CLEAN only where libjpeg-turbo decodes the scan without a warning: every code
// of its MCUs is one of its tables' codes, its last MCU ends in the last byte before the first
// marker after the scan's start, and that marker is EOI. Any other status is no verdict: the
// host then judges the file as before, on the CPU (edgecli._native.jpeg_scan_damage), and a
// clean file that comes back unpassed costs only that time. So the check may refuse what is
// fine (a restart interval is never planned; a bad code anywhere a lane decodes, even where
// its decoding turns out to have been speculative, fails it) but never pass what is not.
//
// Why it is clean then: libjpeg-turbo reads the scan's codes as any reader does while they lie
// in the data; it warns only of a bad code (none here), of codes wanted past a marker (the last
// MCU ends before it), of bytes left before the next marker (at most the last byte's padding
// bits are, which it drops silently), or of a marker that is not the one it expects (EOI here).
//
// Why this shape. A scan is one Huffman-coded bit stream: where a code starts is known only
// once the codes before it are decoded. But decoding started at any bit soon falls into step
// with the true decoding (Huffman codes are self-synchronising; Weißenberger and Schmidt, 2018,
// decode JPEG this way on GPUs): once two decodings meet at the same bit at the start of the
// same block of the MCU, they agree from there on. So the scan's data is cut into one segment
// a lane, every lane decodes its own from its first byte as if a block started there, and
// records where it is at the first block start after each of CHECK_POINTS grid points; then
// each lane decodes on into the next segment until it meets one of that lane's records. Lane 0
// starts where the data does, so by induction every lane's decoding is the true one from where
// the lane before it met it; the MCUs each lane counted, joined at those meetings, give the
// scan's. A lane that meets none of the next one's records (it has not fallen into step within
// CHECK_POINTS * CHECK_GRID_BITS bits, which real files do within a few hundred) fails the
// file. Positions are counted in the data's bits with the stuffed zero bytes (FF 00) taken out:
// the lanes count the FF bytes of every segment first, so each knows where its bits begin.
//
// Untrusted input: every byte read lies in the file (before the first marker, found first);
// the plan's fields are checked; each step consumes at least one bit and every loop ends at a
// segment's end, at the data's end or after the grid's points.

#define CHECK_LOOKAHEAD 10
#define CHECK_MAGIC 0x314B434Au  // "JCK1"
#define CHECK_TABLES 8           // DC tables 0-3, then AC tables 0-3
#define CHECK_MAX_BLOCKS 12
#define CHECK_LANES 32
#define CHECK_GRID_BITS 1024
#define CHECK_POINTS 64
// Bytes a lane decodes at least: twice the grid's span, so that the lane's own decoding is the
// true one (met by the lane before it within the span) well before its segment ends.
#define CHECK_MIN_SEGMENT (CHECK_GRID_BITS * CHECK_POINTS / 4)
#define CHECK_SCAN_BYTES 16  // bytes a lane looks at a round in the search for the marker
#define NO_BAD (~0ull)       // no bad code met

// Statuses (edgecli.decode.gpu.jpeg_check.STATUSES).
#define CHECK_CLEAN 0
#define CHECK_BAD_PLAN 1   // a plan that does not fit its file
#define CHECK_NO_EOI 2     // the first marker after the scan's start is not EOI
#define CHECK_BAD_CODE 3   // bits that no code of the table in use starts
#define CHECK_NO_SYNC 4    // a lane never fell into step with the next one
#define CHECK_MCUS 5       // the MCUs do not end in the data's last byte
#define CHECK_TOO_LARGE 6  // more data than 32-bit positions count

struct check_table {
    unsigned short look[1 << CHECK_LOOKAHEAD];  // (length << 8) | symbol; 0: a longer code
    int maxcode[18];
    int valoffset[18];
    unsigned char val[256];
};

struct check_plan {
    unsigned magic;
    unsigned scan_start;
    unsigned mcus;
    unsigned blocks;
    unsigned char block_dc[CHECK_MAX_BLOCKS], block_ac[CHECK_MAX_BLOCKS];
    check_table tables[CHECK_TABLES];
};

// A lane's bit reader: ``buf`` holds ``count`` bits at its top, the first at ``pos`` (bits of
// the data without its stuffed zeros, from the scan's start); bytes from ``byte`` on are next,
// and from ``end`` (the marker) on it reads zeros.
struct check_reader {
    const unsigned char* d;
    unsigned byte, end;
    unsigned long long buf, pos;
    int count;
};

__device__ __forceinline__ void check_fill(check_reader& r) {
    while (r.count <= 56) {
        unsigned c = 0;
        if (r.byte < r.end) {
            c = r.d[r.byte];
            r.byte += c == 0xFF ? 2 : 1;  // before the marker every FF is followed by its 00
        }
        r.buf |= (unsigned long long)c << (56 - r.count);
        r.count += 8;
    }
}

// One code of ``t`` and its magnitude bits (a DC code where k is 0), as jdhuff.c decodes them:
// k moves on past the block's end (64 or more) where the block ends. False where no code of
// ``t`` starts the next 16 bits.
__device__ __forceinline__ bool check_step(check_reader& r, const check_table* t, int& k) {
    check_fill(r);
    const unsigned peek = (unsigned)(r.buf >> 48);
    const unsigned entry = t->look[peek >> (16 - CHECK_LOOKAHEAD)];
    int length = (int)(entry >> 8), symbol;
    if (length) {
        symbol = (int)(entry & 0xFF);
    } else {
        length = CHECK_LOOKAHEAD + 1;
        while (length <= 16 && (int)(peek >> (16 - length)) > t->maxcode[length]) length++;
        if (length > 16) return false;
        symbol = t->val[((int)(peek >> (16 - length)) + t->valoffset[length]) & 0xFF];
    }
    const int size = k == 0 ? symbol : symbol & 15;  // DC symbols are at most 15 (the plan's)
    const int used = length + size;
    r.buf <<= used;
    r.count -= used;
    r.pos += (unsigned long long)used;
    if (k == 0)
        k = 1;
    else if (size)
        k += (symbol >> 4) + 1;
    else
        k += (symbol >> 4) == 15 ? 16 : 64;  // ZRL, else the end of the block
    return true;
}

extern "C" __global__ void __launch_bounds__(CHECK_LANES)
    jpeg_check(const unsigned char* __restrict__ data,
               const unsigned long long* __restrict__ data_start,
               const unsigned char* __restrict__ plans, unsigned long long plan_stride,
               int* __restrict__ status, unsigned n) {
    // Segments and where each lane stands, its records, how it ended.
    __shared__ unsigned seg_start[CHECK_LANES + 1], ffs[CHECK_LANES];
    __shared__ unsigned long long seg_bits[CHECK_LANES + 1];  // unstuffed bit of each start
    __shared__ unsigned long long rec_pos[CHECK_LANES][CHECK_POINTS];
    __shared__ unsigned rec_mcu[CHECK_LANES][CHECK_POINTS];
    __shared__ unsigned char rec_blk[CHECK_LANES][CHECK_POINTS];
    __shared__ int records[CHECK_LANES], failed[CHECK_LANES];
    __shared__ long long delta[CHECK_LANES];  // MCUs lane j counted past lane j + 1 at meeting
    __shared__ unsigned long long bad_at[CHECK_LANES], met_at[CHECK_LANES];
    __shared__ unsigned marker, lanes, last_mcus;
    __shared__ unsigned long long last_end;

    const unsigned file = blockIdx.x, lane = threadIdx.x;
    if (file >= n) return;
    const unsigned long long begin = data_start[file], size = data_start[file + 1] - begin;
    const unsigned char* d = data + begin;
    const check_plan* plan = (const check_plan*)(plans + (unsigned long long)file * plan_stride);
    const unsigned blocks = plan->blocks, scan_start = plan->scan_start;
    bool plan_ok = plan->magic == CHECK_MAGIC && blocks >= 1 && blocks <= CHECK_MAX_BLOCKS &&
                   plan->mcus >= 1 && scan_start < size;
    for (unsigned b = 0; plan_ok && b < blocks; b++)
        plan_ok = plan->block_dc[b] < 4 && plan->block_ac[b] >= 4 && plan->block_ac[b] < 8;
    if (!plan_ok || size >= 0x1FFFFFFFull) {  // the same for every lane: they leave together
        if (lane == 0) status[file] = plan_ok ? CHECK_TOO_LARGE : CHECK_BAD_PLAN;
        return;
    }
    const unsigned file_size = (unsigned)size;

    // The first marker at or after the scan's start: the data ends there.
    if (lane == 0) marker = file_size;
    __syncthreads();
    for (unsigned round = scan_start; round + 1 < file_size;
         round += CHECK_LANES * CHECK_SCAN_BYTES) {
        bool found = false;
        for (unsigned i = 0; i < CHECK_SCAN_BYTES; i++) {
            const unsigned at = round + i * CHECK_LANES + lane;
            if (at + 1 < file_size && d[at] == 0xFF && d[at + 1] != 0x00) {
                atomicMin(&marker, at);
                found = true;
                break;
            }
        }
        if (__any_sync(0xffffffffu, found)) break;
    }
    __syncthreads();
    const unsigned end = marker;
    if (end >= file_size || d[end + 1] != 0xD9) {
        if (lane == 0) status[file] = CHECK_NO_EOI;
        return;
    }

    // One segment a lane, at least CHECK_MIN_SEGMENT bytes; none starts on a stuffed zero.
    if (lane == 0) {
        const unsigned length = end - scan_start;
        const unsigned count = min(max(length / CHECK_MIN_SEGMENT, 1u), (unsigned)CHECK_LANES);
        lanes = count;
        for (unsigned j = 0; j < count; j++) {
            unsigned at = scan_start + j * (length / count);
            if (j > 0 && d[at - 1] == 0xFF) at++;
            seg_start[j] = at;
        }
        seg_start[count] = end;
    }
    ffs[lane] = 0;
    failed[lane] = CHECK_CLEAN;
    records[lane] = 0;
    if (lane == 0) last_mcus = 0;
    __syncthreads();
    const unsigned count = lanes, length = end - scan_start, nominal = length / count;
    for (unsigned at = scan_start + lane; at < end; at += CHECK_LANES)
        if (d[at] == 0xFF) atomicAdd(&ffs[min((at - scan_start) / nominal, count - 1)], 1u);
    __syncthreads();
    if (lane == 0) {
        seg_bits[0] = 0;
        for (unsigned j = 0; j < count; j++)
            seg_bits[j + 1] = seg_bits[j] + 8ull * (seg_start[j + 1] - seg_start[j] - ffs[j]);
    }
    __syncthreads();
    const unsigned long long total_bits = seg_bits[count];

    // Each lane decodes its segment as if a block started it, recording grid points. Where
    // its bits start no code it notes where, and starts again at the next bit: before the lane
    // before it met it, that was its guess going wrong; after, the data is damaged.
    check_reader r = {d, 0, end, 0, 0, 0};
    int blk = 0, k = 0;
    unsigned mcu = 0;
    unsigned long long bad = NO_BAD, bad_in_mcus = NO_BAD;
    const bool active = lane < count, last = lane + 1 == count;
    if (active) {
        r.byte = seg_start[lane];
        r.pos = seg_bits[lane];
        const unsigned long long stop = last ? ~0ull : seg_bits[lane + 1];
        int m = 0;
        for (;;) {
            if (k == 0) {
                while (m < CHECK_POINTS && seg_bits[lane] + (unsigned long long)m * CHECK_GRID_BITS <= r.pos) {
                    rec_pos[lane][m] = r.pos;
                    rec_blk[lane][m] = (unsigned char)blk;
                    rec_mcu[lane][m] = mcu;
                    m++;
                }
            }
            if (r.pos >= stop) break;
            const unsigned table = k == 0 ? plan->block_dc[blk] : plan->block_ac[blk];
            const unsigned long long at = r.pos;
            if (!check_step(r, &plan->tables[table], k)) {
                bad = at;
                check_fill(r);
                r.buf <<= 1;
                r.count--;
                r.pos++;
                blk = k = 0;
                if (r.pos > total_bits) break;  // (a table of no codes fails every step)
                continue;
            }
            if (r.pos > total_bits) break;  // the data ran out: the last lane's end
            if (k >= 64) {
                k = 0;
                if (++blk == (int)blocks) {
                    blk = 0;
                    mcu++;
                    if (last) {
                        last_mcus = mcu;
                        last_end = r.pos;
                        bad_in_mcus = bad;
                    }
                }
            }
        }
        records[lane] = m;
        // A lane's own decoding is true from where the lane before it met it: it may have met
        // no bad code past there. The last lane's decoding counts up to its last whole MCU.
        bad_at[lane] = last ? bad_in_mcus : bad;
    }
    __syncthreads();

    // Each lane but the last decodes on until it meets one of the next lane's records.
    if (active && !last) {
        const unsigned next = lane + 1;
        const int held = records[next];
        int m = 0;
        for (;;) {
            if (k == 0) {
                bool met = false;
                while (m < held && seg_bits[next] + (unsigned long long)m * CHECK_GRID_BITS <= r.pos) {
                    if (rec_pos[next][m] == r.pos && rec_blk[next][m] == blk) {
                        delta[next] = (long long)mcu - (long long)rec_mcu[next][m];
                        met_at[next] = r.pos;
                        met = true;
                        break;
                    }
                    m++;
                }
                if (met) break;
                if (m >= held) {
                    failed[lane] = CHECK_NO_SYNC;
                    break;
                }
            }
            const unsigned table = k == 0 ? plan->block_dc[blk] : plan->block_ac[blk];
            if (!check_step(r, &plan->tables[table], k)) {
                failed[lane] = CHECK_BAD_CODE;
                break;
            }
            if (r.pos > total_bits) {
                failed[lane] = CHECK_MCUS;
                break;
            }
            if (k >= 64) {
                k = 0;
                if (++blk == (int)blocks) {
                    blk = 0;
                    mcu++;
                }
            }
        }
    }
    __syncthreads();

    // The MCUs joined at the meetings: the scan's, ending in its last byte.
    if (lane == 0) {
        int verdict = CHECK_CLEAN;
        long long before_last = 0;  // MCUs before the last lane's start, by the true decoding
        for (unsigned j = 0; j < count && verdict == CHECK_CLEAN; j++) {
            verdict = failed[j];
            const unsigned long long met = j == 0 ? 0 : met_at[j];
            if (verdict == CHECK_CLEAN && bad_at[j] != NO_BAD && bad_at[j] >= met)
                verdict = CHECK_BAD_CODE;
            if (j > 0) before_last += delta[j];
        }
        if (verdict == CHECK_CLEAN) {
            const bool whole = last_mcus > 0 && last_end >= (count == 1 ? 0 : met_at[count - 1]);
            if (!whole || before_last + (long long)last_mcus != (long long)plan->mcus ||
                last_end > total_bits || total_bits - last_end >= 8)
                verdict = CHECK_MCUS;
        }
        status[file] = verdict;
    }
}
