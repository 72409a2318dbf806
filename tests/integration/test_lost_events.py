"""Every lost event counted (issue 20, points 2 and 8): many threads running
nested actions at once on every CPython on the machine, and a fork storm
under --children.  The assertions are on accounting, never on timing: every
expected action is either in the report or counted as lost, and the report
never says nothing was lost when something was."""
import json
import os
import re

import pytest

from conftest import WORKLOADS, parse_simple_report, pyenv_python
import lightning_site

STORM = os.path.join(WORKLOADS, "action_storm.py")
CASES = [(m, pyenv_python(m)) for m in range(8, 14)] + [(11, "/usr/bin/python3.11")]
LOST = re.compile(r"lost events: (\d+) ring-buffer drops, (\d+) unreadable action names or stacks, "
                  r"(?:(\d+) unreadable generator frames, )?(\d+) open at detach, (\d+) ended before attach")


def lost_totals(err):
    """(drops, unreadable names, unreadable frames, open, unmatched) from the `lost events:` line."""
    m = LOST.search(err)
    assert m, err
    return tuple(int(g or 0) for g in m.groups())
PROC_LOSS = re.compile(r"ltrace-bpf: pid (\d+): (?:no action recorded, )?lost (.*)")


@pytest.fixture(scope="module")
def sites(tmp_path_factory):
    base = tmp_path_factory.mktemp("sites")
    return {"2.3.3": lightning_site.build(str(base / "pl233"), "2.3.3"),
            "2.6.6": lightning_site.build(str(base / "pl266"), "2.6.6")}


def lost_action_records(err):
    """pid -> action start/end records the report says that process lost."""
    out = {}
    for m in PROC_LOSS.finditer(err):
        n = 0
        for part in m.group(2).split(", "):
            count, what = part.split(" ", 1)
            if what.startswith(("action start", "action end", "generator resume")):
                n += int(count)
        out[int(m.group(1))] = out.get(int(m.group(1)), 0) + n
    return out


@pytest.mark.parametrize("minor,python", CASES, ids=[f"3.{m}-{'exe' if p and p.startswith('/usr') else 'lib'}"
                                                     for m, p in CASES])
def test_thread_storm_every_action_found_or_counted(attach, sites, minor, python):
    """200 threads x 2,000 nested actions, the threads new after the attach.
    CPython 3.11 lost 2-3 of 400,000 silently (a generator frame read that ran
    into an untouched page)."""
    if python is None or not os.path.exists(python):
        pytest.skip(f"CPython 3.{minor} not on this host")
    run = attach([python, STORM], env={"PYTHONPATH": sites["2.3.3" if minor == 8 else "2.6.6"]}, timeout=600)
    assert run.target_rc == 0 and run.lt_rc == 0, run.target_out + run.lt_err
    expected = json.loads(run.target_out.split("RESULT ", 1)[1])["counts"]
    rows = parse_simple_report(run.lt_out)
    found = {name: int(rows[name][1]) if name in rows else 0 for name in expected}
    missing = sum(expected.values()) - sum(found.values())
    drops, _faults, unreadable, open_at_end, _unmatched = lost_totals(run.lt_err)
    assert missing >= 0, (found, expected)
    # Counting a loss is no excuse for losing much: a tool that lost every
    # record and said so would pass the accounting below.
    assert sum(found.values()) >= 0.99 * sum(expected.values()), (found, expected, run.lt_err[-3000:])
    # Every missing action accounted for: a lost start or end record (an end
    # lost leaves its action open), or an unreadable resume.
    lost = sum(lost_action_records(run.lt_err).values())
    assert missing <= lost + open_at_end, (missing, run.lt_err)
    if missing == 0:
        assert lost == 0 and drops == 0 and unreadable == 0, run.lt_err
    assert open_at_end == 0 or lost, run.lt_err


def test_fork_storm_attributes_every_loss(attach, sites):
    """50 children forked at once under --children, each running actions on
    4 threads: each child's actions are all in its report or counted as lost
    by that child, and no child that lost records is said to have run none."""
    run = attach(["/usr/bin/python3.11", STORM, "--fork-children", "50", "--threads", "4", "--pairs", "1000"],
                 lt_args=["--children"], env={"PYTHONPATH": sites["2.6.6"]}, timeout=600)
    assert run.target_rc == 0 and run.lt_rc == 0, run.target_out + run.lt_err
    result = json.loads(run.target_out.split("RESULT ", 1)[1])
    assert result["failed"] == 0
    sections = {}
    for part in run.lt_out.split("==> pid ")[1:]:
        pid = int(part.split(" ", 1)[0].split(":", 1)[0])
        sections[pid] = parse_simple_report(part)
    lost = lost_action_records(run.lt_err)
    drops, _faults, unreadable, _open, _unmatched = lost_totals(run.lt_err)
    # The parent runs no actions and may be called quiet; a child that lost
    # records never is.
    for pid in lost:
        assert f"pid {pid}: no Lightning actions seen" not in run.lt_err, run.lt_err[-3000:]
    quiet = re.search(r"(\d+) other Python process\(es\) .* ran no Lightning actions", run.lt_err)
    assert not quiet or int(quiet.group(1)) <= 1, run.lt_err[-3000:]
    total_missing = 0
    for pid, counts in result["children"].items():
        rows = sections.get(int(pid), {})
        found = sum(int(rows[n][1]) for n in counts if n in rows)
        missing = sum(counts.values()) - found
        total_missing += missing
        # A child whose records were lost says so; one that lost none is exact.
        assert missing <= lost.get(int(pid), 0), (pid, missing, run.lt_err[-3000:])
        if int(pid) not in lost:
            assert missing == 0, (pid, run.lt_err[-3000:])
    # Nothing lost is claimed without a cause: per-process totals add up to
    # the ring-buffer drops (fork/exit records of the parent are few).
    # No floor on what was found here, unlike the thread storm: 50 children
    # x 4 threads start 200,000 actions (~56 MB of records) within ~1 s,
    # and beside two CPU hogs the drain (nice -10 among 200 runnable
    # threads) lost 1.9 % in one run of 3, and 25 % once in a clean-clone CI
    # run; the 8 MB ring holds ~70 ms of it.  What is checked is that every
    # loss is attributed and counted, and that nothing is lost without
    # ring-buffer drops (below).
    attributed = sum(lost.values())
    assert attributed <= drops + unreadable, run.lt_err[-3000:]
    if drops == 0:
        assert total_missing == 0, run.lt_err[-3000:]
