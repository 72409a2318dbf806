"""Bytes per event of each trace format, on one recorded trace: the trace
file (ltrace-bpf's own, zstd chunks), the Chrome JSON (--chrome) and
Perfetto's protobuf (--perfetto), side by side, raw and gzip'd, with the time
`report` takes to write each.

usage: sudo .venv/bin/python bench/export_size.py [--trace FILE] [--batches 64]
Without --trace, records a real Lightning CPU fit (tests/workloads/
train_lightning.py, one epoch of BATCHES batches, validation on) with the op
and allocator probes (--profile-memory), so every kind the exports draw is
there but GPU work (no GPU here).  Exports are written with the same options
(--profile-memory: actions, ops, memory); "report s" and "peak MB" are the
whole `report` run (read, aggregate, write; GNU time's maximum RSS).  "per record" divides by the
records in the trace file (`report -v`); "per item" by what each file holds
(trace: records; JSON: traceEvents; Perfetto: slices + counter values +
instants, each slice one begin and one end packet).  One run; the sizes are
deterministic for a given trace, the times are not (busy machine).
"""
import argparse
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LTRACE = os.path.join(ROOT, "build", "ltrace-bpf")
PY = os.path.join(ROOT, ".venv", "bin", "python")
TRAIN = os.path.join(ROOT, "tests", "workloads", "train_lightning.py")


def record(tmp, batches):
    go, log, err = os.path.join(tmp, "go"), os.path.join(tmp, "job.log"), os.path.join(tmp, "rec.err")
    path = os.path.join(tmp, "run.ltrace")
    job = subprocess.Popen([PY, TRAIN, "--wait-file", go, "--profiler", "none", "--epochs", "1", "--batches",
                            str(batches), "--val"], stdout=open(log, "w"), stderr=subprocess.STDOUT)
    wait(log, "READY", 600)
    rec = subprocess.Popen([LTRACE, "record", "--pid", str(job.pid), "-o", path, "-v", "--profile-memory"],
                           stderr=open(err, "w"))
    wait(err, "attached", 120)
    open(go, "w").close()
    assert job.wait(600) == 0
    assert rec.wait(60) == 0
    return path


def wait(path, pattern, timeout):
    end = time.time() + timeout
    while time.time() < end:
        if os.path.exists(path) and pattern in open(path, errors="replace").read():
            return
        time.sleep(0.1)
    sys.exit(f"timed out waiting for {pattern!r} in {path}")


def export(trace, flag, out):
    """Seconds and peak RSS (MB, GNU time) of the whole `report` run: read, aggregate, write."""
    t = time.perf_counter()
    r = subprocess.run(["/usr/bin/time", "-f", "maxrss_kb=%M", LTRACE, "report", trace, "--profile-memory", flag,
                        out, "-v"], capture_output=True, text=True)
    secs = time.perf_counter() - t
    assert r.returncode == 0, r.stderr
    records = int(re.search(r"read (\d+) events", r.stderr).group(1))
    rss_mb = int(re.search(r"maxrss_kb=(\d+)", r.stderr).group(1)) / 1024
    return secs, rss_mb, records


def gz(path):
    with open(path, "rb") as f:
        return len(gzip.compress(f.read(), 6))


def perfetto_items(path):
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb2
    t = pb2.Trace()
    t.ParseFromString(open(path, "rb").read())
    kinds = [p.track_event.type for p in t.packet if p.HasField("track_event")]
    ev = pb2.TrackEvent
    return sum(k in (ev.TYPE_SLICE_BEGIN, ev.TYPE_COUNTER, ev.TYPE_INSTANT) for k in kinds), len(t.packet)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trace", help="a recorded trace file (default: record a Lightning fit)")
    ap.add_argument("--batches", type=int, default=64)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trace = args.trace or record(tmp, args.batches)
        js, pf = os.path.join(tmp, "t.json"), os.path.join(tmp, "t.pftrace")
        js_s, js_mb, records = export(trace, "--chrome", js)
        pf_s, pf_mb, _ = export(trace, "--perfetto", pf)
        json_items = len(json.load(open(js))["traceEvents"])
        pf_items, packets = perfetto_items(pf)
        rows = [("trace file", os.path.getsize(trace), gz(trace), records, None, None),
                ("Chrome JSON", os.path.getsize(js), gz(js), json_items, js_s, js_mb),
                ("Perfetto", os.path.getsize(pf), gz(pf), pf_items, pf_s, pf_mb)]
        print(f"{records} records in the trace file; Perfetto: {packets} packets")
        print(f"{'format':<12} {'bytes':>12} {'gzip -6':>12} {'B/record':>9} {'gz B/rec':>9} {'items':>9} "
              f"{'B/item':>7} {'report s':>8} {'peak MB':>8}")
        for name, size, zsize, items, secs, mb in rows:
            print(f"{name:<12} {size:>12,} {zsize:>12,} {size / records:>9.1f} {zsize / records:>9.1f} "
                  f"{items:>9,} {size / items:>7.1f} {'' if secs is None else f'{secs:.2f}':>8} "
                  f"{'' if mb is None else f'{mb:.0f}':>8}")


if __name__ == "__main__":
    main()
