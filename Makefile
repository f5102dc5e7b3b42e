# Thin wrapper: the real build is CMake. See README.md.
BUILD ?= build
ASAN_BUILD ?= build-asan
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
PORT ?= 8080

.PHONY: all setup build build-asan run test unit clean eval

all: build

setup:
	bash tools/setup.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS)

build: setup $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

build-asan: setup
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DCLAUSEQA_SANITIZE=ON -DCLAUSEQA_CUDA=OFF $(CMAKE_FLAGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)

# make run says little: what the set-up installs, one line for the build (its output goes to $(BUILD)/build.log and is
# shown only when it fails), one for the demo KB, then the server's few lines, its address last. PORT=N picks the port.
run:
	@bash tools/setup.sh --quiet
	@mkdir -p $(BUILD)
	@{ [ -f $(BUILD)/CMakeCache.txt ] || cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS); } \
	   > $(BUILD)/build.log 2>&1 && cmake --build $(BUILD) -j $(JOBS) >> $(BUILD)/build.log 2>&1 \
	 || { tail -n 40 $(BUILD)/build.log; echo "make run: the build failed; $(BUILD)/build.log has its whole output"; exit 1; }
	@echo "built $(BUILD)/clauseqa (log: $(BUILD)/build.log)"
	@bash tools/demo_kb.sh $(BUILD)/clauseqa data
	@exec $(BUILD)/clauseqa serve --data data --port $(PORT)

# Every test: unit tests under ASan/UBSan, then the whole suite (unit, integration) on the release build.
test: build build-asan
	cd $(ASAN_BUILD) && ctest --output-on-failure -L unit -j $(JOBS)
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
