/*
 * ptxcheck_sim.cpp — the ptxcheck kernels under the host SIMT harness
 * (g++ -std=c++17 -DNI_SIMT -I kernels/cuda -I kernels): the PTX emulations
 * of simt.cpp. Interface: ptxcheck.h, prefix ptxc_sim_.
 */
#include "ptxcheck_kernels.cuh"

#include <string>

namespace {

thread_local std::string g_err;

int fail(const std::string &what) {
    g_err = what;
    return 1;
}

/* A guard-paged device copy of a host buffer (or a zeroed one for outputs). */
struct Buf {
    void *p = nullptr;
    size_t n = 0;
    Buf(size_t bytes, const char *name, const void *init = nullptr) : n(bytes) {
        p = simt::device_malloc(bytes, name);
        if (p && init) memcpy(p, init, bytes);
    }
    ~Buf() {
        if (p) simt::device_free(p);
    }
    Buf(const Buf &) = delete;
    Buf &operator=(const Buf &) = delete;
    template <class T> T *as() const { return static_cast<T *>(p); }
};

bool all_ok(std::initializer_list<const Buf *> bs) {
    for (const Buf *b : bs)
        if (!b->p) return false;
    return true;
}

} // namespace

extern "C" {

const char *ptxc_sim_error(void) { return g_err.c_str(); }

int ptxc_sim_mma_frag(int ntiles, const uint32_t *a, const uint32_t *b, const float *c, float *d) {
    const size_t n = (size_t)ntiles * 32;
    Buf da(n * 16, "mma_frag.a", a), db(n * 8, "mma_frag.b", b), dc(n * 16, "mma_frag.c", c), dd(n * 16, "mma_frag.d");
    if (!all_ok({&da, &db, &dc, &dd})) return fail("device_malloc failed");
    if (simt::launch("ptxc_k_mma_frag", dim3(ntiles), dim3(32), 0, ptxc_k_mma_frag, da.as<const uint32_t>(),
                     db.as<const uint32_t>(), dc.as<const float>(), dd.as<float>()))
        return fail(simt::last_error());
    memcpy(d, dd.p, n * 16);
    return 0;
}

int ptxc_sim_mma_ldm(int ntiles, int mode, const uint16_t *A, const uint16_t *B, const float *C, float *D) {
    const size_t n = (size_t)ntiles * 256;
    Buf dA(n * 2, "mma_ldm.A", A), dB(n * 2, "mma_ldm.B", B), dC(n * 4, "mma_ldm.C", C), dD(n * 4, "mma_ldm.D");
    if (!all_ok({&dA, &dB, &dC, &dD})) return fail("device_malloc failed");
    if (simt::launch("ptxc_k_mma_ldm", dim3(ntiles), dim3(32), 0, ptxc_k_mma_ldm, mode, dA.as<const uint16_t>(),
                     dB.as<const uint16_t>(), dC.as<const float>(), dD.as<float>()))
        return fail(simt::last_error());
    memcpy(D, dD.p, n * 4);
    return 0;
}

int ptxc_sim_ldm_raw(int ntiles, const uint16_t *tiles, const int32_t *rowsel, uint32_t *out) {
    const size_t nt = (size_t)ntiles;
    Buf dt(nt * 512 * 2, "ldm_raw.tiles", tiles), dr(nt * 32 * 4, "ldm_raw.rowsel", rowsel),
        dout(nt * 4 * 32 * 4 * 4, "ldm_raw.out");
    if (!all_ok({&dt, &dr, &dout})) return fail("device_malloc failed");
    if (simt::launch("ptxc_k_ldm_raw", dim3(ntiles), dim3(32), 0, ptxc_k_ldm_raw, dt.as<const uint16_t>(),
                     dr.as<const int32_t>(), dout.as<uint32_t>()))
        return fail(simt::last_error());
    memcpy(out, dout.p, dout.n);
    return 0;
}

int ptxc_sim_cp_async(int nblocks, const uint8_t *src, size_t src_bytes, const int32_t *off, const int32_t *sz,
                      uint8_t *out) {
    const size_t nc = (size_t)nblocks * PTXC_CP_COPIES * PTXC_CP_THREADS;
    Buf ds(src_bytes, "cp_async.src", src), doff(nc * 4, "cp_async.off", off), dsz(nc * 4, "cp_async.sz", sz),
        dout((size_t)nblocks * PTXC_CP_OUT_BYTES, "cp_async.out");
    if (!all_ok({&ds, &doff, &dsz, &dout})) return fail("device_malloc failed");
    if (simt::launch("ptxc_k_cp_async", dim3(nblocks), dim3(PTXC_CP_THREADS), 0, ptxc_k_cp_async,
                     ds.as<const uint8_t>(), doff.as<const int32_t>(), dsz.as<const int32_t>(), dout.as<uint8_t>()))
        return fail(simt::last_error());
    memcpy(out, dout.p, dout.n);
    return 0;
}

} // extern "C"
