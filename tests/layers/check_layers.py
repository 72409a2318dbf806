#!/usr/bin/env python3
"""Fails when an #include runs against the layering in tests/layers/layers.txt,
when a source directory is missing from it, or when the table has a cycle.
Usage: check_layers.py [ROOT]  (ROOT defaults to the repository root)."""
import os
import re
import sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "layers.txt")
SOURCE_TOPS = ("bpf", "user", "reports", "torchbridge")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def read_table(path):
    allowed = {}
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if ":" not in line:
            sys.exit(f"{path}:{n}: expected 'DIR: ALLOWED ...'")
        d, rest = line.split(":", 1)
        allowed[d.strip()] = set(rest.split())
    return allowed


def find_cycle(allowed):
    state = {}

    def visit(d, path):
        state[d] = 1
        for e in sorted(allowed.get(d, ())):
            if state.get(e) == 1:
                return path + [d, e]
            if e not in state:
                c = visit(e, path + [d])
                if c:
                    return c
        state[d] = 2
        return None

    for d in sorted(allowed):
        if d not in state:
            c = visit(d, [])
            if c:
                return c
    return None


def layer_of_include(inc, known):
    # The longest known directory that the included path lies in.
    parts = inc.split("/")
    for k in range(len(parts) - 1, 0, -1):
        d = "/".join(parts[:k])
        if d in known:
            return d
    return None


def main():
    allowed = read_table(TABLE)
    known = set(allowed)
    errors = []
    for d, deps in allowed.items():
        for e in deps - known:
            errors.append(f"layers.txt: {d} allows {e}, which is not a listed directory")
    cycle = find_cycle(allowed)
    if cycle:
        errors.append("layers.txt: the layering has a cycle: " + " -> ".join(cycle))
    for top in SOURCE_TOPS:
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            rel_dir = os.path.relpath(dirpath, ROOT)
            for f in sorted(files):
                if not f.endswith((".c", ".h", ".cpp")):
                    continue
                if rel_dir not in known:
                    errors.append(f"{rel_dir}/{f}: directory {rel_dir} is not in tests/layers/layers.txt")
                    continue
                text = open(os.path.join(dirpath, f), encoding="utf-8", errors="replace").read()
                for inc in INCLUDE.findall(text):
                    target = layer_of_include(inc, known)
                    if target is None or target == rel_dir:
                        continue  # a local or system header, or its own directory
                    if target not in allowed[rel_dir]:
                        errors.append(f"{rel_dir}/{f}: includes {inc}: {rel_dir} may not depend on {target}")
    for e in errors:
        print("layering: " + e)
    if errors:
        return 1
    print(f"layering: ok ({len(known)} directories)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
