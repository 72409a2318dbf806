// The exception a Python process died of, from the end of its own stderr:
// the last traceback's last line ("RuntimeError: CUDA out of memory ...").
// watch's exit captures read it where the process's stderr is a file (a
// batch script's slurm-N.out, nohup.out, a redirected log): an escaped
// exception's type and message are the first thing a user asks of a
// failed run, and nothing else from outside has them.
#pragma once
#include <string>
#include <string_view>

namespace lt {

// `tail`: the last bytes of the stream (cut anywhere). The last
// "Traceback (most recent call last):" block's first unindented line after
// it (CPython's format: the frames are indented, the exception line is
// not; a chained exception's "During handling ..." lines start another
// block), as valid UTF-8, at most kMaxExceptionLine bytes; "" when the
// tail holds no traceback ending in such a line.
inline constexpr std::size_t kMaxExceptionLine = 300;
std::string last_exception(std::string_view tail);

}  // namespace lt
