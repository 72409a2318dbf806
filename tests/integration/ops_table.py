"""Parses ltrace-bpf's op report (torch's key_averages().table() layout)."""
import re

UNITS = {"us": 1.0, "ms": 1e3, "s": 1e6}


def to_us(text):
    m = re.fullmatch(r"([0-9.]+)(us|ms|s)", text)
    assert m, text
    return float(m.group(1)) * UNITS[m.group(2)]


def parse_ops_report(text):
    """-> {title: {name: {"calls", "self_us", "total_us"}}} for each "Profile stats for:" section."""
    tables = {}
    current = None
    cols = (2, 4, 6)  # Self CPU, CPU total, # of Calls: after each header, where they are
    for line in text.splitlines():
        if line.startswith("Profile stats for: "):
            current = tables.setdefault(line[len("Profile stats for: "):], {})
            continue
        cells = re.split(r"\s{2,}", line.strip())
        if cells and cells[0] == "Name":
            # With memory columns (--profile-memory, a watch capture's
            # escalated allocations) "# of Calls" moves right.
            bare = [c.rstrip(" ~") for c in cells]
            cols = tuple(bare.index(n) if n in bare else d
                         for n, d in (("Self CPU", 2), ("CPU total", 4), ("# of Calls", 6)))
            continue
        if current is None or len(cells) < 7 or set(line.strip()) <= {"-", " "}:
            continue
        name, self_cpu, total, calls = cells[0], cells[cols[0]], cells[cols[1]], cells[cols[2]]
        row = current.setdefault(name, {"calls": 0, "self_us": 0.0, "total_us": 0.0})
        row["calls"] += int(calls)
        row["self_us"] += to_us(self_cpu)
        row["total_us"] += to_us(total)
    return tables


def estimated_tables(text):
    """The titles of the sections whose times are sampled estimates (their
    header's columns end in "~")."""
    out, current = set(), None
    for line in text.splitlines():
        if line.startswith("Profile stats for: "):
            current = line[len("Profile stats for: "):]
        elif current and line.lstrip().startswith("Name ") and "~" in line:
            out.add(current)
    return out


def merged(tables):
    """All sections summed: {name: row}."""
    out = {}
    for rows in tables.values():
        for name, r in rows.items():
            o = out.setdefault(name, {"calls": 0, "self_us": 0.0, "total_us": 0.0})
            for k in o:
                o[k] += r[k]
    return out
