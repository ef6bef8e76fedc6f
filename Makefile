# ordo — `make` builds build/ordo, `make test` builds and runs every test, `make demo` runs the demo.
# Every target installs missing Debian packages first (scripts/install-deps.sh).
JOBS ?= $(shell nproc)
BUILD ?= build
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo

.PHONY: build deps configure test demo clean gpu gpu-bundle gpu-amd-check

build: configure
	cmake --build $(BUILD) -j $(JOBS)

deps:
	@bash scripts/install-deps.sh

configure: deps
	@test -f $(BUILD)/CMakeCache.txt || cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 600

demo: build
	./$(BUILD)/ordo demo --config configs/offload.toml

clean:
	rm -rf $(BUILD)

# GPU builds (DESIGN §2.2). `make gpu`: NVIDIA build (nvcc, sm_90) of ordo and gpu_check in build-gpu/.
# `make gpu-bundle`: ordo, gpu_check and the libraries the GPU machine lacks in gpu-bundle/;
# there, `gpu-bundle/checks` runs every GPU check (tools/gpu_checks.sh), `gpu-bundle/trace_checks`
# the trace checks (tools/gpu_trace_checks.sh), `gpu-bundle/store_checks` the store server checks
# (tools/gpu_store_checks.sh), `gpu-bundle/pd_checks` the P/D topologies with GPU nodes
# (tools/gpu_pd_checks.sh), `gpu-bundle/model_checks` the Hugging Face checkpoints CPU == GPU
# (tools/gpu_model_checks.sh), `gpu-bundle/speed` issue 14's speed table in one call
# (tools/gpu_speed.sh), `gpu-bundle/qwen_real` issue 37 item 8 on a real-width Qwen3.5
# (tools/gpu_qwen_real.sh), and `gpu-bundle/run` is ordo.
# `make gpu-amd-check`: compiles kernels/hip for gfx90a with Debian's hipcc (no AMD GPU needed).
GPU_BUILD ?= build-gpu
GPU_AMD_BUILD ?= build-gpu-amd
BUNDLE_GPU ?= scripts/bundle-gpu.sh

gpu: deps
	@test -f $(GPU_BUILD)/CMakeCache.txt || cmake -S . -B $(GPU_BUILD) $(CMAKE_FLAGS) -DORDO_GPU=hip-nvidia
	cmake --build $(GPU_BUILD) -j $(JOBS) --target gpu_check ordo

gpu-bundle: gpu
	rm -rf gpu-bundle
	$(BUNDLE_GPU) $(GPU_BUILD)/ordo gpu-bundle
	cp $(GPU_BUILD)/gpu_check gpu-bundle/ && strip gpu-bundle/gpu_check
	cp tools/gpu_checks.sh gpu-bundle/checks
	cp tools/gpu_trace_checks.sh gpu-bundle/trace_checks
	cp tools/gpu_store_checks.sh gpu-bundle/store_checks
	cp tools/gpu_pd_checks.sh gpu-bundle/pd_checks
	cp tools/gpu_model_checks.sh gpu-bundle/model_checks
	cp tools/gpu_speed.sh gpu-bundle/speed
	cp tools/gpu_qwen_real.sh gpu-bundle/qwen_real

gpu-amd-check:
	@bash scripts/install-deps.sh --amd
	@test -f $(GPU_AMD_BUILD)/CMakeCache.txt || cmake -S . -B $(GPU_AMD_BUILD) $(CMAKE_FLAGS) -DORDO_GPU=hip-amd
	cmake --build $(GPU_AMD_BUILD) -j $(JOBS) --target ordo_gpu_amd_check
