"""A process whose threads sit where `ltrace-bpf dump` must find them
(tests/integration/test_dump.py): one sleeping, one blocked reading a pipe,
one waiting on a lock, one burning CPU (the GIL holder), one blocked in a
function whose name and file are not plain UTF-8, and --idle N more waiting
on an Event.  Prints "ready" and each role's native tid as JSON; on a line
"quit" on stdin (or once --wait-file PATH exists) it releases everything and prints the same result every run.
The lines the test expects are marked "# at: ROLE"."""
import json
import os
import sys
import threading
import time

stop = threading.Event()
state = {"burned": 0, "stop": False}  # a plain flag: the burner calls nothing


def sleeper():
    # One long sleep (a daemon thread, not joined): a loop of short ones
    # would now and then be caught waking, waiting for the GIL.
    time.sleep(3600)  # at: sleeper


def reader(fd):
    os.read(fd, 1)  # at: reader


def locker(lock):
    lock.acquire()  # at: locker
    lock.release()


def burner():
    n = 0
    while not state["stop"]:  # at: burner
        n += 1  # at: burner
    state["burned"] = n > 0


def idler(ev):
    ev.wait()  # at: idler


# A function named with a non-ASCII letter, in a "file" whose name holds a
# lone surrogate (surrogateescape's form of the byte 0xff) and a newline.
ns = {}
exec(compile("def w\u00e9ird(ev):\n    ev.wait()\n", "odd\udcff\nname.py", "exec"), ns)
weird = ns["w\u00e9ird"]


def main():
    idle = int(sys.argv[sys.argv.index("--idle") + 1]) if "--idle" in sys.argv else 0
    tids = {"main": threading.get_native_id()}
    r, w = os.pipe()
    lock = threading.Lock()
    lock.acquire()
    ev = threading.Event()
    roles = [("sleeper", sleeper, ()), ("reader", reader, (r,)), ("locker", locker, (lock,)),
             ("burner", burner, ()), ("weird", weird, (ev,))]
    roles += [("idler%d" % i, idler, (ev,)) for i in range(idle)]
    threads = []
    for name, fn, args in roles:
        t = threading.Thread(target=fn, args=args, name=name, daemon=fn is sleeper)
        t.start()
        threads.append(t)
    while any(t.native_id is None for t in threads):
        time.sleep(0.01)
    for t in threads:
        tids[t.name] = t.native_id
    if "--child" in sys.argv:
        import subprocess
        child = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(1)"])
        tids["child"] = child.pid
    time.sleep(0.3)  # every thread reaches its blocking call
    print("ready " + json.dumps(tids), flush=True)
    if "--wait-fifo" in sys.argv:  # in a container: no stdin to wait on
        # Blocks in open() without the GIL, as a read of stdin does: a
        # polling main thread would take the GIL from the burner every
        # 50 ms, and a dump could then find it held by nobody.
        with open(sys.argv[sys.argv.index("--wait-fifo") + 1]) as go:
            go.read(1)
    elif "--wait-file" in sys.argv:
        go = sys.argv[sys.argv.index("--wait-file") + 1]
        while not os.path.exists(go):
            time.sleep(0.05)
    else:
        sys.stdin.readline()  # at: main
    stop.set()
    state["stop"] = True
    ev.set()
    lock.release()
    os.write(w, b"x")
    for t in threads:
        if t.name != "sleeper":
            t.join()
    if "--child" in sys.argv:
        child.kill()
        child.wait()
    print("done %d threads, burned=%s" % (len(threads), state["burned"]), flush=True)


main()
