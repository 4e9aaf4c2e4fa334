# ninfer — build, test and demo targets. `make help` lists them.
GO      ?= go
BIN     ?= bin
BUILD   ?= build
PKGS    := ./...
TESTFLAGS ?= -count=1 -timeout 20m

.PHONY: help build install test test-race test-seeds vet fmt-check testmodel demo bench fuzz clean \
	cuda cuda-toolchain cuda-kernels cuda-check test-cuda-sim test-simt test-cuda-driver ci-cuda device-bundle device-bundle-link

help:
	@echo "make build      build every tool into $(BIN)/"
	@echo "make install    go install ./cmd/..."
	@echo "make test       gofmt check, go vet, go test (the CI command)"
	@echo "make test-seeds N=300  the randomized op tests of every backend here under N fresh base seeds (not CI; RUN=, SIM=0, SIMT=1)"
	@echo "make test-race  the signal- and file-handling packages under -race (CI runs it too)"
	@echo "make testmodel  generate the tiny random Qwen3.5 model and convert it ($(BUILD)/tiny.ninfer)"
	@echo "make demo       main job: bench | report (plain, MTP, two recipes) and a continuation on the default model, CPU backend"
	@echo "make bench      Go benchmarks (see docs/PERF.md)"
	@echo "make fuzz       run the fuzz targets (FUZZTIME=10m each)"
	@echo "make cuda       every tool with the CUDA backend into $(BIN)/ (CUDA_HOME, or the pinned PyPI CUDA 13.0 in $(BUILD)/cuda)"
	@echo "make cuda-check compile all kernels for all targets, print the ptxas table, fail on spills/local memory"
	@echo "make test-cuda-sim  the CUDA kernels under the host SIMT harness: harness self-tests, op tests, backend and engine tests"
	@echo "make device-bundle  binaries and test executables for scripts/device-check.sh on a GPU machine"

build:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ ./cmd/...

install:
	$(GO) install ./cmd/...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

test: fmt-check vet
	$(GO) test $(TESTFLAGS) $(PKGS)

# The packages that handle stopping signals and write files, under the race
# detector (CI runs it after make test; the signal tests drive the real binaries).
RACE_PKGS ?= ./pkg/cliutil ./cmd/ninfer-bench ./cmd/ninfer-run ./cmd/ninfer-convert ./cmd/ninfer-report ./pkg/artifact
test-race:
	$(GO) test -race $(TESTFLAGS) $(RACE_PKGS)

# Seed sweep (not CI): run before landing a kernel or tolerance change and
# record the summary in docs/ACCURACY.md.
N ?= 100
SIM ?= 1
test-seeds:
	scripts/test-seeds.sh -n $(N) $(if $(RUN),-run '$(RUN)') $(if $(filter 0,$(SIM)),-no-sim) $(if $(filter 1,$(SIMT)),-simt)

$(BUILD)/tiny-hf/config.json:
	@mkdir -p $(BUILD)
	$(GO) run ./cmd/ninfer-testmodel --force $(BUILD)/tiny-hf

$(BUILD)/tiny.ninfer: $(BUILD)/tiny-hf/config.json
	$(GO) run ./cmd/ninfer-convert --recipe q8 $(BUILD)/tiny-hf $@

testmodel: $(BUILD)/tiny.ninfer

# The default model: the committed HF directory, converted with two recipes.
DEFAULT_MODEL ?= models/tiny-shakespeare
$(BUILD)/shakespeare-%.ninfer: $(DEFAULT_MODEL)/model.safetensors $(DEFAULT_MODEL)/config.json
	@mkdir -p $(BUILD)
	$(GO) run ./cmd/ninfer-convert --recipe $* --name tiny-shakespeare $(DEFAULT_MODEL) $@

demo: build $(BUILD)/shakespeare-q8.ninfer $(BUILD)/shakespeare-groupwise-int.ninfer
	./scripts/demo.sh $(BIN) $(BUILD) $(DEFAULT_MODEL)

bench:
	$(GO) test -run '^$$' -bench . -benchtime 2x ./pkg/...

FUZZTIME ?= 10m
fuzz:
	$(GO) test ./pkg/artifact -run '^$$' -fuzz FuzzOpen -fuzztime $(FUZZTIME) -fuzzminimizetime 2s -parallel 1
	$(GO) test ./pkg/safetensors -run '^$$' -fuzz FuzzOpen -fuzztime $(FUZZTIME) -fuzzminimizetime 2s -parallel 1
	$(GO) test ./pkg/artifact -run '^$$' -fuzz '^FuzzTextConfig$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s -parallel 1
	$(GO) test ./pkg/benchfmt -run '^$$' -fuzz '^FuzzParseLine$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s -parallel 1
	$(GO) test ./pkg/benchfmt -run '^$$' -fuzz '^FuzzDecodeDocument$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s -parallel 1
	$(GO) test ./pkg/report -run '^$$' -fuzz '^FuzzReadFiles$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s -parallel 1
	$(GO) test ./pkg/tokenizer -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s -parallel 1
	$(GO) test ./pkg/tokenizer -run '^$$' -fuzz '^FuzzGenerationConfig$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s -parallel 1
	$(GO) test ./pkg/qwen35 -run '^$$' -fuzz '^FuzzParseHFConfig$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s -parallel 1
	$(GO) test ./pkg/corpus -run '^$$' -fuzz '^FuzzRead$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s -parallel 1
	$(GO) test ./pkg/chat -run '^$$' -fuzz '^FuzzRender$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s -parallel 1

clean:
	rm -rf $(BIN) $(BUILD)

# ---- CUDA ------------------------------------------------------------------
# CUDA_HOME: a CUDA 13.x toolkit; when unset, scripts/cuda-toolchain.sh
# installs the pinned PyPI set into $(BUILD)/cuda once (no download after).
CUDA_DIR = $(if $(CUDA_HOME),$(CUDA_HOME),$(shell scripts/cuda-toolchain.sh))
NVCC     = $(CUDA_DIR)/bin/nvcc
# SASS for Ada, Hopper, Blackwell (datacenter and consumer) + compute_89 PTX
# for the driver JIT on anything newer. CUDA_BUILD holds the objects and the
# library (the device bundle builds its own, for its GPU only).
comma        := ,
CUDA_ARCHS   ?= sm_89 sm_90a sm_100a sm_120a
CUDA_PTX     ?= compute_89
CUDA_BUILD   ?= $(BUILD)/cuda
CUDA_GENCODE  = $(foreach a,$(CUDA_ARCHS),-gencode=arch=compute_$(subst sm_,,$(a)),code=$(a)) \
	$(if $(CUDA_PTX),-gencode=arch=$(CUDA_PTX)$(comma)code=$(CUDA_PTX))
NVCCFLAGS    ?= -O3 -std=c++17 -Xcompiler -fPIC -Xptxas -v -Ikernels/cuda -Ikernels
CUDA_SRC      = $(wildcard kernels/cuda/*.cu)
CUDA_HDR      = $(wildcard kernels/cuda/*.cuh kernels/cuda/*.h) kernels/ninfer_ops.h
CUDA_OBJ      = $(patsubst kernels/cuda/%.cu,$(CUDA_BUILD)/obj/%.o,$(CUDA_SRC))
CUDA_LIB      = $(CUDA_BUILD)/libninfer_cuda.a
# cgo links -lninfer_cuda from CUDA_BUILD; the go build cache does not see
# the library's content, so its hash goes into CGO_CFLAGS (part of the key).
CUDA_GO_ENV   = CGO_LDFLAGS="-L$(abspath $(CUDA_BUILD)) -L$(CUDA_DIR)/lib -L$(CUDA_DIR)/lib64" \
	CGO_CFLAGS="-O2 -DNI_CUDA_LIB_HASH=$$(sha256sum $(CUDA_LIB) | cut -c1-16)"

cuda-toolchain:
	@scripts/cuda-toolchain.sh >/dev/null

$(CUDA_BUILD)/obj/%.o: kernels/cuda/%.cu $(CUDA_HDR)
	@mkdir -p $(dir $@)
	@echo "nvcc $< ($(CUDA_ARCHS)$(if $(CUDA_PTX), + $(CUDA_PTX) PTX))"
	@$(NVCC) $(NVCCFLAGS) $(CUDA_GENCODE) -c $< -o $@.tmp 2> $(@:.o=.ptxas.log) || { cat $(@:.o=.ptxas.log); rm -f $@.tmp; exit 1; }
	@grep -v '^ptxas info\|^    [0-9]* bytes stack frame' $(@:.o=.ptxas.log) >&2 || true
	@mv $@.tmp $@

$(CUDA_LIB): $(CUDA_OBJ)
	@rm -f $@
	ar rcs $@ $^

cuda-kernels: cuda-toolchain $(CUDA_LIB)

cuda-check: cuda-kernels
	$(GO) run ./scripts/ptxas-report $(CUDA_OBJ:.o=.ptxas.log)

cuda: cuda-kernels
	@mkdir -p $(BIN)
	$(CUDA_GO_ENV) $(GO) build -tags cuda -o $(BIN)/ ./cmd/...

# The simulated suite. The cgo sim package includes the .cu/.cuh sources,
# which the go build cache does not track: their hash goes into CXXFLAGS.
SIM_HASH  = $(shell cat $(CUDA_SRC) $(CUDA_HDR) $(wildcard kernels/cuda/simt/*.h kernels/cuda/simt/*.cpp) | sha256sum | cut -c1-16)
# Op-level packages run whole (every op test on every backend); the model
# packages run their CUDA tests only (their CPU tests ran in make test).
SIM_PKGS       ?= ./kernels/cuda/... ./pkg/backend/...
SIM_MODEL_PKGS ?= ./pkg/engine/... ./pkg/bench/... ./pkg/runner/... ./internal/goldentest/...

test-simt:
	kernels/cuda/simt/run-tests.sh

test-cuda-sim: test-simt
	CGO_CXXFLAGS="-DNI_SIM_SRC_HASH=$(SIM_HASH)" $(GO) test -tags cudasim $(TESTFLAGS) $(SIM_PKGS)
	CGO_CXXFLAGS="-DNI_SIM_SRC_HASH=$(SIM_HASH)" $(GO) test -tags cudasim $(TESTFLAGS) -run CUDA $(SIM_MODEL_PKGS)

# The CUDA-tagged binaries on a machine without a GPU: the driver paths
# (fake libcuda: no device, driver too old) and the CPU fallback of auto.
test-cuda-driver: cuda
	$(CUDA_GO_ENV) $(GO) test -tags cuda -count=1 -run 'FakeDriver|ExplainCUDA' ./pkg/backend
	scripts/check-cuda-binaries.sh $(BIN)

# What CI runs after make test (the kernel objects build two at a time).
ci-cuda:
	scripts/cuda-toolchain.sh >/dev/null
	$(MAKE) -j2 cuda-kernels
	$(MAKE) cuda-check test-cuda-driver test-cuda-sim

# Everything scripts/device-check.sh needs on a GPU machine without Go or
# CUDA: stripped CUDA-built binaries and `go test -c` executables, with
# kernels for that machine's GPU only (DEVICE_ARCHS, default the lent H200's
# sm_90a), gzipped, so the bundle and the working tree that travels with it
# stay under the device machine's 64 MiB (device-check.sh unpacks them).
DEVICE_DIR   = $(BUILD)/device
DEVICE_ARCHS ?= sm_90a
device-bundle:
	scripts/cuda-toolchain.sh >/dev/null
	$(MAKE) cuda-kernels CUDA_ARCHS="$(DEVICE_ARCHS)" CUDA_PTX= CUDA_BUILD=$(BUILD)/cuda-device
	$(MAKE) device-bundle-link CUDA_BUILD=$(BUILD)/cuda-device

device-bundle-link:
	@rm -rf $(DEVICE_DIR) && mkdir -p $(DEVICE_DIR)
	$(GO) build -trimpath -ldflags='-s -w' -o $(DEVICE_DIR)/ ./cmd/ninfer-testmodel ./cmd/ninfer-convert ./cmd/ninfer-report
	$(CUDA_GO_ENV) $(GO) build -tags cuda -trimpath -ldflags='-s -w' -o $(DEVICE_DIR)/ ./cmd/ninfer-bench
	$(CUDA_GO_ENV) $(GO) test -c -tags cuda -trimpath -ldflags='-s -w' -o $(DEVICE_DIR)/backend.test ./pkg/backend
	$(CUDA_GO_ENV) $(GO) test -c -tags cuda -trimpath -ldflags='-s -w' -o $(DEVICE_DIR)/goldentest.test ./internal/goldentest
	$(CUDA_GO_ENV) $(GO) test -c -tags cuda -trimpath -ldflags='-s -w' -o $(DEVICE_DIR)/engine.test ./pkg/engine
	@if [ -f kernels/cuda/simt/ptxcheck_gpu.cu ]; then kernels/cuda/simt/build-ptxcheck.sh $(NVCC) $(DEVICE_DIR)/ptxcheck; fi
	@echo "$$(git rev-parse --short HEAD 2>/dev/null) $$(date -u +%FT%TZ) archs $(DEVICE_ARCHS)" > $(DEVICE_DIR)/BUILD_INFO
	@cd $(DEVICE_DIR) && for f in *; do [ "$$f" = BUILD_INFO ] || gzip -9 -f "$$f"; done
	@du -sh $(DEVICE_DIR)
	@size=$$(du -sk $(DEVICE_DIR) | cut -f1); if [ $$size -gt 61440 ]; then echo "device bundle $${size} KiB exceeds 60 MiB" >&2; exit 1; fi
