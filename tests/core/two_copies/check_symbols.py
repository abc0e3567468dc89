#!/usr/bin/env python3
"""Fail when an object built with TSR_STATIC exports (or shares, weakly) any symbol naming
tessera: nm's global symbols (upper-case types, and 'u' unique globals) must not mention
tsr / tessera. CMake and meson both run it: check_symbols.py NM FILE...
A FILE is an object or a static library (meson passes the archive of the objects); an
argument may hold several paths separated by ';' (CMake's $<TARGET_OBJECTS:...>)."""
import re
import subprocess
import sys

nm = sys.argv[1]
files = [p for arg in sys.argv[2:] for p in arg.split(";") if p]
if not files:
    sys.exit("check_symbols: no objects given")
global_symbol = re.compile(r"^[0-9a-fA-F]* [A-Zu] ")
names_tessera = re.compile(r"[Tt][Ss][Rr]|[Tt]essera")
bad = []
for path in files:
    run = subprocess.run([nm, "-C", "--defined-only", path], capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"{nm} failed on {path}:\n{run.stderr}")
    lines = run.stdout.splitlines()
    bad += [f"  {path}: {line}" for line in lines if global_symbol.match(line) and names_tessera.search(line)]
    print(f"{path}: {len(lines)} symbols checked")
if bad:
    sys.exit("TSR_STATIC objects export symbols that name tessera:\n" + "\n".join(bad))
