/*
 * minitest.h — the tiny test framework of the harness's own C++ tests
 * (simt_test.cpp, tcmodel_test.cpp): CHECK(cond, fmt, ...) inside a
 * bool test() records the first failure reason and returns false; run()
 * prints PASS/FAIL per test and counts them for the closing
 * "N passed, M failed" line.
 */
#ifndef NI_SIMT_MINITEST_H
#define NI_SIMT_MINITEST_H

#include <stdarg.h>
#include <stdio.h>

#include <string>

static int g_pass, g_fail;
static std::string g_why;

static void why(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void why(const char *fmt, ...) {
    if (!g_why.empty()) return; /* keep the first reason */
    char b[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b, sizeof b, fmt, ap);
    va_end(ap);
    g_why = b;
}
#define CHECK(c, ...)                                                                                                 \
    do {                                                                                                              \
        if (!(c)) {                                                                                                   \
            why(__VA_ARGS__);                                                                                         \
            return false;                                                                                             \
        }                                                                                                             \
    } while (0)

static void run(const char *name, bool (*fn)()) {
    g_why.clear();
    bool ok = fn();
    if (ok) {
        g_pass++;
        printf("PASS %s\n", name);
    } else {
        g_fail++;
        printf("FAIL %s: %s\n", name, g_why.c_str());
    }
    fflush(stdout);
}

#endif
