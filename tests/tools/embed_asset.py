#!/usr/bin/env python3
"""Embeds a page's script or style sheet (reports/*/js/*.js,
reports/*/css/*.css) in the binary: writes it as one C++ raw string
literal, to be #included where the page is written.

The file is ordinary, readable JavaScript or CSS (`make check` runs
`node --check` on scripts and tests/tools/check_css.py on style sheets);
the page gets it compact: comment-only lines (// in scripts, /* ... */ in
style sheets) are dropped, and each line break goes with the indentation
after it. So a line may only break where no space is needed (in CSS:
after `{`, `;`, `,` or `}`), and a comment may only stand on a line of its
own.

    python3 tests/tools/embed_asset.py FILE.js  > FILE.js.inc
    python3 tests/tools/embed_asset.py FILE.css > FILE.css.inc
"""
import sys

DELIM = "lt_asset"


def is_comment(line, css):
    if css:
        return line.startswith("/*") and line.endswith("*/") and "*/" not in line[2:-2]
    return line.startswith("//")


def compact(text, css):
    lines = []
    for line in text.split("\n"):
        stripped = line.strip()
        if not stripped or is_comment(stripped, css):
            continue
        lines.append(line.lstrip().rstrip("\n"))
    return "".join(lines)


def main():
    if len(sys.argv) != 2 or not sys.argv[1].endswith((".js", ".css")):
        sys.exit("usage: embed_asset.py FILE.js|FILE.css")
    with open(sys.argv[1], encoding="utf-8") as f:
        body = compact(f.read(), sys.argv[1].endswith(".css"))
    if f"){DELIM}\"" in body:
        sys.exit(f"{sys.argv[1]}: the file holds the literal's end ){DELIM}\"")
    sys.stdout.write(f"// Generated from {sys.argv[1]} by tests/tools/embed_asset.py: edit that file.\n")
    sys.stdout.write(f"R\"{DELIM}({body}){DELIM}\"\n")


if __name__ == "__main__":
    main()
