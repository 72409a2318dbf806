"""AdvancedProfiler's dump_stats from outside (--dump-stats DIR) and
Lightning 2.x's one-table op report (--ops-layout records), issue 15.
Real BPF, real CPython, real Lightning: the .prof files are compared with
the ones Lightning's own AdvancedProfiler(dump_stats=True) writes in the
same fit (file names), loaded with pstats, and checked against a workload
with known CPU shares; the records table against the per-step tables of
the same trace and against Lightning's PyTorchProfiler output (header).
"""
import io
import json
import os
import pstats
import subprocess

from conftest import LTRACE, WORKLOADS
from ops_table import parse_ops_report
from test_stacks import HOT, check_shares

SHARES = os.path.join(WORKLOADS, "cpu_shares.py")
TRAIN = os.path.join(WORKLOADS, "train_lightning.py")


def load(path):
    """pstats' view of a .prof file, and its printed table (which must not fail)."""
    st = pstats.Stats(str(path))
    buf = io.StringIO()
    pstats.Stats(str(path), stream=buf).strip_dirs().sort_stats("cumulative").print_stats()
    return st, buf.getvalue()


def test_known_shares_in_tottime(attach, lightning_python):
    run = attach([lightning_python, SHARES, "--seconds", "3", "--min-cpu-seconds", "1", "--in-action", "hot"],
                 ["--rate", "999", "--report", "advanced", "--dump-stats", "dumps", "-o", "t.ltrace"])
    assert run.target_rc == 0, run.target_out
    assert run.lt_rc == 0, run.lt_err
    dumps = run.tmp / "dumps"
    # no Trainer stage, no --filename, no rank: Lightning's name is the action's
    assert sorted(os.listdir(dumps)) == ["README.ltrace-bpf.txt", "hot.prof"], os.listdir(dumps)
    st, text = load(dumps / "hot.prof")
    assert "slice_loop" in text, text
    rows = {fn: v for (f, line, fn), v in st.stats.items()}
    # cut at the action: main() (which holds the `with`) and above are not in it
    assert "main" not in rows and "<module>" not in rows, sorted(rows)
    tt = {f: rows[f][2] for f in HOT}
    # tottime is samples x period: back to sample counts for the tolerance
    period = 1 / 999
    samples = {f: round(tt[f] / period) for f in HOT}
    cpu_s = json.loads(run.target_out.strip().splitlines()[-1])["cpu_s"]
    check_shares(samples, cpu_s, ".prof tottime")
    # hot_a is called by slice_loop only, and the caller edge carries its time
    callers = rows["hot_a"][4]
    assert [k[2] for k in callers] == ["slice_loop"], callers
    assert abs(next(iter(callers.values()))[3] - rows["hot_a"][3]) < 1e-9
    assert "ESTIMATES" in (dumps / "README.ltrace-bpf.txt").read_text()
    assert "ncalls a lower bound" in run.lt_err, run.lt_err
    # offline, from the trace file: the same bytes
    again = subprocess.run([LTRACE, "report", str(run.tmp / "t.ltrace"), "--dump-stats", str(run.tmp / "again")],
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert (run.tmp / "again" / "hot.prof").read_bytes() == (dumps / "hot.prof").read_bytes()


def test_one_prof_per_action_named_as_lightning_names_them(attach, lightning_python, tmp_path):
    theirs = tmp_path / "theirs"
    # a DataLoader worker (followed, sampled, no actions) writes no file and
    # leaves the trainer's names alone
    run = attach([lightning_python, TRAIN, "--epochs", "1", "--batches", "12", "--hidden", "128", "--workers", "1",
                  "--profiler", "advanced", "--dump-stats", "--dirpath", str(theirs), "--filename", "adv"],
                 ["--rate", "999", "--report", "advanced", "--children", "--dump-stats", "ours", "--dirpath", "ours",
                  "--filename", "adv"], timeout=400)
    assert run.target_rc == 0, run.target_out
    assert run.lt_rc == 0, run.lt_err
    ours = run.tmp / "ours"
    their_profs = sorted(f for f in os.listdir(theirs) if f.endswith(".prof"))
    our_profs = sorted(f for f in os.listdir(ours) if f.endswith(".prof"))
    assert len(their_profs) > 20, their_profs
    assert our_profs == their_profs, (set(our_profs) ^ set(their_profs))
    # the text reports went to Lightning's files beside them: the trainer's
    # under Lightning's own name; the worker's (no actions), when a sample
    # caught it, apart by pid
    assert "fit-adv.txt" in os.listdir(theirs), os.listdir(theirs)
    assert "fit-adv.txt" in os.listdir(ours), os.listdir(ours)
    assert "Profile stats for: [Strategy]" in (ours / "fit-adv.txt").read_text(encoding="utf-8")
    others = [f for f in os.listdir(ours) if f.endswith(".txt") and f.startswith("fit-adv-")]
    assert all(f.startswith("fit-adv-pid") for f in others) and len(others) <= 1, others
    step = next(f for f in our_profs if f.startswith("fit-adv-[Strategy]") and f.endswith(".training_step.prof"))
    for f in our_profs:
        st, text = load(ours / f)  # every one loads, sampled or not
        assert "Ordered by: cumulative time" in text
    st, text = load(ours / step)
    assert st.total_tt > 0, text
    # the step's own callee (LightningModule.training_step's body) is in it;
    # the frames above the action (Trainer.fit) are not
    names = {fn for (_, _, fn) in st.stats}
    assert any(n.endswith("training_step") for n in names), sorted(names)[:20]
    assert not any(n.endswith(("Trainer.fit", "_run_stage")) for n in names), sorted(names)
    # Lightning's own dump of the same action loads the same way (same format)
    theirs_st, _ = load(theirs / step)
    assert theirs_st.total_calls > 0


def test_records_layout_sums_the_step_tables(attach, lightning_python, tmp_path):
    theirs = tmp_path / "theirs"
    run = attach([lightning_python, TRAIN, "--epochs", "1", "--batches", "6", "--val", "--profiler", "pytorch",
                  "--dirpath", str(theirs), "--filename", "pt"],
                 ["--report", "ops", "--ops-layout", "records", "--row-limit", "-1", "-o", "t.ltrace"], timeout=400)
    assert run.target_rc == 0, run.target_out
    assert run.lt_rc == 0, run.lt_err
    # Lightning 2.x's summary: the title, then one "records" section
    lines = run.lt_out.splitlines()
    assert lines[0].startswith("Op times (pid "), lines[0]  # the path that timed them, then Lightning's layout
    lines = lines[1:]
    assert lines[:2] == ["FIT Profiler Report", "Profile stats for: records"], lines[:3]
    assert lines[2].startswith("---"), lines[2]
    assert sum(l.startswith("Profile stats for: ") for l in lines) == 1
    their_text = (theirs / "fit-pt.txt").read_text()
    assert their_text.splitlines()[:2] == lines[:2], their_text[:200]
    # same columns as torch's table, ours marked as estimates with "~"
    their_header = next(l for l in their_text.splitlines() if l.strip().startswith("Name"))
    our_header = next(l for l in lines if l.strip().startswith("Name"))
    assert our_header.replace("~", "").split() == their_header.split()[:len(our_header.split())], \
        (our_header, their_header)
    records = parse_ops_report(run.lt_out)["records"]
    # the per-step tables of the same trace, summed, give the same rows and calls
    steps = subprocess.run([LTRACE, "report", str(run.tmp / "t.ltrace"), "--report", "ops", "--row-limit", "-1"],
                           capture_output=True, text=True, timeout=300)
    assert steps.returncode == 0, steps.stderr
    tables = parse_ops_report(steps.stdout)
    step_tables = {t: rows for t, rows in tables.items() if t.endswith(("training_step", "validation_step"))}
    assert len(step_tables) == 2, sorted(tables)
    summed = {}
    for rows in step_tables.values():
        for name, r in rows.items():
            summed[name] = summed.get(name, 0) + r["calls"]
    assert {n: r["calls"] for n, r in records.items()} == summed
    assert "aten::addmm" in summed or "aten::mm" in summed, sorted(summed)
    if "outside step functions" in tables:
        assert "not in the records table" in run.lt_err, run.lt_err


def test_a_planted_symlink_is_refused(attach, lightning_python, tmp_path):
    """The .prof files go through user/core/output_file: a link planted where
    one will be written is refused (exit 14) and its target left alone."""
    victim = tmp_path / "victim"
    victim.write_text("keep me")

    def plant(pid):
        dumps = tmp_path / "run1" / "dumps"
        dumps.mkdir()
        os.symlink(victim, dumps / "hot.prof")

    run = attach([lightning_python, SHARES, "--seconds", "1", "--in-action", "hot"],
                 ["--rate", "999", "--report", "advanced", "--dump-stats", "dumps"], before_release=plant)
    assert run.target_rc == 0, run.target_out
    assert run.lt_rc == 14, (run.lt_rc, run.lt_err)
    assert victim.read_text() == "keep me"
    assert "hot.prof" in run.lt_err, run.lt_err
