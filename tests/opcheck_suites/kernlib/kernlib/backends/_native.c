/* kernlib's C kernels, compiled at import by kernlib/backends/cpu.py and called
 * through ctypes on contiguous buffers the Python wrappers hand over -- except
 * where a wrapper forgets to (row_sums: the bug planted in this fixture).
 *
 * Like real op libraries, the kernels trust their contract and check nothing:
 *  - absmax has exactly ceil(n / blocksize) entries (one scale per block);
 *  - `offset` and `offset_scale` come together: a compressed absmax is stored
 *    relative to offset[0] in units of offset_scale[0], and the kernel reads
 *    both whenever `offset` is given (a missing offset_scale is a NULL read).
 * A wrong absmax length in a real library reads past the buffer, which crashes
 * only sometimes; here it is made certain (this file is a test fixture):
 * scales_for() hands the buffer back only for the length the kernel was
 * written for, and NULL otherwise, and the kernel reads block 0's scale first.
 */
#include <stddef.h>
#include <stdint.h>

static const float *scales_for(const float *absmax, int64_t len, int64_t blocks) {
    return len == blocks ? absmax : NULL;
}

/* out[i] = (A[i] - 128) / 127 * scale(i / blocksize), for i < n_out (<= n). */
void kernlib_dequant(const uint8_t *A, const float *absmax, int64_t absmax_len, const float *offset,
                     const float *offset_scale, float *out, int64_t n, int64_t n_out, int64_t blocksize) {
    int64_t blocks = (n + blocksize - 1) / blocksize;
    const float *volatile scales = scales_for(absmax, absmax_len, blocks);
    float base = 0.0f, unit = 1.0f;
    if (offset != NULL) {
        base = offset[0];
        unit = offset_scale[0];
    }
    if (n == 0)
        return;
    volatile float first = scales[0];
    (void)first;
    for (int64_t i = 0; i < n_out; i++) {
        float scale = base + unit * scales[i / blocksize];
        out[i] = ((float)A[i] - 128.0f) / 127.0f * scale;
    }
}

/* out[r] = sum_c x[r, c] for a row-major [rows, cols] buffer. */
void kernlib_row_sums(const float *x, int64_t rows, int64_t cols, float *out) {
    for (int64_t r = 0; r < rows; r++) {
        float s = 0.0f;
        for (int64_t c = 0; c < cols; c++)
            s += x[r * cols + c];
        out[r] = s;
    }
}
