"""Helpers that keep the integration tests valid on a busy machine
(`make test-loaded`): tolerances derived from the samples actually taken,
and waiting for a condition instead of sleeping for a guessed time."""
import math
import time


def share_sigma(p, n):
    """Standard error, in percentage points, of a share p (0..1) estimated
    from n samples (binomial).  Samples of a cpu-clock timer are periodic in
    the thread's CPU time, so their real spread is at most this."""
    if n <= 0:
        return math.inf
    return 100.0 * math.sqrt(max(p * (1.0 - p), 0.0) / n)


def share_tolerance(p, n, floor, sigmas=4.0):
    """Allowed |measured - expected| in points for a share p seen in n
    samples: `floor` (the systematic part, what an idle machine's test
    allowed) or `sigmas` standard errors when fewer samples were taken (a
    busy machine gives the target less CPU, so fewer samples)."""
    return max(floor, sigmas * share_sigma(p, n))


def wait_until(condition, timeout, what):
    """Polls condition() until it returns something truthy (returned);
    fails naming `what` after `timeout` seconds.  Timeouts are generous:
    they bound a hang, they are not the expected wait."""
    deadline = time.time() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.time() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)
