#!/usr/bin/env python3
"""Embeds a page script (reports/*/js/*.js) in the binary: writes it as one
C++ raw string literal, to be #included where the page is written.

The file is ordinary, readable JavaScript (`make check` runs `node --check`
on it); the page gets it compact: full-line // comments are dropped, and
each line break goes with the indentation after it. So a line may only
break where the script needs no space, and a // comment may only stand on
a line of its own.

    python3 tests/tools/embed_js.py FILE.js > FILE.js.inc
"""
import sys

DELIM = "lt_js"


def compact(text):
    lines = []
    for line in text.split("\n"):
        stripped = line.strip()
        if not stripped or stripped.startswith("//"):
            continue
        lines.append(line.lstrip().rstrip("\n"))
    return "".join(lines)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: embed_js.py FILE.js")
    with open(sys.argv[1], encoding="utf-8") as f:
        js = compact(f.read())
    if f"){DELIM}\"" in js:
        sys.exit(f"{sys.argv[1]}: the script holds the literal's end ){DELIM}\"")
    sys.stdout.write(f"// Generated from {sys.argv[1]} by tests/tools/embed_js.py: edit that file.\n")
    sys.stdout.write(f"R\"{DELIM}({js}){DELIM}\"\n")


if __name__ == "__main__":
    main()
