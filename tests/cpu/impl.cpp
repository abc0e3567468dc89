// The one translation unit of test_cpu that compiles tessera's implementation.
#define TSR_IMPLEMENTATION
#include "tessera/tessera.h"
#include "tessera/backend.h"
#include "tessera/alloc.h"
#include "tessera-cpu.h"
