"""The HTML dashboard of a long run: page weight and draw time.

usage: .venv/bin/python bench/dashboard_page.py [--steps 36000] [--ops-per-step N]
Builds bench/gen_trace (a synthetic Lightning-shaped trace: 21 actions a
training step, so 42 events a step), writes a trace of STEPS training steps
(36,000: a 1-hour run at 10 steps/s; the synthetic steps themselves are ~1.5
ms long, only their number matters for the page), runs `ltrace-bpf report
--html` on it, and loads the page in headless Chromium (--dump-dom), timing
it against an empty page in the same browser (the difference is the page's
own parse, layout and script), and the page without its step timeline
(section and data cut out) the same way, so the timeline's own share shows.
With --ops-per-step N each training step also holds N aten op entries
(`report --report ops --html`): the step timeline's ops, thinned to the
budget when the embedded steps' ops do not fit (the rects column then
column counts the actions drawn, the line under it the ops).  One run each; a busy machine reads slower.
"""
import argparse
import os
import re
import shutil
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LTRACE = os.path.join(ROOT, "build", "ltrace-bpf")
EVENTS_PER_STEP = 42


def load_s(browser, url, profile):
    t = time.perf_counter()
    r = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + profile,
                        "--dump-dom", url], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    return time.perf_counter() - t, r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=36_000)
    ap.add_argument("--ops-per-step", type=int, default=0)
    args = ap.parse_args()
    gen = os.path.join(ROOT, "build", "gen_trace")
    subprocess.run(["g++", "-std=c++20", "-O2", "-I", ROOT, "-I", os.path.join(ROOT, "bpf"),
                    os.path.join(ROOT, "bench", "gen_trace.cpp"), os.path.join(ROOT, "user/tracefile/trace_writer.cpp"),
                    os.path.join(ROOT, "user/core/output_file.cpp"), "-o", gen, "-lz", "-lzstd"], check=True)
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    with tempfile.TemporaryDirectory() as tmp:
        path, html = os.path.join(tmp, "long.ltrace"), os.path.join(tmp, "long.html")
        subprocess.run([gen, path, str(args.steps * EVENTS_PER_STEP)] +
                       ([str(args.ops_per_step)] if args.ops_per_step else []), check=True, capture_output=True)
        t = time.perf_counter()
        ops = ["--report", "ops"] if args.ops_per_step else []
        r = subprocess.run([LTRACE, "report", path, "--html", html] + ops, capture_output=True, text=True)
        report_s = time.perf_counter() - t
        assert r.returncode == 0, r.stderr
        size = os.path.getsize(html)
        blank = os.path.join(tmp, "blank.html")
        with open(blank, "w") as f:
            f.write("<!doctype html><html><body></body></html>")
        profile = os.path.join(tmp, "prof")
        load_s(browser, "file://" + blank, profile)  # warm the browser's files
        empty_s, _ = load_s(browser, "file://" + blank, profile)
        page_s, dom = load_s(browser, "file://" + html, profile)
        m = re.search(r'<svg class="chart steptime"[^>]*data-steps="(\d+)"[^>]*data-bucket="(\d+)"', dom)
        assert m and 'data-script="ran"' in dom
        drawn = re.search(r'data-drawn="(\d+)"', dom)
        assert drawn, "the step timeline drew no step"
        rects = len(re.findall(r'<rect class="sl"', dom))
        op_rects = len(re.findall(r'<rect class="sl op"', dom))
        draw_ms = re.search(r'data-draw-ms="([\d.]+)"', dom).group(1)
        text = open(html, encoding="utf-8").read()
        tl = re.search(r'<section class="steptl".*?</section>\n', text, re.S)
        thinned = re.search(r"ops thinned in (\d+) of the (\d+) steps", text)
        tl_bytes = len(tl.group(0).encode()) if tl else 0
        cut = os.path.join(tmp, "no_timeline.html")
        with open(cut, "w", encoding="utf-8") as f:
            f.write(text.replace(tl.group(0), "") if tl else text)
        cut_s, _ = load_s(browser, "file://" + cut, profile)
    print("| steps | page bytes | step timeline bytes | step-time bucket | report --html s | "
          "Chromium load s (page - empty) | without the step timeline s | step drawn (rects) | its draw ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    print(f"| {m.group(1)} | {size} | {tl_bytes} | {m.group(2)} | {report_s:.2f} | {page_s - empty_s:.2f} "
          f"({page_s:.2f} - {empty_s:.2f}) | {cut_s - empty_s:.2f} | {drawn.group(1)} ({rects}) | {draw_ms} |")
    if args.ops_per_step:
        print(f"ops: {args.ops_per_step} a step; the drawn step's op rects: {op_rects}; "
              + (f"ops thinned in {thinned.group(1)} of {thinned.group(2)} embedded steps" if thinned
                 else "no step thinned"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
