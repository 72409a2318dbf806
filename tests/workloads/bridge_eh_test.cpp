// Built exactly like the bridge (`make bridge` -> build/bridge-eh-test.so:
// static libstdc++ and libgcc, torchbridge/glibc_compat.*), to check in an
// older-glibc process (tests/integration/test_bridge_reach.py) that C++
// exceptions still unwind there: libgcc's unwinder finds frames through
// glibc_compat.cpp's _dl_find_object, which glibc before 2.35 lacks.
#include <stdexcept>
#include <string>

namespace {

[[gnu::noinline]] int deep(int n) {
  if (n == 0) throw std::runtime_error("bottom");
  return deep(n - 1) + 1;
}

}  // namespace

// Throws n exceptions through a few frames each; returns how many came back
// whole.
extern "C" __attribute__((visibility("default"))) int lt_throw_catch(int n) {
  int caught = 0;
  for (int i = 0; i < n; ++i) {
    try {
      deep(3 + i % 4);
    } catch (const std::runtime_error& e) {
      caught += std::string(e.what()) == "bottom";
    }
  }
  return caught;
}
