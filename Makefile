# Thin wrapper around CMake for the README's commands.
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

.PHONY: all build test demo deps asan tsan format format-check clean

all: build

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DDURO_WERROR=ON $(CMAKE_FLAGS)

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# Builds everything with warnings as errors and runs the whole suite.
test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)

# The suite under AddressSanitizer + UndefinedBehaviorSanitizer.
asan:
	$(MAKE) test BUILD=build-asan CMAKE_FLAGS="-DDURO_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=Debug"

# The runtime tests under ThreadSanitizer.
tsan:
	$(MAKE) test BUILD=build-tsan CMAKE_FLAGS="-DDURO_SANITIZE=thread -DCMAKE_BUILD_TYPE=RelWithDebInfo" CTEST_ARGS="-L tsan"

deps:
	./.ci/install-deps

# Installs what is missing, builds, and runs examples/demo.c on a fresh
# SQLite file in the build directory.
demo:
	./.ci/install-deps
	$(MAKE) build
	rm -f $(BUILD)/demo.db $(BUILD)/demo.db-wal $(BUILD)/demo.db-shm
	$(BUILD)/examples/demo sqlite:$(BUILD)/demo.db

format:
	clang-format -i $$(git ls-files '*.c' '*.h' '*.cpp')

format-check:
	clang-format --dry-run --Werror $$(git ls-files '*.c' '*.h' '*.cpp')

clean:
	rm -rf build build-asan build-tsan
