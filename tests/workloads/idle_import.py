"""Imports some modules (default: torch), prints READY, and waits, for the
census tests (`ltrace-bpf ps`, --all).

--wait-file F   wait until F exists, then exit 0 (default: wait until killed)
--import A,B    the modules to import ("" for none)
--comm HEX      set the thread name (/proc/PID/comm) to these bytes (prctl)
--chroot DIR    after the imports, chroot into DIR (the test then removes it)
Extra arguments are ignored (a test may put odd bytes in the command line).
"""
import argparse
import ctypes
import importlib
import os
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wait-file")
    ap.add_argument("--import", dest="imports", default="torch")
    ap.add_argument("--comm")
    ap.add_argument("--chroot")
    args, _ = ap.parse_known_args()
    for name in filter(None, args.imports.split(",")):
        importlib.import_module(name)
    if args.comm:
        PR_SET_NAME = 15
        ctypes.CDLL(None).prctl(PR_SET_NAME, ctypes.c_char_p(bytes.fromhex(args.comm)), 0, 0, 0)
    if args.chroot:
        os.chroot(args.chroot)
        os.chdir("/")
    print("READY", os.getpid(), flush=True)
    while not (args.wait_file and not args.chroot and os.path.exists(args.wait_file)):
        time.sleep(0.05)
    return 0


if __name__ == "__main__":
    sys.exit(main())
