// Command circulation serves check-out and check-in by barcode for any number
// of tenants, keeping all state in circulation-storage: run as many instances
// as you like behind a load balancer. Configuration comes from the
// environment; see the README's table.
package main

import (
	"github.com/checkoutlock/circulation/app"
	"github.com/checkoutlock/serverkit"
)

func main() { serverkit.Main("circulation", app.Run) }
