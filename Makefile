# Two commands for a newcomer: `make run` starts the product against the local
# PostgreSQL, `make test` runs every test. Both set themselves up.

GO      ?= go
MODULES := circulation-storage circulation schemas migrations config integration-tests
PKGS    := $(foreach m,$(MODULES),./$(m)/...)
# Modules that hold Go packages today (go list fails on a module with none).
GO_PKGS  = $(foreach m,$(MODULES),$(if $(shell find $(m) -name '*.go' -print -quit 2>/dev/null),./$(m)/...))

.PHONY: all build run test lint unit fmt clean

all: build

## build: compile the services into bin/
build:
	@mkdir -p bin
	$(GO) build -o bin/circulation-storage ./circulation-storage/cmd/circulation-storage
	$(GO) build -o bin/circulation ./circulation/cmd/circulation

## run: start PostgreSQL if needed, create the database, start the services with tenant diku
run: build
	scripts/run.sh

## test: lint, then every test (race detector on) against the local PostgreSQL
test: lint
	scripts/ensure-postgres.sh >/dev/null
	$(GO) test -race -count=1 $(GO_PKGS)

## lint: gofmt and go vet must be clean
lint:
	@out=$$(gofmt -l $(MODULES)); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(GO_PKGS)

## fmt: format the code
fmt:
	gofmt -w $(MODULES)

clean:
	rm -rf bin
