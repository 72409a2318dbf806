# ltrace-bpf — build, test, demo, install.
#   make            build build/ltrace-bpf
#   make deps       install every apt/PyPI dependency (idempotent)
#   make test       unit tests (GoogleTest) + integration tests (real BPF, CPython, Lightning)
#   make demo       attach to a bundled Lightning training run and print the report
#   make install PREFIX=/usr/local
#   make asan       unit tests under AddressSanitizer + UBSan (part of make test)
#   make check      include layering (tests/layers/layers.txt) + clang-format, no build
#   make format     clang-format every C/C++ source
#   make vmlinux    regenerate vmlinux/vmlinux.h from the running kernel's BTF
#   make static     build/ltrace-bpf-static: no shared libraries needed

PREFIX   ?= /usr/local
BUILD    ?= build
CXX      ?= g++
CLANG    ?= clang
BPFTOOL  ?= bpftool
VENV     ?= .venv
PY       := $(VENV)/bin/python

# Every build uses all cores
# (make NPROC=1 for one at a time).  Only the top-level make sets it: the
# sub-makes share its job slots.
NPROC    ?= $(shell nproc 2>/dev/null || echo 2)
ifeq ($(MAKELEVEL),0)
MAKEFLAGS += -j$(NPROC)
endif

ARCH     := x86
# -g1: line tables (backtraces, perf, gdb with file:line) at a fifth less
# compile time than full -g (5.1 s against 6.3 s for reports/aggregate/comm.cpp).
CXXFLAGS ?= -O2 -g1
# libfmt (user/text/numbers.cpp) header-only: Debian ships no static
# libfmt.a for `make static`, and the installed binary needs no libfmt.so.
FMT_FLAGS := -DFMT_HEADER_ONLY
# SKEL_DIR: where the BPF objects and skeletons are; the ASan build uses the
# plain build's (they are not C++: nothing to sanitize).
SKEL_DIR ?= $(BUILD)
override CXXFLAGS += -std=c++20 -Wall -Wextra -Wno-missing-field-initializers -I. -I$(SKEL_DIR) -Ibpf $(FMT_FLAGS)
# Each object's header dependencies, written by the compiler (-MMD): a header
# change rebuilds only what includes it.
DEPFLAGS  = -MMD -MP
LDLIBS   := -lbpf -lelf -lz -lzstd
BPFFLAGS := -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -Ivmlinux -Ibpf -Wall -Wno-unused-function \
            -idirafter /usr/include/$(shell $(CC) -dumpmachine)

# The pages' scripts: ordinary .js files (node --check in make check), each
# embedded as a C++ raw string where its page is written.
JS_SRCS  := $(wildcard reports/*/js/*.js)
CSS_SRCS := $(wildcard reports/*/css/*.css)
# The pages' scripts and style sheets, embedded as string literals (tests/tools/embed_asset.py).
JS_INCS  := $(patsubst %.js,$(SKEL_DIR)/%.js.inc,$(JS_SRCS)) $(patsubst %.css,$(SKEL_DIR)/%.css.inc,$(CSS_SRCS))

BPF_SRCS := $(wildcard bpf/*.bpf.c)
BPF_OBJS := $(patsubst bpf/%.bpf.c,$(SKEL_DIR)/%.bpf.o,$(BPF_SRCS))
SKELS    := $(patsubst bpf/%.bpf.c,$(SKEL_DIR)/%.skel.h,$(BPF_SRCS))

# One archive per source directory (tests/layers/layers.txt says which may
# use which; make test checks the includes against it).
LIB_DIRS := $(sort $(patsubst %/,%,$(dir $(wildcard reports/*/*.cpp user/*/*.cpp))))
LIB_SRCS := $(wildcard reports/*/*.cpp user/*/*.cpp)
LIB_OBJS := $(patsubst %.cpp,$(BUILD)/obj/%.o,$(LIB_SRCS))
lib_archive = $(BUILD)/lib/$(subst /,.,$(1)).a
lib_objects = $(patsubst %.cpp,$(BUILD)/obj/%.o,$(wildcard $(subst .,/,$(1))/*.cpp))
LIB_ARCHIVES := $(foreach d,$(LIB_DIRS),$(call lib_archive,$(d)))
# The archives are linked as one group: the link does not depend on their order.
LINK_LIBS = -Wl,--start-group $(LIB_ARCHIVES) -Wl,--end-group
TEST_SRCS := $(wildcard tests/unit/*.cpp)
TEST_OBJS := $(patsubst %.cpp,$(BUILD)/obj/%.o,$(TEST_SRCS))

# The in-process bridge (torchbridge/): CUPTI + NVTX -> USDT, loaded into the
# target by CUDA_INJECTION64_PATH / NVTX_INJECTION64_PATH or ptrace.  Built
# against the CUDA toolkit's headers only; libcupti is dlopen()ed at run time.
CUDA_HOME ?= /usr/local/cuda
BRIDGE_SRCS := $(wildcard torchbridge/*.cpp)
BRIDGE_OBJS := $(patsubst %.cpp,$(BUILD)/obj/%.pic.o,$(BRIDGE_SRCS)) torchbridge/exports.ld
BRIDGE_CXXFLAGS := -O2 -g -std=c++20 -Wall -Wextra -Wno-missing-field-initializers -fPIC -fvisibility=hidden \
                   -I. -Ibpf -isystem $(CUDA_HOME)/include -include torchbridge/glibc_compat.h
# The oldest glibc the bridge must load into (RHEL 8, Ubuntu 20.04,
# manylinux_2_28): the link fails if it imports anything newer.
BRIDGE_GLIBC_MAX := 2.28
# The pure parts (CUPTI record decoding) are linked into the unit tests too.
# Without the toolkit's CUPTI headers the bridge and its tests are left out
# (with a warning): everything else still builds and tests.
HAVE_CUPTI := $(wildcard $(CUDA_HOME)/include/cupti.h)
ifneq ($(HAVE_CUPTI),)
BRIDGE_TEST_OBJS := $(patsubst %.cpp,$(BUILD)/obj/%.pic.o,$(wildcard torchbridge/*_records.cpp torchbridge/names.cpp))
else
TEST_OBJS := $(filter-out $(BUILD)/obj/tests/unit/bridge_%,$(TEST_OBJS))
BRIDGE_TEST_OBJS :=
endif
# ...and their tests fill the CUDA headers' record structs.
$(BUILD)/obj/tests/unit/bridge_%.o: override CXXFLAGS += -isystem $(CUDA_HOME)/include

.PHONY: all deps check check-layers check-format check-js check-css test unit-test integration-test test-loaded demo install asan asan-build format vmlinux clean bench fuzz fuzz-build static bridge
all: $(BUILD)/ltrace-bpf bridge $(BUILD)/make-adversarial $(BUILD)/make-gpu-trace

ifneq ($(HAVE_CUPTI),)
bridge: $(BUILD)/libltrace-bridge.so $(BUILD)/bridge-eh-test.so
else
bridge:
	@echo "warning: no $(CUDA_HOME)/include/cupti.h (CUDA toolkit): libltrace-bridge.so not built, no CUPTI/NVTX" >&2
endif

$(BUILD)/obj/torchbridge/%.pic.o: torchbridge/%.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(BRIDGE_CXXFLAGS) $(DEPFLAGS) -c $< -o $@

# libstdc++ inside and nothing exported but the injection entry points: the
# target may carry its own C++ runtime.  libdl.so.2 and libpthread.so.0 are
# needed by name: before glibc 2.34 the pinned dl* / pthread_* live there.
# Checked before it replaces the last good build (tests/check_glibc_versions.sh).
BRIDGE_LDFLAGS := -static-libstdc++ -static-libgcc -Wl,--exclude-libs,ALL -Wl,-z,defs \
                  -Wl,--push-state,--no-as-needed -l:libdl.so.2 -l:libpthread.so.0 -Wl,--pop-state
$(BUILD)/libltrace-bridge.so: $(BRIDGE_OBJS) tests/check_glibc_versions.sh
	$(CXX) -shared -o $@.tmp $(filter-out %.sh,$^) $(BRIDGE_LDFLAGS)
	bash tests/check_glibc_versions.sh $@.tmp $(BRIDGE_GLIBC_MAX) || { rm -f $@.tmp; exit 1; }
	mv $@.tmp $@

# A library linked like the bridge that throws and catches: the test that
# C++ exceptions unwind inside an older glibc (tests/integration/test_bridge_reach.py).
$(BUILD)/bridge-eh-test.so: tests/workloads/bridge_eh_test.cpp $(BUILD)/obj/torchbridge/glibc_compat.pic.o \
                            tests/check_glibc_versions.sh
	$(CXX) $(BRIDGE_CXXFLAGS) -shared -o $@.tmp $< $(BUILD)/obj/torchbridge/glibc_compat.pic.o $(BRIDGE_LDFLAGS)
	bash tests/check_glibc_versions.sh $@.tmp $(BRIDGE_GLIBC_MAX) || { rm -f $@.tmp; exit 1; }
	mv $@.tmp $@

$(SKEL_DIR)/%.bpf.o: bpf/%.bpf.c vmlinux/vmlinux.h
	@mkdir -p $(SKEL_DIR)
	$(CLANG) $(BPFFLAGS) $(DEPFLAGS) -c $< -o $@

$(SKEL_DIR)/%.skel.h: $(SKEL_DIR)/%.bpf.o
	$(BPFTOOL) gen skeleton $< name lt_$* > $@

$(SKEL_DIR)/%.js.inc: %.js tests/tools/embed_asset.py
	@mkdir -p $(dir $@)
	python3 tests/tools/embed_asset.py $< > $@.tmp && mv $@.tmp $@
$(SKEL_DIR)/%.css.inc: %.css tests/tools/embed_asset.py
	@mkdir -p $(dir $@)
	python3 tests/tools/embed_asset.py $< > $@.tmp && mv $@.tmp $@

# Precompiled headers: the standard headers (user/core/precompiled.h) and,
# for the tests, GoogleTest (tests/unit/precompiled.h), parsed once per
# flavour of flags instead of once per file (-include; the ASan build
# compiles with two sets of flags, below, and a clang PCH must match its
# user's).  g++ finds NAME.h.gch beside NAME.h, and falls back to the text if
# the flags differ (-Winvalid-pch says so); clang is given the .pch.
PCH_DIR := $(BUILD)/pch
PCH_EXT := $(if $(findstring clang,$(CXX)),pch,gch)
PCH_FLAGS = $(if $(PCH),$(if $(findstring clang,$(CXX)),-include-pch $(PCH_DIR)/$(PCH).h.pch,-include $(PCH_DIR)/$(PCH).h -Winvalid-pch))
$(PCH_DIR)/%/std.h: user/core/precompiled.h
	@mkdir -p $(dir $@)
	cp $< $@
$(PCH_DIR)/%/test.h: tests/unit/precompiled.h
	@mkdir -p $(dir $@)
	cp $< $@
$(PCH_DIR)/%.h.$(PCH_EXT): $(PCH_DIR)/%.h user/core/precompiled.h | $(SKELS)
	$(CXX) $(CXXFLAGS) -x c++-header $< -o $@
$(PCH_DIR)/unfuzzed/%: override CXXFLAGS += $(UNFUZZED_FLAGS)
$(PCH_DIR)/fuzzed/%: override CXXFLAGS += $(FUZZED_FLAGS)
# Which one an object uses (the most specific pattern wins): as its flags;
# each object waits for its own only (the product build needs no GoogleTest).
$(BUILD)/obj/reports/%.o: PCH := fuzzed/std
$(BUILD)/obj/user/%.o: PCH := unfuzzed/std
$(BUILD)/obj/user/model/%.o $(BUILD)/obj/user/text/%.o $(BUILD)/obj/user/tracefile/%.o: PCH := fuzzed/std
$(BUILD)/obj/tests/unit/%.o: PCH := unfuzzed/test
PCH_FUZZED_OBJS := $(filter $(BUILD)/obj/reports/% $(BUILD)/obj/user/model/% $(BUILD)/obj/user/text/% $(BUILD)/obj/user/tracefile/%,$(LIB_OBJS))
$(PCH_FUZZED_OBJS): $(PCH_DIR)/fuzzed/std.h.$(PCH_EXT)
$(filter-out $(PCH_FUZZED_OBJS),$(LIB_OBJS)) $(BUILD)/obj/user/main.o: $(PCH_DIR)/unfuzzed/std.h.$(PCH_EXT)
$(TEST_OBJS): $(PCH_DIR)/unfuzzed/test.h.$(PCH_EXT)

# The skeletons and scripts must exist before the first compile
# (order-only); after it, the .d file names the ones an object really includes.
$(BUILD)/obj/%.o: %.cpp | $(SKELS) $(JS_INCS)
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) $(PCH_FLAGS) $(DEPFLAGS) -c $< -o $@

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

# The source directory too: a file removed from it (its mtime changes) drops
# its stale object from the archive.
.SECONDEXPANSION:
$(BUILD)/lib/%.a: $$(call lib_objects,$$*) $$(subst .,/,$$*)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $(filter %.o,$^)

$(BUILD)/ltrace-bpf: $(BUILD)/obj/user/main.o $(LIB_ARCHIVES)
	$(CXX) $(CXXFLAGS) $< $(LINK_LIBS) -o $@ $(LDLIBS)

# One self-contained binary (libbpf, libelf, zlib, zstd and libc inside) for
# machines without those libraries, e.g. the GPU check (tests/gpu/smoke.sh).
static: $(BUILD)/ltrace-bpf-static
$(BUILD)/ltrace-bpf-static: $(BUILD)/obj/user/main.o $(LIB_ARCHIVES)
	$(CXX) $(CXXFLAGS) -static $< $(LINK_LIBS) -o $@ $(LDLIBS)
	strip $@

# Crafted slow-to-report traces (tests/fuzz/make_adversarial.cpp): the
# worst-case timing test and the fuzz corpus.
$(BUILD)/make-adversarial: $(BUILD)/obj/tests/fuzz/make_adversarial.o $(LIB_ARCHIVES)
	$(CXX) $(CXXFLAGS) $< $(LINK_LIBS) -o $@ $(LDLIBS)

# A trace shaped like a Lightning fit on CUDA (tests/tools/make_gpu_trace.cpp):
# the dashboard's GPU parts on a machine without a GPU (test_dashboard.py).
$(BUILD)/make-gpu-trace: $(BUILD)/obj/tests/tools/make_gpu_trace.o $(LIB_ARCHIVES)
	$(CXX) $(CXXFLAGS) $< $(LINK_LIBS) -o $@ $(LDLIBS)

$(BUILD)/unit-tests: $(TEST_OBJS) $(BRIDGE_TEST_OBJS) $(LIB_ARCHIVES)
	$(CXX) $(CXXFLAGS) $(TEST_OBJS) $(BRIDGE_TEST_OBJS) $(LINK_LIBS) -o $@ $(LDLIBS) -lgtest -lgtest_main -pthread -ldl

deps:
	bash .ci/deps.sh

# The build needs only the apt part of deps; `make test` installs everything
# first and `make demo` what the demo needs (.ci/deps.sh demo), so each is
# one command on a fresh machine.

unit-test: $(BUILD)/unit-tests
	$(BUILD)/unit-tests

# A unit-test binary too: tests/integration/test_inject*.py run its
# InjectCli.FromEnvironment as the injector and test_dashboard.py its merged
# page (the ASan build's when there is one, as after make test).
# LT_REQUIRE_ALL: a test that would skip fails instead (tests/integration/
# conftest.py): make deps installed everything they need.  PYTEST_ARGS adds
# options (PYTEST_ARGS="-k comm" runs some).
UNIT_TESTS ?= $(if $(wildcard build-asan/unit-tests),build-asan/unit-tests,$(BUILD)/unit-tests)
PYTEST_ARGS ?=
# Two passes (tests/integration/pytest.ini): the files not marked serial on
# TEST_WORKERS pytest-xdist workers, a file per worker, then the serial ones
# alone.  A test waits on one single-threaded target most of its time (an
# import of torch and Lightning: ~5 s on one core), so one worker left the
# second core idle (~0.8 of 2 cores busy, measured over a whole run), and
# two kept 1.6 of 2 busy (810 s); three keep 1.8 busy and take 655 s.  The
# tests hold on a busy machine anyway (make test-loaded).
# Exit status 5 (no test selected, e.g. by PYTEST_ARGS="-k ...") is no failure.
TEST_WORKERS ?= 3
PYTEST_ENV = LT_UNIT_TESTS=$(abspath $(UNIT_TESTS)) LT_REQUIRE_ALL=1
integration-test: all $(UNIT_TESTS)
	@rm -f $(BUILD)/test-file-times.txt
	$(PYTEST_ENV) $(PY) -m pytest tests/integration -n $(TEST_WORKERS) --dist loadfile -m "not serial" $(PYTEST_ARGS); \
	a=$$?; [ $$a -ne 5 ] || a=0; \
	$(PYTEST_ENV) $(PY) -m pytest tests/integration -m serial $(PYTEST_ARGS); \
	b=$$?; [ $$b -ne 5 ] || b=0; [ $$a -ne 0 ] && exit $$a; exit $$b

# The integration tests beside two CPU-bound processes (tests/with_cpu_hogs.sh
# ends them however the run ends): they must pass on a busy machine.
# One test at a time beside the hogs: the load is the two hogs, as stated.
test-loaded: all $(UNIT_TESTS)
	@rm -f $(BUILD)/test-file-times.txt
	$(PYTEST_ENV) tests/with_cpu_hogs.sh -n 2 $(PY) -m pytest tests/integration $(PYTEST_ARGS)

# Checks that need no build: the include layering and clang-format.
check: check-layers check-format check-js check-css
check-js:
	@command -v node >/dev/null || { echo "check-js: node not found (apt-get install nodejs; make deps does)" >&2; exit 1; }
	@for f in $(JS_SRCS); do node --check $$f || exit 1; done; echo "js: ok ($(words $(JS_SRCS)) files)"
check-css:
	@python3 tests/tools/check_css.py $(CSS_SRCS)
check-layers:
	python3 tests/layers/check_layers.py
check-format:
	@clang-format --dry-run -Werror $(FORMAT_SRCS) && echo "format: ok ($(words $(FORMAT_SRCS)) files)"

# The unit tests run under AddressSanitizer + UBSan (make asan); `make
# unit-test` runs the plain build.
# Everything, with each phase's wall time at the end (.ci/test.sh): deps,
# check, one build of all flavours, ASan unit tests, fuzz, integration.
test:
	bash .ci/test.sh

# libFuzzer on the trace reader and on the output writers (clang, ASan +
# UBSan); FUZZ_SECONDS bounds each run.
FUZZ_SECONDS ?= 20
FUZZ_TIMEOUT ?= 10
# The fuzz targets are linked from the ASan build's objects (asan-build
# below compiles them with libFuzzer's coverage hooks): only their drivers
# are compiled for them.
FUZZ_DIR := build-fuzz
# Both link the archives and take what their drivers reach (no list of
# sources to keep): the trace reader's target feeds every aggregator and
# report through their catalogues (user/cli/aggregators.cpp,
# report_registry.cpp), so a new one is fuzzed with no edit here.
$(BUILD)/trace_reader_fuzz $(BUILD)/writers_fuzz: $(BUILD)/%: $(BUILD)/obj/tests/fuzz/%.o $(LIB_ARCHIVES)
	$(CXX) $(CXXFLAGS) -fsanitize=fuzzer $< $(LINK_LIBS) -o $@ $(LDLIBS)
$(FUZZ_DIR)/make_seed: tests/fuzz/make_seed.cpp user/tracefile/trace_writer.cpp user/core/output_file.cpp | $(SKELS)
	@mkdir -p $(dir $@)
	$(CXX) -std=c++20 -O1 -g -I. -Ibpf $^ -o $@ -lz -lzstd
fuzz-build: asan-build $(FUZZ_DIR)/make_seed
	+$(ASAN_MAKE) build-asan/trace_reader_fuzz build-asan/writers_fuzz

# Both fuzzers run at once (each is one process on one core).
# tests/fuzz/corpus: committed seeds, the crafted inputs that were slow
# (make_adversarial); an input over FUZZ_TIMEOUT seconds is a failure.
# The writers (tests/fuzz/writers_fuzz.cpp): names of any bytes -> valid
# UTF-8, JSON that parses.
fuzz: fuzz-build
	@mkdir -p $(FUZZ_DIR)/corpus $(FUZZ_DIR)/writers-corpus
	$(FUZZ_DIR)/make_seed $(FUZZ_DIR)/corpus/seed.ltrace
	@build-asan/trace_reader_fuzz -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -timeout=$(FUZZ_TIMEOUT) \
	    -print_final_stats=1 $(FUZZ_DIR)/corpus tests/fuzz/corpus > $(FUZZ_DIR)/fuzz.log 2>&1 & reader=$$!; \
	  build-asan/writers_fuzz -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -timeout=$(FUZZ_TIMEOUT) \
	    -print_final_stats=1 $(FUZZ_DIR)/writers-corpus tests/fuzz/writers_corpus > $(FUZZ_DIR)/writers_fuzz.log 2>&1; wrc=$$?; \
	  wait $$reader; rrc=$$?; \
	  echo "trace_reader_fuzz:"; tail -5 $(FUZZ_DIR)/fuzz.log; echo "writers_fuzz:"; tail -5 $(FUZZ_DIR)/writers_fuzz.log; \
	  if [ $$rrc -ne 0 ]; then grep -m5 -E "ERROR|SUMMARY" $(FUZZ_DIR)/fuzz.log; fi; \
	  if [ $$wrc -ne 0 ]; then grep -m5 -E "ERROR|SUMMARY|writers_fuzz:" $(FUZZ_DIR)/writers_fuzz.log; fi; \
	  [ $$rrc -eq 0 ] && [ $$wrc -eq 0 ]

# The unit tests under AddressSanitizer + UBSan, built by clang: g++ takes
# 2.6x as long for the same objects with both sanitizers (20 s against
# 7.4 s for reports/aggregate/comm.cpp).  -fsanitize=fuzzer-no-link adds
# libFuzzer's coverage hooks, so the fuzz targets link these very objects
# (make fuzz compiles only its two drivers).  The bridge the unit tests check
# (tests/unit/bridge_library_test.cpp) is the plain build's: it is never
# built with sanitizers.
# bpftool's skeletons declare a `_Bool` (C's name; g++ takes it in C++,
# clang++ does not).
# Only what the fuzz targets link (reports/, user/model/, user/text/, user/tracefile/)
# is compiled at -O1 with libFuzzer's hooks; the rest of user/ and the tests'
# own code, which no fuzzer runs, at -O0 without them: clang takes 3.8 s
# against 6.8 s for reports/aggregate/comm.cpp, 4.2 s against 6.2 s for
# tests/unit/comm_times_test.cpp.  Both keep ASan and UBSan.
SAN_CXX := clang++
ASAN_FLAGS := -O1 -g1 -fsanitize=address,undefined,fuzzer-no-link -fno-omit-frame-pointer -D_Bool=bool
ASAN_MAKE = $(MAKE) BUILD=build-asan SKEL_DIR=$(BUILD) CXX=$(SAN_CXX) CXXFLAGS="$(ASAN_FLAGS)" \
            UNFUZZED_FLAGS="-O0 -fno-sanitize=fuzzer-no-link" FUZZED_FLAGS="-O1 -fsanitize=fuzzer-no-link"
# (the recipes below run it with `+`: a $(MAKE) reached through another
# variable is not seen as recursive, and would build on one core)
UNFUZZED_FLAGS ?=
FUZZED_FLAGS ?=
$(BUILD)/obj/tests/unit/%.o $(BUILD)/obj/user/%.o: override CXXFLAGS += $(UNFUZZED_FLAGS)
# (applied after the line above: the more specific pattern comes last)
$(BUILD)/obj/user/model/%.o $(BUILD)/obj/user/text/%.o $(BUILD)/obj/user/tracefile/%.o: override CXXFLAGS += $(FUZZED_FLAGS)
asan-build: $(SKELS) $(JS_INCS)
	+$(ASAN_MAKE) build-asan/unit-tests
# The unit tests whose point is scale take 81-114 s each under ASan (a
# 64-rank x 3000-step merged page): they run at full scale in a plain build
# of their own files ($(BUILD)/scale-tests) and are left out of the ASan run
# (whose smaller merged-page tests cover the same code).  BoundedMemory runs
# in both: 1 M steps plain, 100 k under ASan.
SCALE_TEST_SRCS := tests/unit/merged_page_test.cpp tests/unit/bounded_memory_test.cpp
SCALE_TESTS := MergedPage.*Under20MB:BoundedMemory.*
$(BUILD)/scale-tests: $(patsubst %.cpp,$(BUILD)/obj/%.o,$(SCALE_TEST_SRCS)) $(LIB_ARCHIVES)
	$(CXX) $(CXXFLAGS) $(filter %.o,$^) $(LINK_LIBS) -o $@ $(LDLIBS) -lgtest -lgtest_main -pthread -ldl
asan: asan-build bridge $(BUILD)/scale-tests
	# InjectCli.FromEnvironment injects into a process the integration tests start.
	@bash tests/unit/asan_shards.sh $(BUILD) '$(SCALE_TESTS)'

# Only what the demo needs: the build packages, .venv with torch and
# Lightning, and the ltrace-bpf binary.
demo:
	bash .ci/deps.sh apt-demo
	@mkdir -p $(BUILD)
	@# torch and Lightning download while ltrace-bpf compiles
	@bash .ci/deps.sh venv-demo > $(BUILD)/deps-demo.log 2>&1 & venv=$$!; \
	  $(MAKE) --no-print-directory $(BUILD)/ltrace-bpf; rc=$$?; \
	  wait $$venv || { cat $(BUILD)/deps-demo.log; exit 1; }; exit $$rc
	bash tests/workloads/demo.sh

bench: deps
	$(MAKE) all
	$(PY) bench/overhead.py

install: all
	install -D -m 0755 $(BUILD)/ltrace-bpf $(DESTDIR)$(PREFIX)/bin/ltrace-bpf
	install -D -m 0755 $(BUILD)/libltrace-bridge.so $(DESTDIR)$(PREFIX)/lib/ltrace-bpf/libltrace-bridge.so

FORMAT_SRCS := $(wildcard bpf/*.c bpf/*.h user/*.cpp user/*/*.cpp user/*/*.h reports/*/*.cpp reports/*/*.h \
                 tests/unit/*.cpp tests/fuzz/*.cpp tests/tools/*.cpp torchbridge/*.cpp torchbridge/*.h)
format:
	clang-format -i $(FORMAT_SRCS)

vmlinux:
	$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > vmlinux/vmlinux.h

clean:
	rm -rf build build-asan build-fuzz
.SECONDARY:
