/* Blockwise 8-bit quantization kernels for quantlib's CPU backend.
 *
 * Compiled at import time by quantlib/backends/cpu.py and called through
 * ctypes. All pointers are to contiguous buffers; the caller (the Python
 * wrapper) checks dtypes, the block size and absmax's length, but -- like real
 * op libraries -- neither the wrapper nor these kernels check that `code` (the
 * quantization table) has the 256 entries an 8-bit code indexes. The kernels
 * were written for a 256-entry table and trust it.
 *
 * HOW A WRONG-SIZE TABLE CRASHES, AND WHY IT IS CERTAIN (this file is a test
 * fixture): in a real library such a table makes the kernel read past the
 * table's end, which crashes only sometimes. Here the crash is made certain
 * on purpose: the kernels do not read `code` directly but look "their" table
 * up with table8(), which gives the table back only for the 256-entry width
 * the kernels were written for and NULL for any other width (there is no
 * table of any other width to hand out). The kernels never check that result
 * -- the same trust they place in the size -- and start by copying the 256
 * entries into a local buffer (as a GPU kernel would load the code into
 * shared memory), so any table whose element count is not 256 makes the
 * kernel read from address 0 -> SIGSEGV, even when A is empty. The pointer is
 * held in a volatile variable so the compiler can neither drop the read nor
 * turn it into a trap instruction (SIGILL). With a 256-entry table no read is
 * ever out of bounds: indices are uint8 (0..255), absmax reads are at
 * i / blocksize < ceil(n / blocksize), and blocksize >= 1 is checked by the
 * caller.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#define CODE_SIZE 256

/* Not inlined, so its NULL is a run-time value, not a compile-time one. */
__attribute__((noinline, noipa)) static const float *table8(const float *code, int64_t code_numel)
{
    const float *tables[2] = {NULL, code}; /* [0]: no table of this width */
    return tables[code_numel == CODE_SIZE];
}

static void load_table(float *dst, const float *code, int64_t code_numel)
{
    const float *volatile table = table8(code, code_numel);
    for (int i = 0; i < CODE_SIZE; i++)
        dst[i] = table[i];
}

/* Index of the entry of the sorted table nearest to v. */
static uint8_t nearest(const float *table, float v)
{
    int lo = 0, hi = CODE_SIZE - 1;
    while (hi - lo > 1) { /* invariant: the answer is in [lo, hi] */
        int mid = (lo + hi) / 2;
        if (table[mid] <= v)
            lo = mid;
        else
            hi = mid;
    }
    return (fabsf(v - table[lo]) <= fabsf(table[hi] - v)) ? (uint8_t)lo : (uint8_t)hi;
}

void quantlib_quantize_blockwise(const float *A, const float *code, int64_t code_numel,
                                 uint8_t *out, float *absmax, int64_t n, int64_t blocksize)
{
    float table[CODE_SIZE];
    load_table(table, code, code_numel);
    for (int64_t start = 0; start < n; start += blocksize) {
        int64_t end = (n - start < blocksize) ? n : start + blocksize;
        float m = 0.0f;
        for (int64_t i = start; i < end; i++) {
            float a = fabsf(A[i]);
            if (a > m)
                m = a;
        }
        absmax[start / blocksize] = m;
        for (int64_t i = start; i < end; i++)
            out[i] = nearest(table, m > 0.0f ? A[i] / m : 0.0f);
    }
}

void quantlib_dequantize_blockwise(const uint8_t *A, const float *absmax, const float *code,
                                   int64_t code_numel, float *out, int64_t n, int64_t blocksize)
{
    float table[CODE_SIZE];
    load_table(table, code, code_numel);
    for (int64_t i = 0; i < n; i++)
        out[i] = table[A[i]] * absmax[i / blocksize];
}
