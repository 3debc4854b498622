# Thin wrapper around CMake for the README's commands.
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
PREFIX ?= /usr/local
DESTDIR ?=

.PHONY: all build test demo deps asan tsan format format-check clean \
	install uninstall

all: build

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DDURO_WERROR=ON $(CMAKE_FLAGS)

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# Builds everything with warnings as errors and runs the whole suite; says
# so when the browser tests could not run (ctest lists them as skipped).
test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)
	@[ -x /usr/bin/chromium ] && command -v node >/dev/null 2>&1 && \
	    [ -d tests/browser/node_modules ] || \
	    echo "make test: the browser tests (ui_browser) were SKIPPED: they" \
	         "need /usr/bin/chromium (apt-get install chromium), node and" \
	         "npm ci --prefix tests/browser"

# The suite under AddressSanitizer + UndefinedBehaviorSanitizer.
asan:
	$(MAKE) test BUILD=build-asan CMAKE_FLAGS="-DDURO_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=Debug"

# The runtime tests under ThreadSanitizer.
tsan:
	$(MAKE) test BUILD=build-tsan CMAKE_FLAGS="-DDURO_SANITIZE=thread -DCMAKE_BUILD_TYPE=RelWithDebInfo" CTEST_ARGS="-L tsan"

# Installs the libraries, headers, duro.pc and the CMake package under
# $(DESTDIR)$(PREFIX) (README.md, "Installing").
install: build
	DESTDIR="$(DESTDIR)" cmake --install $(BUILD) --prefix "$(PREFIX)"

# Removes the files the last install from $(BUILD) wrote (CMake lists them,
# without DESTDIR, in install_manifest.txt), then duro's own directories
# (include/duro, lib/cmake/duro, share/doc/duro) when they are empty.
uninstall:
	@manifest=$(BUILD)/install_manifest.txt; \
	if [ ! -f "$$manifest" ]; then \
	    echo "uninstall: no $$manifest: nothing was installed from $(BUILD)" >&2; \
	    exit 1; \
	fi; \
	dirs=""; \
	while IFS= read -r f || [ -n "$$f" ]; do \
	    echo "-- Removing: $(DESTDIR)$$f"; \
	    rm -f "$(DESTDIR)$$f"; \
	    case "$$f" in */duro/*) dirs="$$dirs $${f%/duro/*}/duro" ;; esac; \
	done < "$$manifest"; \
	for d in $$dirs; do rmdir "$(DESTDIR)$$d" 2>/dev/null || true; done

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
