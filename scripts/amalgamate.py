#!/usr/bin/env python3
"""Write tessera's single-header amalgamations from the file list in scripts/sources.txt:

  include/single/tessera.h         the core (tessera.h, backend.h, alloc.h, gguf.h, sched.h) + the CPU backend
  include/single/tessera-vulkan.h  the Vulkan backend (includes "tessera.h" beside it)

Usage: scripts/amalgamate.py [--check] [OUT_DIR]   (default OUT_DIR: include/single)
--check compares instead of writing and fails when a committed file is stale.

Each output is every public header of its parts, with the implementation files inlined
where the headers include them. Use it like the headers it is made of: include it
anywhere; in one C++17 file define TSR_IMPLEMENTATION before (or include it again after
defining it). Generated: never edit by hand."""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
OUTPUTS = {"tessera.h": ["core", "cpu"], "tessera-vulkan.h": ["vulkan"]}
# the other single file a part's includes of foreign parts become
FOREIGN = {"core": "tessera.h", "cpu": "tessera.h", "vulkan": "tessera-vulkan.h", "cuda": None}


def read_sources():
    parts = {}
    with open(os.path.join(ROOT, "scripts", "sources.txt"), encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].split()
            if len(line) == 3:
                part, kind, path = line
                parts.setdefault(part, []).append((kind, os.path.normpath(os.path.join(ROOT, path))))
    return parts


def resolve(name, here, search):
    for d in [here] + search:
        p = os.path.normpath(os.path.join(d, name))
        if os.path.isfile(p):
            return p
    return None


def amalgamate(out_name, parts, all_parts):
    owner = {p: part for part, files in all_parts.items() for _, p in files}
    mine = {p for part in parts for _, p in all_parts[part]}
    search = [os.path.join(ROOT, "include")] + [os.path.join(ROOT, "backends", b) for b in ("cpu", "vulkan", "cuda")]
    catch_up = os.path.join(ROOT, "include", "tessera", "impl", "implement_included.h")
    seen, out = set(), []

    def emit(path):
        seen.add(path)
        out.append(f"/* ---- {os.path.relpath(path, ROOT)} ---- */\n")
        with open(path, encoding="utf-8") as f:
            for line in f:
                m = INCLUDE.match(line)
                target = resolve(m.group(1), os.path.dirname(path), search) if m else None
                if target is None:
                    out.append(line)
                elif target == catch_up:
                    continue  # one file holds every part of this output; the end adds the rest
                elif target in mine:
                    if target not in seen:
                        emit(target)
                else:
                    single = FOREIGN.get(owner.get(target))
                    if single and single != out_name:
                        out.append(f'#include "{single}"\n')
        if not out[-1].endswith("\n"):
            out.append("\n")

    out.append(f"/* tessera single-header amalgamation ({' + '.join(parts)}), generated from scripts/sources.txt\n"
               " * by scripts/amalgamate.py: do not edit. */\n")
    for part in parts:
        for kind, path in all_parts[part]:
            if kind == "header" and path not in seen:
                emit(path)
    if out_name == "tessera.h":
        out.append("""/* ---- parts included before TSR_IMPLEMENTATION (see tessera/impl/implement_included.h) ---- */
#if defined(TSR_IMPLEMENTATION) && defined(TSR_VULKAN_DECLARED) && !defined(TSR_VULKAN_IMPLEMENTED)
#include "tessera-vulkan.h"
#endif
""")
    return "".join(out)


def main():
    args = [a for a in sys.argv[1:] if a != "--check"]
    check = "--check" in sys.argv[1:]
    out_dir = args[0] if args else os.path.join(ROOT, "include", "single")
    all_parts = read_sources()
    stale = []
    for name, parts in OUTPUTS.items():
        text = amalgamate(name, parts, all_parts)
        path = os.path.join(out_dir, name)
        if check:
            try:
                with open(path, encoding="utf-8") as f:
                    current = f.read()
            except OSError:
                current = None
            if current != text:
                stale.append(path)
            continue
        os.makedirs(out_dir, exist_ok=True)
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(path + ".tmp", path)
    if stale:
        sys.exit("stale (run scripts/amalgamate.py): " + ", ".join(os.path.relpath(p, ROOT) for p in stale))


if __name__ == "__main__":
    main()
