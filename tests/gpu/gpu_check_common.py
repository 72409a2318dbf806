"""What the GPU-machine checks (tests/gpu/*_check.py) share: waiting for a
line in a process's output file, and the OK/DIFF lines with their count.
Imported from the checks' own directory (python3 tests/gpu/X_check.py)."""
import os
import time


def wait_for(path, text, proc, timeout):
    """True once `text` is in the file at `path`; False when `proc` ends or
    `timeout` seconds pass first."""
    end = time.time() + timeout
    while time.time() < end:
        if os.path.exists(path) and text in open(path, errors="replace").read():
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.1)
    return False


class Checks:
    """One "OK  name: detail" or "DIFF name: detail" line per check."""

    def __init__(self):
        self.ok = self.total = 0

    def check(self, name, good, detail):
        self.total += 1
        self.ok += bool(good)
        print(f"{'OK  ' if good else 'DIFF'} {name}: {detail}")

    def all_ok(self):
        return self.ok == self.total
