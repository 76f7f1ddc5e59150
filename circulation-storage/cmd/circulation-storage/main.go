// Command circulation-storage serves the check-out lock store (and the
// circulation records around it) on PostgreSQL, for any number of tenants.
// Configuration comes from the environment; see the README's table.
package main

import (
	"github.com/checkoutlock/circulation-storage/app"
	"github.com/checkoutlock/serverkit"
)

func main() { serverkit.Main("circulation-storage", app.Run) }
