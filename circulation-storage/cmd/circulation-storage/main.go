// Command circulation-storage serves the check-out lock store (and the
// circulation records around it) on PostgreSQL, for any number of tenants.
// Configuration comes from the environment; see the README's table.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/caarlos0/env/v10"
	"github.com/google/uuid"

	"github.com/checkoutlock/circulation-storage/app"
	"github.com/checkoutlock/config"
)

func main() {
	// Request, lock and loan ids are random UUIDs, several per check-out:
	// drawn from a buffer of crypto/rand bytes instead of a system call
	// each.
	uuid.EnableRandPool()
	config.TuneRuntime()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := app.Run(ctx, os.Args[1:], env.ToMap(os.Environ()), os.Stdout, nil); err != nil {
		fmt.Fprintf(os.Stderr, "circulation-storage: %v\n", err)
		os.Exit(1)
	}
}
