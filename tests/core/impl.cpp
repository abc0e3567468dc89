// The one translation unit of test_core that compiles tessera's implementation.
#define TSR_IMPLEMENTATION
#include "tessera/tessera.h"
