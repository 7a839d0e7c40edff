/*
 * Hadoop's 32-bit Murmur hash chains of record keys, for Hudi's bloom filter
 * (tidemark/format/murmur.py loads this with ctypes; tidemark/format/bloom.py states the hash).
 *
 * Keys of one byte length are hashed side by side in chunks of CHUNK keys: each key's 4-byte
 * blocks and tail are mixed once (they do not depend on the seed), then each hash of the chain
 * runs one step at a time over the chunk, in loops the compiler vectorises. Arithmetic is
 * uint32, as Java's int wraps; the tail bytes are Java's signed bytes, the first the highest
 * (Hadoop's MurmurHash.hash). Bit positions are Java's Math.abs(h % size).
 *
 * The functions use no Python API (ctypes calls them without the GIL): they take the key
 * buffers of an Arrow string array (offsets as int64) and write into numpy arrays the caller
 * owns; they hold no state. A placement sets bits in place (a read, an or and a store per bit),
 * so two calls at once must place into different arrays (bloom.py gives each its own and ors it
 * in). The module itself is empty: importing it tells where its file is.
 *
 * Beside them, base64 as Hudi's footers carry a filter (padded, no line breaks): a rewrite of a
 * small file decodes its stored filter and encodes the new one, ~100 KB each, and binascii holds
 * the GIL while it does (the other writing threads then wait).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

#define CHUNK 1024
#define M 0x5bd1e995u

#if defined(_WIN32)
#define EXPORT __declspec(dllexport)
#else
#define EXPORT __attribute__((visibility("default")))
#endif

/* The two kernels are built twice on x86 with GCC, for AVX2 (eight keys per vector multiply;
 * SSE2 has no 32-bit one) and for any x86-64, and the loader picks the one the CPU runs
 * (target_clones): the same filters, a third less time for UUIDs. The helpers are inlined into
 * each build. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define KERNEL __attribute__((target_clones("avx2", "default")))
#define HELPER static inline __attribute__((always_inline))
#else
#define KERNEL
#define HELPER static inline
#endif

/* The calling convention below; murmur.py refuses a library built from another one (an editable
 * install rebuilds this file only when pip install -e . runs again). */
EXPORT int tidemark_murmur_abi(void) { return 4; }

static int64_t key_at(const int64_t *order, int64_t position) {
    return order ? order[position] : position;
}

/* From position first in order: the byte length of its key, and how many keys in a row (at most
 * a chunk) share it. */
static int64_t run_of(const int64_t *offsets, const int64_t *order, int64_t first, int64_t total,
                      int64_t *length) {
    int64_t key = key_at(order, first), end = first + 1;
    *length = offsets[key + 1] - offsets[key];
    while (end < total && end - first < CHUNK) {
        int64_t other = key_at(order, end);
        if (offsets[other + 1] - offsets[other] != *length) break;
        end++;
    }
    return end - first;
}

HELPER void mix_keys(const int64_t *offsets, const uint8_t *data, const int64_t *order, int64_t first,
                     int64_t n, int64_t length, uint32_t *blocks, uint32_t *tail) {
    int64_t count = length >> 2, left = length & 3;
    for (int64_t j = 0; j < n; j++) {
        const uint8_t *key = data + offsets[key_at(order, first + j)];
        for (int64_t b = 0; b < count; b++) {
            const uint8_t *p = key + 4 * b;
            uint32_t k = (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
            k *= M;
            k ^= k >> 24;
            blocks[b * CHUNK + j] = k * M;
        }
        uint32_t t = 0;
        for (int64_t q = 0; q < left; q++)
            t ^= (uint32_t)(int32_t)(int8_t)key[4 * count + q] << (8 * (left - 1 - q));
        tail[j] = t;
    }
}

HELPER void next_hashes(uint32_t *restrict h, int64_t n, int64_t length, const uint32_t *restrict blocks,
                        const uint32_t *restrict tail) {
    int64_t count = length >> 2;
    uint32_t size = (uint32_t)length;
    for (int64_t j = 0; j < n; j++) h[j] ^= size;
    for (int64_t b = 0; b < count; b++) {
        const uint32_t *k = blocks + b * CHUNK;
        for (int64_t j = 0; j < n; j++) h[j] = (h[j] * M) ^ k[j];
    }
    if (length & 3)
        for (int64_t j = 0; j < n; j++) h[j] = (h[j] ^ tail[j]) * M;
    for (int64_t j = 0; j < n; j++) {
        uint32_t x = h[j];
        x ^= x >> 13;
        x *= M;
        h[j] = x ^ (x >> 15);
    }
}

/* Java's Math.abs(h % size) for the hash h: a % size from a multiply by the inverse (off by at
 * most one, corrected), no integer division per hash. */
HELPER int64_t position(uint32_t h, int64_t size, double inverse) {
    int64_t a = (int64_t)(int32_t)h;
    if (a < 0) a = -a;
    int64_t r = a - (int64_t)((double)a * inverse) * size;
    if (r < 0) r += size; else if (r >= size) r -= size;
    return r;
}

static int64_t longest_key(const int64_t *offsets, int64_t total) {
    int64_t longest = 0;
    for (int64_t i = 0; i < total; i++)
        if (offsets[i + 1] - offsets[i] > longest) longest = offsets[i + 1] - offsets[i];
    return longest;
}

/* Set each key's hashes bits in row rows[key] of bits, rows of size bits: packed as Hudi stores
 * them ((size + 7) / 8 bytes each, bit i at byte i / 8, mask 1 << (i % 8)), or with packed 0 one
 * byte per bit (size bytes each: a store per bit, no read; faster where most bytes of a row get
 * a bit). order: the keys by byte length, or NULL when they share one. Returns 0, or -1 if out
 * of memory. */
EXPORT KERNEL int tidemark_bloom_place(const int64_t *offsets, const uint8_t *data, const int64_t *order, int64_t total,
                                const int64_t *rows, uint8_t *bits, int64_t size, int32_t hashes,
                                int32_t packed) {
    uint32_t *blocks = malloc(sizeof(uint32_t) * CHUNK * ((longest_key(offsets, total) >> 2) + 1));
    uint32_t *scratch = malloc(sizeof(uint32_t) * CHUNK * 2);
    int64_t *where = malloc(sizeof(int64_t) * CHUNK);
    if (!blocks || !scratch || !where) {
        free(blocks), free(scratch), free(where);
        return -1;
    }
    uint32_t *tail = scratch, *h = scratch + CHUNK;
    double inverse = 1.0 / (double)size;
    int64_t row_bits = packed ? ((size + 7) >> 3) * 8 : size;
    for (int64_t first = 0; first < total;) {
        int64_t length, n = run_of(offsets, order, first, total, &length);
        mix_keys(offsets, data, order, first, n, length, blocks, tail);
        for (int64_t j = 0; j < n; j++) {
            h[j] = 0;
            where[j] = rows[key_at(order, first + j)] * row_bits;
        }
        for (int32_t i = 0; i < hashes; i++) {
            next_hashes(h, n, length, blocks, tail);
            if (packed)
                for (int64_t j = 0; j < n; j++) {
                    int64_t b = where[j] + position(h[j], size, inverse);
                    bits[b >> 3] |= (uint8_t)(1u << (b & 7));
                }
            else
                for (int64_t j = 0; j < n; j++) bits[where[j] + position(h[j], size, inverse)] = 1;
        }
        first += n;
    }
    free(blocks), free(scratch), free(where);
    return 0;
}

/* The first count hashes of each key's chain: out[key * count + i]. Returns 0, or -1 if out of memory. */
EXPORT KERNEL int tidemark_hash_chains(const int64_t *offsets, const uint8_t *data, const int64_t *order, int64_t total,
                                uint32_t *out, int32_t count) {
    uint32_t *blocks = malloc(sizeof(uint32_t) * CHUNK * ((longest_key(offsets, total) >> 2) + 1));
    uint32_t *scratch = malloc(sizeof(uint32_t) * CHUNK * 2);
    if (!blocks || !scratch) {
        free(blocks), free(scratch);
        return -1;
    }
    uint32_t *tail = scratch, *h = scratch + CHUNK;
    for (int64_t first = 0; first < total;) {
        int64_t length, n = run_of(offsets, order, first, total, &length);
        mix_keys(offsets, data, order, first, n, length, blocks, tail);
        for (int64_t j = 0; j < n; j++) h[j] = 0;
        for (int32_t i = 0; i < count; i++) {
            next_hashes(h, n, length, blocks, tail);
            for (int64_t j = 0; j < n; j++) out[key_at(order, first + j) * count + i] = h[j];
        }
        first += n;
    }
    free(blocks), free(scratch);
    return 0;
}

/* Base64 (RFC 4648's alphabet, padded) of n bytes into out (4 * ceil(n / 3) chars); returns that length. */
EXPORT int64_t tidemark_base64_encode(const uint8_t *in, int64_t n, char *out) {
    static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    int64_t i = 0, o = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = ((uint32_t)in[i] << 16) | ((uint32_t)in[i + 1] << 8) | in[i + 2];
        out[o++] = alphabet[v >> 18], out[o++] = alphabet[(v >> 12) & 63];
        out[o++] = alphabet[(v >> 6) & 63], out[o++] = alphabet[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)in[i] << 16;
        out[o++] = alphabet[v >> 18], out[o++] = alphabet[(v >> 12) & 63], out[o++] = '=', out[o++] = '=';
    } else if (n - i == 2) {
        uint32_t v = ((uint32_t)in[i] << 16) | ((uint32_t)in[i + 1] << 8);
        out[o++] = alphabet[v >> 18], out[o++] = alphabet[(v >> 12) & 63], out[o++] = alphabet[(v >> 6) & 63];
        out[o++] = '=';
    }
    return o;
}

/* The bytes of n chars of padded base64 into out (at most 3 * n / 4 bytes); returns their number,
 * or -1 for text that is not that: a length not a multiple of four, a char outside the alphabet,
 * padding but at the end (the caller lets binascii say what is wrong). */
EXPORT int64_t tidemark_base64_decode(const char *in, int64_t n, uint8_t *out) {
    int8_t value[256];
    for (int c = 0; c < 256; c++) value[c] = -1;
    for (int c = 'A'; c <= 'Z'; c++) value[c] = (int8_t)(c - 'A');
    for (int c = 'a'; c <= 'z'; c++) value[c] = (int8_t)(c - 'a' + 26);
    for (int c = '0'; c <= '9'; c++) value[c] = (int8_t)(c - '0' + 52);
    value['+'] = 62, value['/'] = 63;
    if (n % 4 != 0) return -1;
    int64_t pad = n == 0 ? 0 : (in[n - 1] == '=') + (n >= 2 && in[n - 1] == '=' && in[n - 2] == '=');
    int64_t o = 0;
    for (int64_t i = 0; i < n; i += 4) {
        int last = i + 4 == n;
        int8_t a = value[(uint8_t)in[i]], b = value[(uint8_t)in[i + 1]];
        int8_t c = last && pad == 2 ? 0 : value[(uint8_t)in[i + 2]];
        int8_t d = last && pad >= 1 ? 0 : value[(uint8_t)in[i + 3]];
        if ((a | b | c | d) < 0) return -1;
        uint32_t v = ((uint32_t)a << 18) | ((uint32_t)b << 12) | ((uint32_t)c << 6) | (uint32_t)d;
        out[o++] = (uint8_t)(v >> 16);
        if (!(last && pad == 2)) out[o++] = (uint8_t)(v >> 8);
        if (!(last && pad >= 1)) out[o++] = (uint8_t)v;
    }
    return o;
}

static struct PyModuleDef murmur_module = {
    PyModuleDef_HEAD_INIT, "_murmur", "Hadoop's Murmur hash chains for Hudi's bloom filter (called with ctypes).", -1, NULL,
};

PyMODINIT_FUNC PyInit__murmur(void) { return PyModule_Create(&murmur_module); }
