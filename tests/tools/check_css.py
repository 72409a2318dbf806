#!/usr/bin/env python3
"""A structural check of the pages' style sheets (reports/*/css/*.css), run
by `make check`, which needs no build and no virtual environment (a CSS
parser such as tinycss2 would be a package to install first); these sheets
use only plain rules, so this checks exactly that grammar.

Every rule is `selector[, selector...] { property: value; ... }`: braces
balanced and never nested, comments closed, each declaration a lower-case
property name (or a --custom one), a colon and a non-empty value, no
stray text between rules. Exits 1 with FILE:LINE: why on the first fault.

    python3 tests/tools/check_css.py FILE.css...
"""
import re
import sys

PROPERTY = re.compile(r"^(--[A-Za-z0-9_-]+|-?[a-z][a-z-]*)$")
SELECTOR = re.compile(r"^[A-Za-z0-9_.#:()\[\]=\"'*>+~ -]+$")


class Fault(Exception):
    pass


def strip_comments(text):
    out, i = [], 0
    while True:
        j = text.find("/*", i)
        if j < 0:
            out.append(text[i:])
            return "".join(out)
        k = text.find("*/", j + 2)
        if k < 0:
            raise Fault(text.count("\n", 0, j) + 1, "comment never closed")
        out.append(text[i:j])
        out.append("\n" * text.count("\n", j, k))  # keep line numbers
        i = k + 2


def check(text):
    body = strip_comments(text)
    pos, rules = 0, 0
    while True:
        open_at = body.find("{", pos)
        rest = body[pos:] if open_at < 0 else body[pos:open_at]
        line = body.count("\n", 0, pos) + 1
        if "}" in rest:
            raise Fault(body.count("\n", 0, pos + rest.index("}")) + 1, "'}' without a rule")
        if open_at < 0:
            if rest.strip():
                raise Fault(line, "text after the last rule: " + rest.strip()[:40])
            return rules
        for sel in rest.split(","):
            if not sel.strip() or not SELECTOR.match(sel.strip()):
                raise Fault(line, "bad selector: " + repr(sel.strip()[:40]))
        close = body.find("}", open_at)
        if close < 0:
            raise Fault(body.count("\n", 0, open_at) + 1, "'{' never closed")
        block = body[open_at + 1 : close]
        if "{" in block:
            raise Fault(body.count("\n", 0, open_at + 1 + block.index("{")) + 1, "nested '{'")
        decl_at = open_at + 1
        for decl in block.split(";"):
            where = body.count("\n", 0, decl_at) + 1 + (len(decl) - len(decl.lstrip("\n")))
            decl_at += len(decl) + 1
            if not decl.strip():
                continue
            if ":" not in decl:
                raise Fault(where, "declaration without ':': " + decl.strip()[:40])
            prop, value = decl.split(":", 1)
            if not PROPERTY.match(prop.strip()):
                raise Fault(where, "bad property name: " + repr(prop.strip()))
            if not value.strip():
                raise Fault(where, "empty value for " + prop.strip())
        rules += 1
        pos = close + 1


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: check_css.py FILE.css...")
    for path in sys.argv[1:]:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        try:
            check(text)
        except Fault as e:
            line, why = e.args
            print(f"{path}:{line}: {why}", file=sys.stderr)
            sys.exit(1)
    print(f"css: ok ({len(sys.argv) - 1} files)")


if __name__ == "__main__":
    main()
