// Command buildbins builds the binaries the tests run into a directory,
// as the harness would for each test package: make test builds them once
// and names the directory to every package in CHECKOUT_LOCK_BIN_DIR.
//
//	go run ./integration-tests/harness/cmd/buildbins <dir>
package main

import (
	"fmt"
	"os"

	"github.com/checkoutlock/integration-tests/harness"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: buildbins <dir>")
		os.Exit(2)
	}
	if err := harness.Build(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
