#!/usr/bin/env python3
"""Writes a C program that prints every field of CPython's _Py_DebugOffsets.

usage: gen_debug_offsets.py <include/python3.X/internal/pycore_debug_offsets.h> > dump.c

The struct is parsed from the header of the interpreter being measured, so
each version (3.13, 3.14, 3.15, ...) is printed with its own layout.  The
program prints, per field, the value that the headers compile to
(_Py_DebugOffsets_INIT) and, given `PID ADDR` (ADDR = &_PyRuntime in PID),
the value read from the live process, plus the sub-struct start offsets and
the struct's size.
"""
import re
import sys

text = open(sys.argv[1]).read()
m = re.search(r"typedef struct _Py_DebugOffsets \{(.*?)\n\} _Py_DebugOffsets;", text, re.S)
if not m:
    sys.exit("no _Py_DebugOffsets in " + sys.argv[1])
body = re.sub(r"//[^\n]*", "", m.group(1))
fields, subs, stack = [], [], []
for line in body.splitlines():
    line = line.strip()
    if not line:
        continue
    if line.startswith("char cookie"):
        continue
    if re.match(r"struct\s*(\w+)?\s*\{$", line):
        stack.append(None)
        continue
    mm = re.match(r"\}\s*(\w+);$", line)
    if mm:
        stack.pop()
        subs.append(mm.group(1))
        # fields recorded with a placeholder get their struct's name now
        fields[:] = [(mm.group(1) + "." + f[1:] if f.startswith("?") else f) for f in fields]
        continue
    mm = re.match(r"uint64_t\s+(\w+);$", line)
    if mm:
        fields.append(("?" if stack else "") + mm.group(1))
        continue
    sys.exit("unparsed line: " + line)

out = []
w = out.append
w('#define Py_BUILD_CORE 1')
w('#include <Python.h>')
w('#include <fcntl.h>')
w('#include <stddef.h>')
w('#include <stdio.h>')
w('#include <stdlib.h>')
w('#include <string.h>')
w('#include <unistd.h>')
w('#include "internal/pycore_runtime.h"')
w('#include "internal/pycore_debug_offsets.h"')
w('#include "internal/pycore_runtime_init.h"')
w('static const _Py_DebugOffsets compiled = _Py_DebugOffsets_INIT(_Py_Debug_Cookie);')
w('int main(int argc, char **argv) {')
w('  _Py_DebugOffsets live; int have = 0;')
w('  if (argc == 3) {')
w('    char path[64]; snprintf(path, sizeof path, "/proc/%s/mem", argv[1]);')
w('    int fd = open(path, O_RDONLY); if (fd < 0) { perror(path); return 1; }')
w('    unsigned long long addr = strtoull(argv[2], 0, 0);')
w('    if (pread(fd, &live, sizeof live, (off_t)addr) != (ssize_t)sizeof live) { perror("pread"); return 1; }')
w('    close(fd); have = 1;')
w('    if (memcmp(live.cookie, "xdebugpy", 8) != 0) { fprintf(stderr, "no xdebugpy cookie at %s\\n", argv[2]); return 1; }')
w('  }')
w('  printf("%-52s %12s %12s %s\\n", "field", "compiled", have ? "live" : "-", have ? "agree" : "");')
w('  printf("%-52s %12.8s %12.8s %s\\n", "cookie", compiled.cookie, have ? live.cookie : "-", have ? (memcmp(compiled.cookie, live.cookie, 8) ? "NO" : "yes") : "");')
w('  int bad = 0;')
w('#define F(name) do { unsigned long long c = compiled.name, l = have ? live.name : 0; \\')
w('    if (have) { printf("%-52s %12llu %12llu %s\\n", #name, c, l, c == l ? "yes" : "NO"); bad += c != l; } \\')
w('    else printf("%-52s %12llu\\n", #name, c); } while (0)')
for f in fields:
    w(f'  F({f});')
w('#define S(name) printf("%-52s %12zu\\n", "start of " #name, offsetof(_Py_DebugOffsets, name))')
for s in subs:
    w(f'  S({s});')
w('  printf("%-52s %12zu\\n", "sizeof(_Py_DebugOffsets)", sizeof(_Py_DebugOffsets));')
w('  if (have) printf("%d field(s) differ\\n", bad);')
w('  return bad != 0;')
w('}')
print("\n".join(out))
