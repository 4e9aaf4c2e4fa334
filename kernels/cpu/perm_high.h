/* q5/q6 high bits of one 64-value group in the permuted lane order, with
 * AVX-512 VBMI (vpmultishiftqb) instead of BMI2 pext.
 *
 * The permuted order (avx2.c q8p, avx512.c perm) puts lane L(p) of a group
 * in byte p of a zmm: L(p) = 2p for p < 32 (even lanes), 2(p − 32) + 1 for
 * p ≥ 32 (odd lanes). The stored high planes are unchanged (ninfer-format):
 *   q5: 8 bytes, bit L of the little-endian word = bit 4 of lane L's code;
 *   q6: 16 bytes, bits 2L, 2L + 1 of the little-endian 128-bit value = bits
 *       4, 5 of lane L's code (qword L / 32, bit 2 (L mod 32)).
 * vpmultishiftqb gives byte p the 8 bits of its source qword that start at
 * ctrl[p] (rotating mod 64); with ctrl[p] = (bit of lane L(p)) − 4 the lane's
 * high bits land at bits 4 (q5) or 4–5 (q6) of byte p, and one vpternlogd
 * ORs them (masked) into the low nibbles. Three or four vector instructions
 * per group against eight pext, shifts and mask moves through the scalar
 * unit; the codes are the same bytes, so results are bit-identical. */
#ifndef NI_PERM_HIGH_H
#define NI_PERM_HIGH_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

static const uint8_t ni_perm_ctrl5[64] __attribute__((aligned(64))) = {
    60, 62, 0,  2,  4,  6,  8,  10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34, 36, 38,
    40, 42, 44, 46, 48, 50, 52, 54, 56, 58, 61, 63, 1,  3,  5,  7,  9,  11, 13, 15, 17, 19,
    21, 23, 25, 27, 29, 31, 33, 35, 37, 39, 41, 43, 45, 47, 49, 51, 53, 55, 57, 59};
static const uint8_t ni_perm_ctrl6[64] __attribute__((aligned(64))) = {
    60, 0,  4,  8,  12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60, 0,  4,  8,  12, 16,
    20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 62, 2,  6,  10, 14, 18, 22, 26, 30, 34, 38, 42,
    46, 50, 54, 58, 62, 2,  6,  10, 14, 18, 22, 26, 30, 34, 38, 42, 46, 50, 54, 58};

/* wv (low nibbles of the permuted lanes, high bits clear) with the q5/q6
 * high bits of the group whose high plane starts at hp ORed in. */
static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vbmi"))) __m512i
ni_perm_or_high_vbmi(const int bits, __m512i wv, const uint8_t *hp) {
    if (bits == 5) {
        uint64_t h;
        memcpy(&h, hp, 8);
        __m512i t = _mm512_multishift_epi64_epi8(_mm512_load_si512((const void *)ni_perm_ctrl5), _mm512_set1_epi64((long long)h));
        return _mm512_ternarylogic_epi32(wv, t, _mm512_set1_epi8(0x10), 0xF8); /* wv | (t & 0x10) */
    }
    /* q6: source qword of zmm qword q is lanes 0–31 (qword 0) for q = 0, 1, 4, 5 and lanes 32–63 for q = 2, 3, 6, 7 */
    __m512i src = _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 0, 1, 1, 0, 0, 1, 1),
                                           _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)hp)));
    __m512i t = _mm512_multishift_epi64_epi8(_mm512_load_si512((const void *)ni_perm_ctrl6), src);
    return _mm512_ternarylogic_epi32(wv, t, _mm512_set1_epi8(0x30), 0xF8); /* wv | (t & 0x30) */
}

#endif
