#!/usr/bin/env python3
"""llamacpp_quantize.py - quantize a GGUF file with llama.cpp's own quantizer.

    llamacpp_quantize.py LIBDIR SRC.gguf DST.gguf FTYPE

LIBDIR holds llama.cpp's shared libraries (node-llama-cpp's prebuilt ones: libllama*.so and
the libggml*.so it loads); FTYPE is a llama_ftype name as llama-quantize takes it (Q4_K_M,
IQ4_NL, ...). Calls llama_model_quantize, what llama-quantize runs, through ctypes: only
the first two fields of llama_model_quantize_params (nthread, ftype) are set, the rest stay
llama.cpp's defaults. Used by scripts/llamacpp-quant-check.sh.
"""
import ctypes
import glob
import os
import sys

# enum llama_ftype (llama.h)
FTYPES = {
    "F32": 0, "F16": 1, "Q4_0": 2, "Q4_1": 3, "Q8_0": 7, "Q5_0": 8, "Q5_1": 9,
    "Q2_K": 10, "Q3_K_S": 11, "Q3_K_M": 12, "Q3_K_L": 13, "Q4_K_S": 14, "Q4_K_M": 15,
    "Q5_K_S": 16, "Q5_K_M": 17, "Q6_K": 18, "IQ4_NL": 25, "BF16": 32,
}


class QuantizeParams(ctypes.Structure):
    # nthread and ftype lead the struct; the tail is room for the fields after them (the
    # callee writes its whole struct into it, whatever this llama.cpp version's size)
    _fields_ = [("nthread", ctypes.c_int32), ("ftype", ctypes.c_int32), ("rest", ctypes.c_uint8 * 1024)]


def main():
    if len(sys.argv) != 5 or sys.argv[4] not in FTYPES:
        sys.exit("usage: llamacpp_quantize.py LIBDIR SRC.gguf DST.gguf {%s}" % ",".join(FTYPES))
    libdir, src, dst, ftype = sys.argv[1:]
    libs = sorted(glob.glob(os.path.join(libdir, "libllama*.so")))
    if not libs:
        sys.exit("no libllama*.so in " + libdir)
    lib = ctypes.CDLL(libs[0])
    lib.llama_model_quantize_default_params.restype = QuantizeParams
    lib.llama_model_quantize.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(QuantizeParams)]
    lib.llama_model_quantize.restype = ctypes.c_uint32
    lib.llama_backend_init()
    params = lib.llama_model_quantize_default_params()
    params.nthread = 2
    params.ftype = FTYPES[ftype]
    if lib.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(params)) != 0:
        sys.exit("llama_model_quantize failed: %s -> %s (%s)" % (src, dst, ftype))


if __name__ == "__main__":
    main()
