// `dump` output (user/cli/dump_output.cpp) from synthetic process dumps:
// whatever bytes the target's names hold, the text is valid UTF-8 with one
// line per frame, and the JSON strings give back the target's str.  And the
// system-call names a blocked thread is reported in.
#include <gtest/gtest.h>
#include <sys/syscall.h>

#include "user/cli/dump_output.h"
#include "user/proc/syscall_names.h"
#include "user/text/utf8_text.h"

namespace {

lt::python::ProcessDump odd_process() {
  lt::python::ProcessDump d;
  d.pid = 42;
  d.comm = "py\xff";
  d.cmdline = {"python3", "tr\nain.py"};
  d.python_version = "3.11";
  d.python_binary = "/usr/bin/python3.11";
  d.gil_known = true;
  d.gil_tid = 43;
  lt::python::ThreadDump t;
  t.status.tid = 43;
  t.status.name = "w\x1b[2J";
  t.status.state = 'S';
  t.status.syscall = SYS_futex;
  t.status.pc = 0x7f00;
  t.python = true;
  t.holds_gil = true;
  t.leaf = lt::proc::NativeName{"__futex_abstimed_wait_common", "libc.so.6", "/usr/lib/libc.so.6"};
  // A lone surrogate as CPython's decoder keeps it (ED B3 BF), a stray byte,
  // a newline, and a frame that could not be read.
  t.frames = {{"w\xc3\xa9ird", "odd\xed\xb3\xbf\n\xfe.py", 2, true}, {"", "", 0, false}, {"<module>", "m.py", 0, true}};
  t.torn = true;
  d.threads.push_back(t);
  lt::python::ThreadDump native;
  native.status.tid = 44;
  native.status.state = 'R';
  d.threads.push_back(native);
  return d;
}

TEST(DumpOutput, TextIsValidUtf8OneLinePerFrame) {
  const std::string text = lt::dump_text(odd_process());
  EXPECT_EQ(lt::utf8_text(text), text);  // valid UTF-8 already
  EXPECT_NE(text.find("Process 42: python3 tr\\x0aain.py\n"), std::string::npos) << text;
  EXPECT_NE(text.find("GIL held by thread 43"), std::string::npos) << text;
  EXPECT_NE(text.find("Thread 43 \"w\\x1b[2J\" (holds the GIL): sleeping in futex, at "
                      "__futex_abstimed_wait_common (libc.so.6)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\n    w\xc3\xa9ird (odd\\udcff\\x0a\\xfe.py:2)\n    <unreadable code object>\n"
                      "    <module> (m.py:?)\n    <the stack changed"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("Thread 44 (no Python): running\n"), std::string::npos) << text;
}

TEST(DumpOutput, JsonGivesBackTheStrings) {
  const std::string json = lt::dump_json({odd_process()});
  EXPECT_EQ(lt::utf8_text(json), json);
  EXPECT_NE(json.find("\"file\": \"odd\\udcff\\n\\udcfe.py\", \"line\": 2"), std::string::npos) << json;
  EXPECT_NE(json.find("\"frames\": [{\"function\": \"w\xc3\xa9ird\""), std::string::npos) << json;
  EXPECT_NE(json.find(", null, {\"function\": \"<module>\", \"file\": \"m.py\", \"line\": null}]"), std::string::npos)
      << json;
  EXPECT_NE(json.find("\"syscall\": \"futex\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"gil_tid\": 43"), std::string::npos) << json;
  EXPECT_NE(json.find("\"ip\": \"0x7f00\""), std::string::npos) << json;
}

// The main thread's place, for watch's stall summary: its innermost
// frame, and where the job's own code is when that frame is the standard
// library's or an installed package's.
TEST(DumpOutput, TheMainThreadIsAtItsInnermostFrameFromTheJobsOwnCode) {
  lt::python::ProcessDump d;
  d.pid = 7;
  lt::python::ThreadDump t;
  t.status.tid = 7;
  t.status.state = 'S';
  t.status.syscall = SYS_futex;
  t.python = true;
  t.frames = {
      {"Condition.wait", "/usr/lib/python3.11/threading.py", 320, true},
      {"Event.wait", "/usr/lib/python3.11/threading.py", 622, true},
      {"Net.training_step", "/home/u/job.py", 30, true},
      {"_call_lightning_module_hook", "/v/lib/python3.11/site-packages/lightning/pytorch/trainer/call.py", 1, true}};
  d.threads.push_back(t);
  const std::string at = lt::main_thread_at(d);
  EXPECT_NE(at.find(" at Condition.wait (/usr/lib/python3.11/threading.py:320), from Net.training_step "
                    "(/home/u/job.py:30)"),
            std::string::npos)
      << at;
  // Already the job's own code: said once.
  d.threads[0].frames.erase(d.threads[0].frames.begin(), d.threads[0].frames.begin() + 2);
  EXPECT_EQ(lt::main_thread_at(d).find(", from "), std::string::npos) << lt::main_thread_at(d);
}

// A stall in the DataLoader: the worker in the job's own code is named
// (an idle one waits in torch's worker loop and is not).
TEST(DumpOutput, AStallInTheDataLoaderNamesTheWorkerInTheJobsCode) {
  auto process = [](int pid, std::vector<lt::python::PyFrameInfo> frames) {
    lt::python::ProcessDump d;
    d.pid = pid;
    lt::python::ThreadDump t;
    t.status.tid = pid;
    t.status.state = 'S';
    t.status.syscall = SYS_poll;
    t.python = true;
    t.frames = std::move(frames);
    d.threads.push_back(t);
    return d;
  };
  const std::string torch_data = "/v/lib/python3.11/site-packages/torch/utils/data/";
  const auto loop =
      process(7, {{"_PollLikeSelector.select", "/usr/lib/python3.11/selectors.py", 415, true},
                  {"_MultiProcessingDataLoaderIter._try_get_data", torch_data + "dataloader.py", 1133, true},
                  {"<module>", "/home/u/job.py", 79, true}});
  const auto idle = process(8, {{"Queue.get", "/usr/lib/python3.11/multiprocessing/queues.py", 113, true},
                                {"_worker_loop", torch_data + "_utils/worker.py", 275, true}});
  const auto hung = process(9, {{"blocking_getitem_here", "/home/u/job.py", 41, true},
                                {"DS.__getitem__", "/home/u/job.py", 45, true},
                                {"_worker_loop", torch_data + "_utils/worker.py", 308, true}});
  const std::string why = lt::loader_wait(loop, {idle, hung});
  EXPECT_EQ(why.rfind("; its DataLoader waits for process 9: main thread ", 0), 0u) << why;
  EXPECT_NE(why.find(" at blocking_getitem_here (/home/u/job.py:41)"), std::string::npos) << why;
  EXPECT_EQ(lt::loader_wait(loop, {idle}), "");  // no worker in the job's code
  EXPECT_EQ(lt::loader_wait(hung, {idle}), "");  // not waiting in a DataLoader
}

TEST(SyscallNames, ByNumber) {
  EXPECT_EQ(lt::proc::syscall_name(SYS_read), "read");
  EXPECT_EQ(lt::proc::syscall_name(SYS_futex), "futex");
  EXPECT_EQ(lt::proc::syscall_name(SYS_epoll_wait), "epoll_wait");
  EXPECT_EQ(lt::proc::syscall_name(SYS_clock_nanosleep), "clock_nanosleep");
  EXPECT_EQ(lt::proc::syscall_name(100000), "syscall 100000");
  EXPECT_EQ(lt::proc::syscall_name(-1), "syscall -1");
}

}  // namespace
