# ordo — `make` builds build/ordo, `make test` builds and runs every test, `make demo` runs the demo.
# Every target installs missing Debian packages first (scripts/install-deps.sh).
JOBS ?= $(shell nproc)
BUILD ?= build
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo

.PHONY: build deps configure test demo clean

build: configure
	cmake --build $(BUILD) -j $(JOBS)

deps:
	@bash scripts/install-deps.sh

configure: deps
	@test -f $(BUILD)/CMakeCache.txt || cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 600

demo: build
	./$(BUILD)/ordo demo

clean:
	rm -rf $(BUILD)
