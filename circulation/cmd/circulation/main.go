// Command circulation serves check-out and check-in by barcode for any number
// of tenants, keeping all state in circulation-storage: run as many instances
// as you like behind a load balancer. Configuration comes from the
// environment; see the README's table.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/caarlos0/env/v10"
	"github.com/google/uuid"

	"github.com/checkoutlock/circulation/app"
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
		fmt.Fprintf(os.Stderr, "circulation: %v\n", err)
		os.Exit(1)
	}
}
