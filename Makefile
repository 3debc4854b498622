# Thin wrapper around CMake for the README's commands.
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
# Warnings as errors: on in CI (.ci/run says WERROR=ON), off by default so a
# newer compiler's new warning never stops a user's build.
WERROR ?= OFF
PREFIX ?= /usr/local
DESTDIR ?=

.PHONY: all build test demo deps asan tsan format format-check clean \
	install uninstall

all: build

# Configures $(BUILD) when it has no cache yet or was configured with other
# flags than these (kept in $(BUILD)/make-flags); a flag dropped from
# CMAKE_FLAGS keeps its cached value until `make clean`.
build:
	@flags='-DDURO_WERROR=$(WERROR) $(CMAKE_FLAGS)'; \
	if [ ! -f $(BUILD)/CMakeCache.txt ] || \
	   [ "$$(cat $(BUILD)/make-flags 2>/dev/null)" != "$$flags" ]; then \
	    echo "cmake -S . -B $(BUILD) $$flags"; \
	    cmake -S . -B $(BUILD) $$flags && \
	        printf '%s\n' "$$flags" > $(BUILD)/make-flags; \
	fi
	cmake --build $(BUILD) -j $(JOBS)

# Installs what is missing, the servers the PostgreSQL tests start
# included, builds everything and runs the whole suite (WERROR=ON: warnings
# as errors, as CI does); says so when the browser tests could not run
# (ctest lists them as skipped).
test:
	./.ci/install-deps --tests
	$(MAKE) build
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
	printf '%s\n' "$(DESTDIR)" > $(BUILD)/install_destdir

# Removes the files the last install from $(BUILD) wrote (CMake lists them,
# without DESTDIR, in install_manifest.txt; the install's DESTDIR is in
# install_destdir), then duro's own directories (include/duro,
# lib/cmake/duro, share/doc/duro and the directories in them, deepest
# first) when they are empty. A DESTDIR given here
# must be the install's: a staged install is never uninstalled from /.
uninstall:
	@manifest=$(BUILD)/install_manifest.txt; \
	if [ ! -f "$$manifest" ]; then \
	    echo "uninstall: no $$manifest: nothing was installed from $(BUILD)" >&2; \
	    exit 1; \
	fi; \
	dest=$$(cat $(BUILD)/install_destdir 2>/dev/null); \
	if [ -n "$(DESTDIR)" ] && [ "$(DESTDIR)" != "$$dest" ]; then \
	    echo "uninstall: the last install from $(BUILD) was into" \
	         "DESTDIR='$$dest', not '$(DESTDIR)'" >&2; \
	    exit 1; \
	fi; \
	dirs=""; \
	while IFS= read -r f || [ -n "$$f" ]; do \
	    echo "-- Removing: $$dest$$f"; \
	    rm -f "$$dest$$f"; \
	    case "$$f" in */duro/*) \
	        top="$${f%/duro/*}/duro"; d="$${f%/*}"; \
	        while [ "$${#d}" -gt "$${#top}" ]; do \
	            dirs="$$dirs $$d"; d="$${d%/*}"; \
	        done; \
	        dirs="$$dirs $$top" ;; \
	    esac; \
	done < "$$manifest"; \
	for d in $$(printf '%s\n' $$dirs | sort -ru); do \
	    rmdir "$$dest$$d" 2>/dev/null || true; \
	done

# Installs what is missing, for building and for the tests.
deps:
	./.ci/install-deps --tests

# Installs what is missing for building (not the servers only the tests
# need), builds, and runs examples/demo.c on a fresh SQLite file in the
# build directory.
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
