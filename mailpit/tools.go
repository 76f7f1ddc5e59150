//go:build tools

// Package mailpit pins the SMTP server the project's notices are sent to
// in make run (the demo's mailbox) and in the tests: make build and
// integration-tests/harness/cmd/buildbins build it from this module's
// requirement (github.com/axllent/mailpit, verified by go.sum) into the
// binary directory. Run with --ignore-duplicate-ids, it delivers a mail
// whose Message-ID it has delivered once: the receiving half of a
// notice's exactly once.
package mailpit

import _ "github.com/axllent/mailpit"
