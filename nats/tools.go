//go:build tools

// Package nats pins the NATS server the project runs: make run, the tests
// and the benchmarks build it from this module's requirement
// (github.com/nats-io/nats-server/v2, verified by go.sum) into the binary
// directory, with make bin/nats-server or integration-tests/harness/cmd/buildbins,
// instead of taking whichever release a distribution packages.
package nats

import _ "github.com/nats-io/nats-server/v2"
