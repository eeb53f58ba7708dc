// jpeg_check.cu: the scan of each of a batch of baseline JPEG files checked on the GPU, so that
// the CPU need not read a file's Huffman codes before the JPEG engines decode it.
// edgecli.decode.gpu.jpeg_check launches it and names the statuses.
//
// Kernel jpeg_check: one block of CHECK_LANES threads (a warp) a file. File i's plan is
// plans[plan_start[i] .. plan_start[i + 1]) (8-aligned), made by edgecli._native.jpeg_scan_plan
// as the file was read, from a walk of its markers up to the scan as libjpeg-turbo reads them:
// a struct check_plan (_native.c's layout), where in the scan's data each restart interval
// starts, and that data up to its EOI, with its stuffed zero bytes (FF 00) and its restart
// markers (in order, as many as the intervals call for: the plan checked that) taken out.
// A scan of several restart intervals is checked an interval a lane (each starts afresh); the
// rest of this header is about a scan of one. status[i] becomes CHECK_CLEAN only where
// libjpeg-turbo decodes the scan without a warning, and as every decoder does: every code of
// its MCUs is one of its tables' codes, none puts a coefficient past a block's end, and its
// last MCU ends in the data's last byte. Any other status is no verdict: the host then
// judges the file as before, on the CPU (edgecli._native's jpeg_scan_damage), and a clean
// file that comes back unpassed costs only that time. So the check may refuse what is fine (a
// second scan is never planned; a bad code where a lane's decoding had already fallen into
// step fails it) but never pass what is not.
//
// Why it is clean then: libjpeg-turbo reads the scan's codes as any reader does while they lie
// in the data; it warns only of a bad code (none here), of codes wanted past a marker (the last
// MCU ends before it), of bytes left before the next marker (at most the last byte's padding
// bits are, which it drops silently), or of a marker that is not the one it expects (the
// restart markers are in order, EOI comes last).
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
// CHECK_POINTS * CHECK_GRID_BITS bits; photographs do within a few hundred) fails the file.
// With the stuffed zeros out, a lane reads the bits at any position with two aligned words.
//
// Untrusted input: every word read lies in the plan (reads past it give zeros); the plan's
// fields are checked; each step consumes at least one bit and every loop ends at a segment's
// end, at the data's end or after the grid's points.

#define CHECK_LOOKAHEAD 10
#define CHECK_MAGIC 0x334B434Au  // "JCK3"
#define CHECK_TABLES 8           // DC tables 0-3, then AC tables 0-3
#define CHECK_MAX_BLOCKS 12
#define CHECK_LANES 32
#define CHECK_GRID_BITS 1024
#define CHECK_POINTS 64
// Bytes a lane decodes at least: twice the grid's span, so that the lane's own decoding is the
// true one (met by the lane before it within the span) well before its segment ends.
#define CHECK_MIN_SEGMENT (CHECK_GRID_BITS * CHECK_POINTS / 4)
#define NO_BAD (~0ull)  // no bad code met

// Statuses (edgecli.decode.gpu.jpeg_check.STATUSES).
#define CHECK_CLEAN 0
#define CHECK_BAD_PLAN 1  // a plan no file makes
#define CHECK_BAD_CODE 2  // bits that no code of the table in use starts
#define CHECK_NO_SYNC 3   // a lane never fell into step with the next one
#define CHECK_MCUS 4      // the MCUs do not end in the data's last byte

struct check_table {
    unsigned short look[1 << CHECK_LOOKAHEAD];  // (length << 8) | symbol; 0: a longer code
    int maxcode[18];
    int valoffset[18];
    unsigned char val[256];
};

struct check_plan {
    unsigned magic;
    unsigned mcus;
    unsigned blocks;
    unsigned data_bytes;
    unsigned restart_interval;
    unsigned intervals;
    unsigned char block_dc[CHECK_MAX_BLOCKS], block_ac[CHECK_MAX_BLOCKS];
    check_table tables[CHECK_TABLES];
};

// The 32 bits of the data from bit ``pos`` on (the first the most significant); zeros past
// the plan's ``words``.
__device__ __forceinline__ unsigned check_peek(const unsigned* words, unsigned long long count,
                                               unsigned long long pos) {
    const unsigned long long at = pos >> 5;
    unsigned hi = at < count ? words[at] : 0u, lo = at + 1 < count ? words[at + 1] : 0u;
    hi = (hi >> 24) | (hi >> 8 & 0xFF00u) | (hi << 8 & 0xFF0000u) | (hi << 24);  // big-endian
    lo = (lo >> 24) | (lo >> 8 & 0xFF00u) | (lo << 8 & 0xFF0000u) | (lo << 24);
    return __funnelshift_l(lo, hi, (unsigned)(pos & 31));
}

// One code of ``t`` and its magnitude bits at bit ``pos`` (a DC code where k is 0), as
// jdhuff.c decodes them: k moves on past the block's end (64 or more) where the block ends.
// False where no code of ``t`` starts the next 16 bits. ``past`` is set where a coefficient or
// a run of zeros passes the block's end: libjpeg-turbo puts such a coefficient in the block's
// last place without a word, and other decoders, the JPEG engines among them, do otherwise, so
// where the true decoding does that the CPU must judge the file (edgecli._native's
// jpeg_scan_damage then says it is libjpeg-turbo's alone). A lane's guess, before it falls
// into step, goes on as libjpeg-turbo would, so that it falls into step as before.
__device__ __forceinline__ bool check_step(const unsigned* words, unsigned long long count,
                                           unsigned long long& pos, const check_table* t,
                                           int& k, bool& past) {
    const unsigned peek = check_peek(words, count, pos) >> 16;
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
    int next;
    if (k == 0)
        next = 1;
    else if (size)
        next = k + (symbol >> 4) + 1;
    else
        next = k + ((symbol >> 4) == 15 ? 16 : 64);  // ZRL, else the end of the block
    past = next > 64 && (size || (symbol >> 4) == 15);
    pos += (unsigned long long)(length + size);
    k = next;
    return true;
}

extern "C" __global__ void __launch_bounds__(CHECK_LANES)
    jpeg_check(const unsigned char* __restrict__ plans,
               const unsigned long long* __restrict__ plan_start, int* __restrict__ status,
               unsigned n) {
    // Where each lane stands, its records, how it ended.
    __shared__ unsigned long long rec_pos[CHECK_LANES][CHECK_POINTS];
    __shared__ unsigned rec_mcu[CHECK_LANES][CHECK_POINTS];
    __shared__ unsigned char rec_blk[CHECK_LANES][CHECK_POINTS];
    __shared__ int records[CHECK_LANES], failed[CHECK_LANES];
    __shared__ long long delta[CHECK_LANES];  // MCUs lane j counted past lane j + 1 at meeting
    __shared__ unsigned long long bad_at[CHECK_LANES], met_at[CHECK_LANES];
    __shared__ unsigned last_mcus;
    __shared__ unsigned long long last_end;

    const unsigned file = blockIdx.x, lane = threadIdx.x;
    if (file >= n) return;
    const unsigned long long begin = plan_start[file], size = plan_start[file + 1] - begin;
    const check_plan* plan = (const check_plan*)(plans + begin);
    // The same for every lane: they leave together.
    if (size < sizeof(check_plan) || (begin & 7) != 0) {
        if (lane == 0) status[file] = CHECK_BAD_PLAN;
        return;
    }
    const unsigned blocks = plan->blocks, data_bytes = plan->data_bytes;
    const unsigned intervals = plan->intervals, restart = plan->restart_interval;
    // The intervals' offsets, then the data (each a multiple of 8 bytes).
    const unsigned long long offsets_bytes = (4ull * intervals + 7) & ~7ull;
    bool plan_ok = plan->magic == CHECK_MAGIC && blocks >= 1 && blocks <= CHECK_MAX_BLOCKS &&
                   plan->mcus >= 1 && data_bytes < 0x1FFFFFFFu && intervals >= 1 &&
                   offsets_bytes + data_bytes <= size - sizeof(check_plan) &&
                   (intervals == 1 || (restart >= 1 && intervals - 1 < plan->mcus &&
                                       (plan->mcus - 1) / restart == intervals - 1));
    for (unsigned b = 0; plan_ok && b < blocks; b++)
        plan_ok = plan->block_dc[b] < 4 && plan->block_ac[b] >= 4 && plan->block_ac[b] < 8;
    if (!plan_ok) {
        if (lane == 0) status[file] = CHECK_BAD_PLAN;
        return;
    }
    const unsigned* starts = (const unsigned*)(plan + 1);
    const unsigned* words = (const unsigned*)((const unsigned char*)starts + offsets_bytes);
    const unsigned long long word_count = (size - sizeof(check_plan) - offsets_bytes) / 4;
    const unsigned long long total_bits = 8ull * data_bytes;

    // Several restart intervals: each starts afresh at its offset, so a lane decodes whole
    // intervals in turn, each to exactly its MCUs, ending in its last byte.
    if (intervals > 1) {
        int verdict = CHECK_CLEAN;
        for (unsigned i = lane; i < intervals && verdict == CHECK_CLEAN; i += CHECK_LANES) {
            const unsigned long long first = 8ull * starts[i];
            const unsigned long long end = i + 1 < intervals ? 8ull * starts[i + 1] : total_bits;
            const unsigned wanted = i + 1 < intervals ? restart : plan->mcus - restart * i;
            if (first > end || end > total_bits) {
                verdict = CHECK_BAD_PLAN;
                break;
            }
            unsigned long long pos = first;
            for (unsigned mcu = 0; mcu < wanted && verdict == CHECK_CLEAN; mcu++) {
                for (unsigned blk = 0; blk < blocks && verdict == CHECK_CLEAN; blk++) {
                    for (int k = 0; k < 64;) {
                        const unsigned table = k == 0 ? plan->block_dc[blk] : plan->block_ac[blk];
                        bool past;
                        if (!check_step(words, word_count, pos, &plan->tables[table], k, past) ||
                            past) {
                            verdict = CHECK_BAD_CODE;
                            break;
                        }
                        if (pos > end) {  // the interval's codes run into its marker
                            verdict = CHECK_MCUS;
                            break;
                        }
                    }
                }
            }
            if (verdict == CHECK_CLEAN && end - pos >= 8) verdict = CHECK_MCUS;
        }
        failed[lane] = verdict;
        __syncthreads();
        if (lane == 0) {
            int found = CHECK_CLEAN;
            for (unsigned j = 0; j < CHECK_LANES && found == CHECK_CLEAN; j++) found = failed[j];
            status[file] = found;
        }
        return;
    }

    // One segment a lane, at least CHECK_MIN_SEGMENT bytes.
    const unsigned count = min(max(data_bytes / CHECK_MIN_SEGMENT, 1u), (unsigned)CHECK_LANES);
    const unsigned long long segment_bits = 8ull * (data_bytes / count);
    failed[lane] = CHECK_CLEAN;
    records[lane] = 0;
    if (lane == 0) last_mcus = 0;
    __syncthreads();

    // Each lane decodes its segment as if a block started it, recording grid points. Where
    // its bits start no code it notes where, and starts again at the next bit: before the lane
    // before it met it, that was its guess going wrong; after, the data is damaged. A
    // coefficient past a block's end is noted so too, and the lane goes on.
    int blk = 0, k = 0;
    unsigned mcu = 0;
    unsigned long long bad = NO_BAD, bad_in_mcus = NO_BAD;
    const bool active = lane < count, last = lane + 1 == count;
    const unsigned long long first = lane * segment_bits;  // where the lane starts
    unsigned long long pos = first;
    if (active) {
        const unsigned long long stop = last ? ~0ull : first + segment_bits;
        int m = 0;
        for (;;) {
            if (k == 0) {
                while (m < CHECK_POINTS && first + m * (unsigned long long)CHECK_GRID_BITS <= pos) {
                    rec_pos[lane][m] = pos;
                    rec_blk[lane][m] = (unsigned char)blk;
                    rec_mcu[lane][m] = mcu;
                    m++;
                }
            }
            if (pos >= stop) break;
            const unsigned table = k == 0 ? plan->block_dc[blk] : plan->block_ac[blk];
            const unsigned long long at = pos;
            bool past;
            if (!check_step(words, word_count, pos, &plan->tables[table], k, past)) {
                bad = at;
                pos = at + 1;
                blk = k = 0;
                if (pos > total_bits) break;  // (a table of no codes fails every step)
                continue;
            }
            if (past) bad = at;
            if (pos > total_bits) break;  // the data ran out: the last lane's end
            if (k >= 64) {
                k = 0;
                if (++blk == (int)blocks) {
                    blk = 0;
                    mcu++;
                    if (last) {
                        last_mcus = mcu;
                        last_end = pos;
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
        const unsigned long long grid = first + segment_bits;  // the next lane's first point
        const int held = records[next];
        int m = 0;
        for (;;) {
            if (k == 0) {
                bool met = false;
                while (m < held && grid + m * (unsigned long long)CHECK_GRID_BITS <= pos) {
                    if (rec_pos[next][m] == pos && rec_blk[next][m] == blk) {
                        delta[next] = (long long)mcu - (long long)rec_mcu[next][m];
                        met_at[next] = pos;
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
            bool past;
            if (!check_step(words, word_count, pos, &plan->tables[table], k, past) || past) {
                failed[lane] = CHECK_BAD_CODE;
                break;
            }
            if (pos > total_bits) {
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
