"""Long and hostile action names through Lightning's real Profiler.profile
(no torch, so every CPython runs it).  Prints READY, waits for --wait-file,
runs the actions, then a RESULT JSON line: {"counts": {name: calls}}.

--set long: two distinct 300-byte names sharing their first 276 bytes
(Lightning's callback names carry their state dicts), a 2,000-byte name,
non-ASCII long names of each str kind (Latin-1, UCS-2, UCS-4), and a
6,000-byte name past the bound of what we read (docs/design-actions.md).
--set escapes: names holding terminal control sequences."""
import argparse
import json
import os
import sys
import time

if os.environ.get("LT_LIGHTNING_WHEEL") == "lightning":
    from lightning.pytorch.profilers.base import PassThroughProfiler
else:
    from pytorch_lightning.profilers.base import PassThroughProfiler


def state_key(n):
    """A ModelCheckpoint-like state key, `n` bytes of varied text."""
    base = "{'monitor': 'val_loss', 'mode': 'min', 'every_n_train_steps': 0, 'every_n_epochs': 1, "
    s = ""
    i = 0
    while len(s) < n:
        s += base.replace("0", str(i % 10))
        i += 1
    return s[:n]


def long_names():
    end_a, end_b = ", 'save_top_k': 1}.on_train_batch_end", ", 'save_top_k': 3}.on_train_batch_end"
    common = "[Callback]ModelCheckpoint" + state_key(300 - 25 - len(end_a))
    a, b = common + end_a, common + end_b  # 300 bytes each, equal in their first 276
    huge = "".join(chr(ord("a") + (i * 7) % 26) for i in range(2000))
    past_bound = "".join(chr(ord("A") + (i * 11) % 26) for i in range(6000))
    latin1 = "é" + "".join(chr(0xC0 + i % 64) for i in range(299))  # 300 code points, kind 1
    ucs2 = "Ω" + "".join(chr(0x3B1 + i % 25) for i in range(499))  # 500 code points, kind 2
    ucs4 = "🚀" + "".join(chr(0x1F600 + i % 64) for i in range(399))  # 400 code points, kind 4
    ucs2_past = "Ж" + "".join(chr(0x410 + (i * 5) % 32) for i in range(2999))  # 6,000 bytes, kind 2
    return {a: 10, b: 20, huge: 3, past_bound: 2, latin1: 4, ucs2: 5, ucs4: 6, ucs2_past: 2}


def escape_names():
    return {"clear\x1b[2Jscreen": 3, "bell\x07ring": 2, "c1\u009bname": 1}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wait-file")
    ap.add_argument("--set", default="long", choices=("long", "escapes"))
    args = ap.parse_args()
    prof = PassThroughProfiler()
    counts = long_names() if args.set == "long" else escape_names()
    print("READY", os.getpid(), flush=True)
    if args.wait_file:
        while not os.path.exists(args.wait_file):
            time.sleep(0.01)
    # Interleaved, and each name built anew per call (as Lightning's
    # f-strings are): the str object BPF reads is a fresh one every time.
    left = dict(counts)
    while any(left.values()):
        for name in counts:
            if left[name]:
                left[name] -= 1
                with prof.profile("".join(list(name))):
                    time.sleep(0.0005)
    print("RESULT " + json.dumps({"counts": counts}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
