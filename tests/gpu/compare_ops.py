"""Compares ltrace-bpf's op table (its --report ops text, every step table
summed) with torch.profiler's key_averages (gpu_compare.py's torch.json,
"ops") for the same fit: per aten op, the call count and the CUDA total
(the device time of the kernels each op's calls launched, its children's
included).  On a late attach the op observer measures the calls and the
kernels join the calls around their launch by time (docs/design-op-observer.md).
Prints a table of the ops with the most CUDA time and a verdict line:
  COMPARE_OPS ops=<matched>/<torch ops with CUDA time> count_exact=<n> cuda_ratio_median=<ours/torch>
"""
import json
import re
import sys


def to_us(cell):
    m = re.match(r"^(-?[\d.]+)(us|ms|s)$", cell.strip().rstrip("~"))
    if not m:
        return None
    return float(m.group(1)) * {"us": 1.0, "ms": 1e3, "s": 1e6}[m.group(2)]


def ours(text):
    rows, cols = {}, None
    for line in text.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if cells and cells[0] == "Name":
            cols = [c.rstrip("~") for c in cells]
            continue
        if cols is None or set(line.strip()) <= {"-", " "} or len(cells) != len(cols):
            continue
        row = dict(zip(cols, cells))
        if "CUDA total" not in row or "# of Calls" not in row:
            continue
        r = rows.setdefault(row["Name"], {"count": 0, "cuda_total_us": 0.0})
        r["count"] += int(row["# of Calls"])
        r["cuda_total_us"] += to_us(row["CUDA total"]) or 0.0
    return rows


def main():
    lt_out, torch_json = sys.argv[1], sys.argv[2]
    mine = ours(open(lt_out).read())
    ref = {k: v for k, v in json.load(open(torch_json))["ops"].items()
           if k.startswith("aten::") and v["cuda_total_us"] > 0}
    top = sorted(ref, key=lambda k: -ref[k]["cuda_total_us"])
    exact, ratios = 0, []
    print(f"{'ours':>7} {'torch':>7} {'ours CUDA us':>13} {'torch CUDA us':>13}  op")
    for k in top:
        o = mine.get(k, {"count": 0, "cuda_total_us": 0.0})
        exact += o["count"] == ref[k]["count"]
        if o["cuda_total_us"] > 0:
            ratios.append(o["cuda_total_us"] / ref[k]["cuda_total_us"])
        if top.index(k) < 20:
            print(f"{o['count']:>7} {ref[k]['count']:>7} {o['cuda_total_us']:>13.1f} {ref[k]['cuda_total_us']:>13.1f}  {k}")
    ratios.sort()
    med = ratios[len(ratios) // 2] if ratios else 0.0
    matched = sum(1 for k in ref if k in mine and mine[k]["cuda_total_us"] > 0)
    print(f"COMPARE_OPS ops={matched}/{len(ref)} count_exact={exact}/{len(ref)} cuda_ratio_median={med:.3f}")


if __name__ == "__main__":
    main()
