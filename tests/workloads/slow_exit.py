"""A job whose exit takes as long as the test wants: after --wait-file
appears it burns a little CPU (so the stacks have samples), then returns;
while the interpreter finalizes, an atexit handler prints FINALIZING and
waits for --release-file, printing SIGUSR1 for each SIGUSR1 it gets. Then
it burns 30 ms in last_burst() (a function first run there, in the last
milliseconds of the process), prints EXITED, and exits with status 7."""
import argparse
import atexit
import ctypes
import os
import signal
import sys
import time


def burn(seconds):
    until = time.thread_time() + seconds
    while time.thread_time() < until:
        pass


def last_burst(seconds):
    burn(seconds)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wait-file")
    ap.add_argument("--release-file", required=True)
    a = ap.parse_args()
    signal.signal(signal.SIGUSR1, lambda *_: print("SIGUSR1", flush=True))

    def at_exit():
        print("FINALIZING", os.getpid(), flush=True)
        while not os.path.exists(a.release_file):
            time.sleep(0.01)
        last_burst(0.03)
        print("EXITED", flush=True)

    # Finalization frees the module's functions and their code objects after
    # the atexit handlers ran; one more reference each keeps the code of the
    # last frames readable at the exit stop, whenever the tracer reads them
    # (a tracer stalled through all of finalization is a test's worst case).
    for code in (at_exit.__code__, last_burst.__code__, burn.__code__, main.__code__):
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(code))
    atexit.register(at_exit)
    print("READY", os.getpid(), flush=True)
    while a.wait_file and not os.path.exists(a.wait_file):
        time.sleep(0.01)
    burn(0.05)
    sys.exit(7)


if __name__ == "__main__":
    main()
