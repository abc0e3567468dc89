// backends.h - pick a backend through the registry of every backend compiled in (cpu,
// vulkan, cuda, ...), and list the devices.
#pragma once

#include "tessera/backend.h"
#include "tessera-cpu.h"

#include <cstdio>
#include <string>

namespace trun {

// The registry's name for device `device` of backend kind `name`: "<Kind><index>"
// ("Vulkan1", "CUDA0"), or the name as given for a device name, for no index (-1: the
// kind's first device, for Vulkan the default one) and for the CPU (one device; --device
// does not apply to it).
inline std::string device_name(const std::string & name, int device) {
    tsr_backend_reg_t reg = tsr_backend_reg_by_name(name.c_str());
    if (!reg || device < 0 || reg == tsr_backend_cpu_reg()) return name;
    return std::string(tsr_backend_reg_name(reg)) + std::to_string(device);
}

// NULL + err when no such backend or device is built in, or it fails to start. A CUDA
// backend replays captured CUDA graphs: the decode graphs repeat (graph.h), and a replay
// saves the launch of every kernel of every token.
inline tsr_backend_t make_backend(const std::string & name, int device, int threads, std::string & err) {
    const std::string dev = device_name(name, device);
    tsr_backend_reg_t reg = tsr_backend_reg_by_name(name.c_str());
    if (!reg) {   // a device name ("CUDA1"): its kind
        tsr_backend_dev_t d = tsr_backend_dev_by_name(dev.c_str());
        reg = d ? tsr_backend_dev_backend_reg(d) : nullptr;
    }
    std::string params;
    if (threads > 0 && reg == tsr_backend_cpu_reg()) params = "n_threads=" + std::to_string(threads);
    if (reg && std::string(tsr_backend_reg_name(reg)) == "CUDA") params = "graph_capture=1";
    tsr_backend_t b = tsr_backend_init_by_name(dev.c_str(), params.c_str());
    if (!b) err = "cannot start the backend '" + dev + "': " + tsr_last_error();
    return b;
}

// llama.cpp's --list-devices: one line per device.
inline void list_devices(FILE * out) {
    const size_t n = tsr_backend_dev_count();
    fprintf(out, "Available devices (%zu):\n", n);
    for (size_t i = 0; i < n; ++i) {
        tsr_backend_dev_t dev = tsr_backend_dev_get(i);
        size_t free_b = 0, total_b = 0;
        tsr_backend_dev_memory(dev, &free_b, &total_b);
        const char * type = tsr_backend_dev_type(dev) == TSR_BACKEND_DEVICE_TYPE_GPU ? "GPU" :
                            tsr_backend_dev_type(dev) == TSR_BACKEND_DEVICE_TYPE_ACCEL ? "ACCEL" : "CPU";
        fprintf(out, "  %s: %s (%zu MiB, %zu MiB free) [%s, backend %s]\n", tsr_backend_dev_name(dev),
                tsr_backend_dev_description(dev), total_b >> 20, free_b >> 20, type,
                tsr_backend_reg_name(tsr_backend_dev_backend_reg(dev)));
    }
}

} // namespace trun
