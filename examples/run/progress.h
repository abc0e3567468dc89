// progress.h - the weights-loading progress display: a bar with bytes and MiB/s when
// stderr is a terminal, plain lines every 25% otherwise.
#pragma once

#include <chrono>
#include <cstdio>

#ifdef _WIN32
#include <io.h>
#define TRUN_ISATTY(fd) _isatty(fd)
#define TRUN_FILENO(f) _fileno(f)
#else
#include <unistd.h>
#define TRUN_ISATTY(fd) isatty(fd)
#define TRUN_FILENO(f) fileno(f)
#endif

namespace trun {

struct progress {
    bool tty = TRUN_ISATTY(TRUN_FILENO(stderr)) != 0;
    std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
    int last_quarter = -1;
    double last_draw = -1.0;
    double seconds = 0.0;

    static bool callback(size_t done, size_t total, void * user) {
        static_cast<progress *>(user)->update(done, total);
        return true;
    }

    void update(size_t done, size_t total) {
        const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        seconds = t;
        const double mib = (double) done / (1024.0 * 1024.0), tot = (double) total / (1024.0 * 1024.0);
        const double rate = t > 0 ? mib / t : 0.0;
        const double frac = total ? (double) done / (double) total : 1.0;
        if (tty) {
            if (done != total && t - last_draw < 0.05) return;  // at most 20 redraws a second
            last_draw = t;
            char bar[31];
            const int fill = (int) (frac * 30);
            for (int i = 0; i < 30; ++i) bar[i] = i < fill ? '#' : '-';
            bar[30] = 0;
            fprintf(stderr, "\rloading weights [%s] %8.1f / %.1f MiB  %7.1f MiB/s", bar, mib, tot, rate);
            if (done == total) fprintf(stderr, "\n");
            fflush(stderr);
        } else {
            const int q = (int) (frac * 4);
            if (q != last_quarter) {
                last_quarter = q;
                fprintf(stderr, "loading weights: %.1f / %.1f MiB (%d%%), %.1f MiB/s\n", mib, tot, q * 25, rate);
            }
        }
    }
};

} // namespace trun
