// LD_PRELOAD'ed by test_first_instruction.py: holds a process up before its
// main() (an ELF constructor sleeping LT_SLOW_START_MS), as a busy machine
// or a slow start-up library does: its interpreter gets its thread-state key
// only seconds after the exec hold let it go.
#include <stdlib.h>
#include <unistd.h>

__attribute__((constructor)) static void held_up_before_main(void) {
  const char* ms = getenv("LT_SLOW_START_MS");
  if (ms) usleep((useconds_t)atoi(ms) * 1000);
}
