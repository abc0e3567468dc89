// The one translation unit of test_alloc that compiles tessera's implementation.
#define TSR_IMPLEMENTATION
#include "tessera/tessera.h"
#include "tessera/backend.h"
#include "tessera/alloc.h"
