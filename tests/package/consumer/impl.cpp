// The one C++17 file of the C consumer that compiles tessera's implementation.
#define TSR_IMPLEMENTATION
#include <tessera/tessera.h>
#include <tessera/backend.h>
#include <tessera/alloc.h>
#include <tessera-cpu.h>
