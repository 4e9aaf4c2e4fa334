# ninfer — build, test and demo targets. `make help` lists them.
GO      ?= go
BIN     ?= bin
BUILD   ?= build
PKGS    := ./...
TESTFLAGS ?= -count=1 -timeout 20m

.PHONY: help build install test vet fmt-check testmodel demo bench fuzz clean

help:
	@echo "make build      build every tool into $(BIN)/"
	@echo "make install    go install ./cmd/..."
	@echo "make test       gofmt check, go vet, go test (the CI command)"
	@echo "make testmodel  generate the tiny random Qwen3.5 model and convert it ($(BUILD)/tiny.ninfer)"
	@echo "make demo       main job: bench | report on the tiny model, CPU backend"
	@echo "make bench      Go benchmarks (see docs/PERF.md)"
	@echo "make fuzz       run the fuzz targets (FUZZTIME=10m each)"

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

$(BUILD)/tiny-hf/config.json:
	@mkdir -p $(BUILD)
	$(GO) run ./cmd/ninfer-testmodel --force $(BUILD)/tiny-hf

$(BUILD)/tiny.ninfer: $(BUILD)/tiny-hf/config.json
	$(GO) run ./cmd/ninfer-convert --recipe q8 $(BUILD)/tiny-hf $@

testmodel: $(BUILD)/tiny.ninfer

demo: build $(BUILD)/tiny.ninfer
	./scripts/demo.sh $(BIN) $(BUILD)

bench:
	$(GO) test -run '^$$' -bench . -benchtime 2x ./pkg/...

FUZZTIME ?= 10m
fuzz:
	$(GO) test ./pkg/artifact -run '^$$' -fuzz FuzzOpen -fuzztime $(FUZZTIME) -fuzzminimizetime 2s -parallel 1
	$(GO) test ./pkg/safetensors -run '^$$' -fuzz FuzzOpen -fuzztime $(FUZZTIME) -fuzzminimizetime 2s -parallel 1

clean:
	rm -rf $(BIN) $(BUILD)
