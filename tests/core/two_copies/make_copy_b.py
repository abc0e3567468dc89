#!/usr/bin/env python3
"""Make copy B of tessera for the two-copies test: the committed single header with an
internal struct changed (its layout differs from copy A's), as a second vendored copy of
another version would. CMake and meson both run it: make_copy_b.py SINGLE_HEADER OUT."""
import sys

src, out = sys.argv[1], sys.argv[2]
with open(src, encoding="utf-8") as f:
    text = f.read()
for s in ("struct gallocr {", "struct gguf_ctx {", "struct pool_allocator {"):
    if s not in text:
        sys.exit(f"make_copy_b: '{s}' not found in {src}")
    text = text.replace(s, s + "\n    char copy_b_changed_layout[136] = {};")
with open(out, "w", encoding="utf-8") as f:
    f.write(text)
