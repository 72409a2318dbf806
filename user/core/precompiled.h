// Precompiled for every product and test source (the Makefile passes it
// with -include; no source includes it by name): the standard headers that
// most of them include anyway, parsed once per build flavour instead of once
// per file (0.6 s of 4.5 s for reports/aggregate/comm.cpp at -O2).  Sources
// still include what they use: a file compiled without it must build too.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>
