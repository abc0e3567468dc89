// The one translation unit that compiles tessera's implementation for the C example.
#define TSR_IMPLEMENTATION
#include "tessera/tessera.h"
#include "tessera/backend.h"
#include "tessera/alloc.h"
#include "tessera-cpu.h"
