//go:build !unix

package postgres

import "github.com/jackc/pgx/v5"

// closedByServer cannot peek at a socket here: a dead connection is found
// when a statement fails on it (see pool).
func closedByServer(*pgx.Conn) bool { return false }
