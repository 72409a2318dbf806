"""Names the target holds that are not valid Unicode text (issue 17): a lone
surrogate in an action name, a function name and a module's file name (what
surrogateescape makes of a file name's bytes), and raw bytes in the command
line.  Every writer must write valid UTF-8; JSON must give back the
target's exact str; text shows them as Python's backslashreplace writes them
(docs/design-actions.md, "Names that are not UTF-8")."""
import json
import os
import subprocess

import pytest

from conftest import LTRACE, WORKLOADS, parse_simple_report, pyenv_python
import lightning_site

NAMES = os.path.join(WORKLOADS, "utf8_names.py")


def text_form(s):
    """What Python's backslashreplace writes for a str: what our text shows."""
    return s.encode("utf-8", "backslashreplace").decode("ascii" if s.isascii() else "utf-8")


def read_utf8(path):
    data = open(path, "rb").read()
    return data.decode("utf-8")  # strict: any invalid byte fails the test


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One attached run of the workload, recorded; every export from its trace."""
    from conftest import wait_for
    python = pyenv_python(12)
    assert python, "CPython 3.12 missing"
    tmp = tmp_path_factory.mktemp("utf8")
    site = lightning_site.build(str(tmp / "pl266"), "2.6.6")
    go, log = tmp / "go", tmp / "job.log"
    env = dict(os.environ, PYTHONPATH=site, PYTHONIOENCODING="utf-8")
    with open(log, "w") as f:
        # b"\xfc" on the command line: /proc/PID/cmdline holds the raw byte.
        job = subprocess.Popen([python, NAMES, "--wait-file", str(go), "--tag", b"argv\xfc"], stdout=f,
                               stderr=subprocess.STDOUT, env=env, cwd=tmp)
    try:
        wait_for(str(log), "READY", 300, job)
        trace, files = tmp / "run.ltrace", tmp / "reports"
        with open(tmp / "live.out", "wb") as out, open(tmp / "live.err", "wb") as err:
            lt = subprocess.Popen([LTRACE, "--pid", str(job.pid), "-v", "-o", str(trace), "--rate", "499",
                                   "--report", "simple,advanced"], stdout=out, stderr=err, cwd=tmp)
        wait_for(str(tmp / "live.err"), "attached", 120, lt)
        go.touch()
        assert job.wait(300) == 0, log.read_text()
        assert lt.wait(300) == 0, (tmp / "live.err").read_bytes()
    finally:
        if job.poll() is None:
            job.kill()
    result = json.loads(log.read_text().split("RESULT ", 1)[1])
    out = {k: tmp / f"export.{k}" for k in ("json", "html", "speedscope.json", "svg", "collapsed", "dump")}
    r = subprocess.run([LTRACE, "report", str(trace), "--report", "simple,advanced", "--chrome", str(out["json"]),
                        "--html", str(out["html"]), "--speedscope", str(out["speedscope.json"]),
                        "--flamegraph", str(out["svg"]), "--collapsed", str(out["collapsed"]),
                        "--dump", str(out["dump"]), "--dirpath", str(files), "--filename", "prof"],
                       capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return dict(tmp=tmp, result=result, out=out, files=files, report_stderr=r.stderr,
                live=(tmp / "live.out").read_bytes(), live_err=(tmp / "live.err").read_bytes())


def test_every_writer_writes_valid_utf8(run):
    live = run["live"].decode("utf-8")  # strict
    run["live_err"].decode("utf-8")
    run["report_stderr"].decode("utf-8")
    for path in run["out"].values():
        read_utf8(path)
    reports = list(run["files"].iterdir())
    assert reports, "no Lightning report file written"
    for path in reports:
        read_utf8(path)
    assert live


def test_json_gives_back_the_targets_strings(run):
    res = run["result"]
    assert res["action"] == "bad\udcff-name"  # the workload's own record of its strs
    chrome = json.load(open(run["out"]["json"], encoding="utf-8"))
    events = chrome["traceEvents"] if isinstance(chrome, dict) else chrome
    names = [e.get("name") for e in events if e.get("ph") == "X"]
    assert names.count(res["action"]) == res["calls"], sorted(set(map(repr, names)))
    # The command line's raw byte 0xFC comes back as surrogateescape decodes it: sys.argv's own str.
    procs = [e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"]
    assert any(" ".join(res["argv"]) in p for p in procs), procs
    assert any(p.encode("utf-8", "surrogateescape").find(b"argv\xfc") >= 0 for p in procs)

    frames = json.load(open(run["out"]["speedscope.json"], encoding="utf-8"))["shared"]["frames"]
    fn = [f for f in frames if f["name"] == res["function"]]
    assert fn, sorted(repr(f["name"]) for f in frames)
    assert fn[0]["file"] == res["file"] and "mod\udcfd" in res["file"], (fn[0], res["file"])


def test_text_shows_backslashreplace(run):
    res = run["result"]
    action, func = text_form(res["action"]), text_form(res["function"])
    assert action == "bad\\udcff-name"
    live = run["live"].decode("utf-8")
    rows = parse_simple_report(live)
    assert action in rows and int(rows[action][1]) == res["calls"], list(rows)
    assert func in live  # the Advanced report's function rows
    files = "".join(read_utf8(path) for path in run["files"].iterdir())  # Lightning's report files
    assert action in files and func in files, sorted(p.name for p in run["files"].iterdir())
    assert action in read_utf8(run["out"]["dump"])
    collapsed = read_utf8(run["out"]["collapsed"])
    assert func in collapsed and "mod\\udcfd" in collapsed
    for export in ("html", "svg"):
        text = read_utf8(run["out"][export])
        assert func in text, export
    html = read_utf8(run["out"]["html"])
    assert action in html
    assert "argv\\xfc" in html  # a raw byte that is no surrogate: \xNN
    # No U+FFFD: nothing of the names was thrown away.
    assert "\ufffd" not in live + html + collapsed
