// Two TSR_STATIC copies of tessera (copy.cpp compiled as copy A and as a changed copy B) in
// one binary: each must run correctly, interleaved, as if the other were not there.
#include <cstdio>

extern "C" int two_copies_run_a(int seed);
extern "C" int two_copies_run_b(int seed);

int main() {
    int failures = 0;
    for (int round = 0; round < 3; round++) {
        failures += two_copies_run_a(round);
        failures += two_copies_run_b(round + 5);
    }
    std::printf("two copies: %s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
