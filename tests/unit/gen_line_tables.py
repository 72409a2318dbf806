#!/usr/bin/env python3
"""Write line-table test vectors for lt::python::line_for() from the running CPython.

Run it once under every supported interpreter (3.8 .. 3.13), from the repo root:

    for v in /root/.pyenv/versions/3.{8,9,10,11,12,13}.*/bin/python3; do
        "$v" tests/unit/gen_line_tables.py
    done

Each run writes tests/unit/data/line_tables_3.<minor>.txt.  The expected lines come
from the interpreter itself (dis.findlinestarts on 3.8/3.9, co_lines() on 3.10+),
never from our decoder, so the C++ test checks our reading of the raw table against
CPython's own.

File format (text, one record per line, fields separated by one space):

    # comment
    minor <M>                          the CPython minor version (3.<M>)
    code <name> <firstlineno> <hex>    a code object; <hex> is co_lnotab (3.8/3.9) or
                                       co_linetable (3.10+), or "-" when empty
    v <index> <line>                   line_for(M, firstlineno, table, index) == line,
                                       for the most recent "code" record

<index> is what the BPF sampler reports: a byte offset into co_code on 3.8/3.9,
an instruction index (2-byte code units) on 3.10 and later.  On 3.11+ every code
unit is listed, inline CACHE units included (prev_instr may point at one).  Every
code object also gets "v -1 <firstlineno>" (frame not started yet).  <line> is 0
where CPython says the instruction has no line (co_lines() yields None).
"""

import dis
import os
import sys
import textwrap
import types

MINOR = sys.version_info[1]

# Each snippet is compiled as a module; every code object reachable through
# co_consts is dumped.  Together they exercise: multi-line statements, loops,
# try/except/finally, with, comprehensions, generators, async, closures,
# decorators, lambdas, classes, blank-line runs (line deltas > 127 both ways),
# and long straight-line code (address deltas > 255, EXTENDED_ARG jumps).
SNIPPETS = [
    (
        "basic",
        """
        def add(a, b):
            c = a + b

            return c

        def loop(n):
            total = 0
            for i in range(n):
                if i % 2:
                    total += i
                else:
                    total -= 1
            while total > 100:
                total //= 2
            return total
        """,
    ),
    (
        "exceptions",
        """
        def risky(x):
            try:
                y = 1 / x
            except ZeroDivisionError as e:
                print(e)
                y = 0
            except (TypeError, ValueError):
                raise
            else:
                y += 1
            finally:
                print("done")
            return y

        def ctx(path):
            with open(path) as f, open(path) as g:
                data = f.read()
                more = g.read()
            return data + more

        def nested_try():
            for i in range(3):
                try:
                    try:
                        continue
                    finally:
                        pass
                except Exception:
                    break
        """,
    ),
    (
        "comprehensions",
        """
        def comps(xs):
            a = [x * 2 for x in xs if x]
            b = {x: y
                 for x, y in zip(xs, xs)
                 if x != y}
            c = {x for x in xs}
            d = sum(x for x in xs)
            e = [[y for y in range(x)]
                 for x in xs]
            return a, b, c, d, e
        """,
    ),
    (
        "closures",
        """
        import functools

        def deco(fn):
            @functools.wraps(fn)
            def wrapper(*args, **kwargs):
                return fn(*args, **kwargs)
            return wrapper

        @deco
        @deco
        def decorated(x,
                      y=lambda z: z + 1,
                      *,
                      w=(lambda: 2)):
            f = lambda q: (q +
                           1)
            def inner():
                nonlocal x
                x += 1
                def innermost():
                    return x
                return innermost
            return f(x), inner

        class K:
            attr = 1

            def method(self):
                return self.attr

            @property
            def prop(self):
                return [self.attr
                        for _ in range(2)]
        """,
    ),
    (
        "generators",
        """
        def gen(n):
            for i in range(n):
                yield i
            yield from range(2)
            return 5

        async def coro(aw):
            r = await aw
            async with aw as v:
                pass
            async for v in aw:
                r += v
            return r
        """,
    ),
    (
        "multiline",
        """
        def call_spread(f, a, b, c):
            return f(
                a,
                b,
                c,
            )

        def chained(x):
            return (x
                    .strip()
                    .lower()
                    .split(",")
                    [0])

        def conditional(a, b):
            if (a and
                    b or
                    not a):
                return 1
            return 2 if a else 3
        """,
    ),
]


def far_lines_snippet():
    # Line deltas beyond int8 (3.8 lnotab / 3.10 linetable split them into several
    # entries) and beyond one 6-bit varint chunk (3.11+), forward and backward: the
    # call's own location is back on the line of "f(" after its last argument.
    blank = "\n" * 300
    return (
        "far_lines",
        "def far(f, a, b):\n"
        "    x = f(a," + blank + "          b)\n"
        "    y = x" + blank + "\n"
        "    return f(y,\n"
        + "\n" * 140
        + "             a)\n",
    )


def long_code_snippet():
    # One line compiling to far more than 255 bytes, followed by another line (so
    # the address delta to the next line start is split across entries), and an if/else whose bodies are long enough that the jumps
    # need EXTENDED_ARG.
    expr = " + ".join("a%d" % (i % 7) for i in range(160))
    body = "\n".join("        v%d = a0 * %d + a1" % (i, i) for i in range(120))
    params = ", ".join("a%d" % i for i in range(7))
    src = (
        "def long_line(%s):\n"
        "    x = %s\n"
        "    return x\n"
        "\n"
        "def big_branches(%s):\n"
        "    if a0:\n%s\n"
        "    else:\n%s\n"
        "    while a1:\n%s\n"
        "        a1 -= 1\n"
        "    return a0\n"
    ) % (params, expr, params, body, body.replace("v", "w"), body.replace("v", "u"))
    return ("long_code", src)


def version_snippets():
    out = []
    if MINOR >= 10:
        out.append(
            (
                "match",
                """
                def m(cmd):
                    match cmd:
                        case ["go", direction]:
                            return direction
                        case {"x": x, **rest} if x > 0:
                            return rest
                        case Point(x=0) | None:
                            return 0
                        case _:
                            pass
                    return None
                """,
            )
        )
    if MINOR >= 11:
        out.append(
            (
                "except_star",
                """
                def eg():
                    try:
                        raise ExceptionGroup("g", [ValueError(1)])
                    except* ValueError as e:
                        print(e)
                    except* TypeError:
                        pass
                """,
            )
        )
    if MINOR >= 12:
        out.append(
            (
                "type_params",
                """
                def first[T](xs: list[T]) -> T:
                    return xs[0]

                class Box[T]:
                    def get(self) -> T:
                        return self.v

                type Alias[K] = dict[K, int]
                """,
            )
        )
    return out


def stdlib_snippet():
    # A real module from this interpreter's own Lib: more shapes than we would think
    # of by hand.  textwrap is small, pure Python and present in every version.
    import textwrap as tw

    with open(tw.__file__) as f:
        return ("stdlib_textwrap", f.read())


def all_snippets():
    snippets = [(name, textwrap.dedent(src)) for name, src in SNIPPETS]
    snippets += [far_lines_snippet(), long_code_snippet()]
    snippets += [(name, textwrap.dedent(src)) for name, src in version_snippets()]
    snippets.append(stdlib_snippet())
    return snippets


def walk(code):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from walk(const)


def expected_lines(code):
    """(index, line) for every position the sampler can report in this code object."""
    out = [(-1, code.co_firstlineno)]
    if MINOR <= 9:
        # Line of an instruction = line of the last line start at or before it.
        starts = sorted(dis.findlinestarts(code))
        for ins in dis.get_instructions(code):
            line = code.co_firstlineno
            for addr, ln in starts:
                if addr > ins.offset:
                    break
                line = ln
            out.append((ins.offset, line))
        return out

    ranges = list(code.co_lines())

    def line_at(byte_addr):
        for start, end, line in ranges:
            if start <= byte_addr < end:
                return 0 if line is None else line
        return code.co_firstlineno

    if MINOR == 10:
        # f_lasti counts instructions; one instruction is one code unit.
        for ins in dis.get_instructions(code):
            assert ins.offset % 2 == 0
            out.append((ins.offset // 2, line_at(ins.offset)))
        return out

    # 3.11+: every code unit, inline caches included.  Cross-check co_lines()
    # against co_positions(), which CPython computes with a separate parser.
    positions = list(code.co_positions())
    units = len(code.co_code) // 2
    assert len(positions) == units, (code, len(positions), units)
    for i in range(units):
        line = line_at(2 * i)
        pos_line = positions[i][0]
        assert line == (0 if pos_line is None else pos_line), (code, i, line, pos_line)
        out.append((i, line))
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out_dir = os.path.join(here, "data")
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "line_tables_3.%d.txt" % MINOR)
    n_code = n_vec = 0
    lines = [
        "# Generated by tests/unit/gen_line_tables.py under CPython %s; do not edit."
        % sys.version.split()[0],
        "minor %d" % MINOR,
    ]
    for name, src in all_snippets():
        lines.append("# snippet %s" % name)
        module = compile(src, "<%s>" % name, "exec")
        for code in walk(module):
            table = code.co_lnotab if MINOR <= 9 else code.co_linetable
            qual = getattr(code, "co_qualname", code.co_name)
            qual = "".join(c if c.isprintable() and not c.isspace() else "_" for c in qual)
            lines.append("code %s %d %s" % (qual, code.co_firstlineno, table.hex() or "-"))
            n_code += 1
            for index, line in expected_lines(code):
                lines.append("v %d %d" % (index, line))
                n_vec += 1
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("%s: %d code objects, %d vectors" % (os.path.relpath(path), n_code, n_vec))


if __name__ == "__main__":
    main()
