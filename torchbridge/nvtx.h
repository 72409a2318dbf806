// NVTX3 injection (NVTX_INJECTION64_PATH -> InitializeInjectionNvtx2): the
// bridge's implementations of the NVTX calls, and its domain / registered
// string tables (kept always, replayed through ltrace:name on attach).
#pragma once

#include <cstdint>

namespace ltb::nvtx {

// Announces every NVTX domain and registered string through ltrace:name.
void replay_names();
// Modules (NVTX copies) that handed us their tables so far.
uint32_t module_count();
// One replay per attach: whoever sees the attach first (the poll thread at the
// session's rising edge, or the first NVTX event while ltrace:session is
// attached, for processes without a poll thread) claims it.
bool claim_replay();
void note_session_left();

// fork(): lock the tables in the parent around fork, reset in the child.
void atfork_prepare();
void atfork_parent();
void atfork_child();

}  // namespace ltb::nvtx
