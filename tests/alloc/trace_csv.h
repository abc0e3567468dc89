// Reads an allocation trace (id,lower,upper,size; one header line) into pack items.
// Shared by tests/alloc and tests/bench/alloc_bench. An unreadable file gives no items.
#ifndef TSR_TESTS_TRACE_CSV_H
#define TSR_TESTS_TRACE_CSV_H

#include "tessera/alloc.h"

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

inline std::vector<tsr_pack_item> tsr_read_trace_csv(const std::string & path) {
    std::vector<tsr_pack_item> v;
    std::ifstream f(path);
    std::string line;
    if (!std::getline(f, line)) return v;
    while (std::getline(f, line)) {
        long long id, lo, up;
        unsigned long long sz;
        if (std::sscanf(line.c_str(), "%lld,%lld,%lld,%llu", &id, &lo, &up, &sz) == 4) v.push_back({lo, up, (size_t) sz, 0});
    }
    return v;
}

#endif
