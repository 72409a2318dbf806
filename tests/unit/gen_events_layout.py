#!/usr/bin/env python3
"""Writes bpf/events_layout.h: the size of every record in bpf/events.h and
the offset of each of its fields, as static asserts.

The numbers come from the compiler (offsetof/sizeof of the structs as they
are now), so run this only when a layout changes on purpose, together with
LT_EVENT_ABI_VERSION and docs/trace-format.md:

    python3 tests/unit/gen_events_layout.py > bpf/events_layout.h
"""
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def structs(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    out = []
    for m in re.finditer(r"^struct (\w+) \{(.*?)^\};", text, flags=re.S | re.M):
        fields = []
        for decl in m.group(2).split(";"):
            decl = decl.strip()
            if not decl:
                continue
            name = re.match(r"(?:struct\s+)?\w+\s+(\w+)", decl)
            if not name:
                sys.exit(f"cannot parse field {decl!r} of {m.group(1)}")
            fields.append(name.group(1))
        out.append((m.group(1), fields))
    return out


def main():
    with open(os.path.join(ROOT, "bpf/events.h")) as f:
        found = structs(f.read())
    prog = ['#define LT_EVENTS_LAYOUT_H  // measure the structs without the asserts',
            '#include <cstddef>', '#include <cstdio>', '#include "bpf/events.h"',
            'using namespace lt;', 'int main() {']
    for name, fields in found:
        prog.append(f'  std::printf("LT_SIZE({name}, %zu);\\n", sizeof({name}));')
        for fld in fields:
            prog.append(f'  std::printf("LT_OFFSET({name}, {fld}, %zu);\\n", offsetof({name}, {fld}));')
        prog.append('  std::printf("\\n");')
    prog.append('}')
    with tempfile.TemporaryDirectory() as d:
        src, exe = os.path.join(d, "m.cpp"), os.path.join(d, "m")
        with open(src, "w") as f:
            f.write("\n".join(prog) + "\n")
        subprocess.run(["g++", "-std=c++20", "-I", ROOT, src, "-o", exe], check=True)
        body = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
    sys.stdout.write(HEAD + body.rstrip("\n") + "\n" + TAIL)


HEAD = """\
/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The layout of every record in events.h, asserted: these structs are the
 * ring buffer's format and the trace file's (docs/trace-format.md), shared
 * by BPF (clang -target bpf), user space (C++) and the bridge.  A field that
 * moves or a struct that grows fails every build that includes events.h.
 * When a layout changes on purpose, bump LT_EVENT_ABI_VERSION and rewrite
 * this file: python3 tests/unit/gen_events_layout.py > bpf/events_layout.h
 *
 * Included at the end of events.h (inside namespace lt in C++).
 */
#ifndef LT_EVENTS_LAYOUT_H
#define LT_EVENTS_LAYOUT_H

#ifdef __cplusplus
#define LT_LAYOUT_ASSERT(cond, what) static_assert(cond, what)
#else
#define LT_LAYOUT_ASSERT(cond, what) _Static_assert(cond, what)
#endif
#define LT_SIZE(t, n) LT_LAYOUT_ASSERT(sizeof(struct t) == (n), "events.h: size of " #t " changed")
#define LT_OFFSET(t, f, n) LT_LAYOUT_ASSERT(__builtin_offsetof(struct t, f) == (n), "events.h: " #t "." #f " moved")

/* clang-format off */
"""
TAIL = """\
/* clang-format on */

#undef LT_OFFSET
#undef LT_SIZE
#undef LT_LAYOUT_ASSERT

#endif /* LT_EVENTS_LAYOUT_H */
"""

if __name__ == "__main__":
    main()
