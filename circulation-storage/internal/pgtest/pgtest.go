// Package pgtest gives tests a real PostgreSQL database: a shared one, created
// once, whose isolation comes from each test using a tenant (a schema) of its
// own, and fresh ones for tests that look across tenants.
//
// The server is TEST_DATABASE_URL (any database on it; default
// postgres://postgres@127.0.0.1:5432/postgres).
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// SharedDatabase is the database tests share, each in tenants of its own.
const SharedDatabase = "circulation_storage_test"

func serverURL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres"
}

// withDatabase returns the server URL pointing at another database.
func withDatabase(t testing.TB, name string) string {
	u, err := url.Parse(serverURL())
	if err != nil {
		t.Fatalf("TEST_DATABASE_URL: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

func admin(t testing.TB) *pgx.Conn {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, serverURL())
	if err != nil {
		t.Fatalf("connect to PostgreSQL at TEST_DATABASE_URL (%s): %v", serverURL(), err)
	}
	return conn
}

var shared struct {
	once sync.Once
	err  error
}

// Shared returns the URL of the shared test database, creating it on first
// use. Tests that use it must keep to tenants of their own.
func Shared(t testing.TB) string {
	t.Helper()
	shared.once.Do(func() {
		conn := admin(t)
		defer conn.Close(context.Background())
		shared.err = createDatabase(conn, SharedDatabase)
	})
	if shared.err != nil {
		t.Fatalf("create %s: %v", SharedDatabase, shared.err)
	}
	return withDatabase(t, SharedDatabase)
}

// createDatabase creates name unless it exists; a concurrent creation by
// another test process is not an error.
func createDatabase(conn *pgx.Conn, name string) error {
	_, err := conn.Exec(context.Background(), "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42P04" || pgErr.Code == "23505") {
		return nil
	}
	return err
}

// Fresh creates an empty database for one test and drops it when the test
// ends. Use it where a test looks across tenants.
func Fresh(t testing.TB) string {
	t.Helper()
	name := "cs_test_" + RandomSuffix()
	conn := admin(t)
	defer conn.Close(context.Background())
	if err := createDatabase(conn, name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		conn := admin(t)
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	return withDatabase(t, name)
}

// TenantID returns a tenant id no other test uses.
func TenantID() string { return "t" + RandomSuffix() }

// RandomSuffix is 12 random lowercase hex digits.
func RandomSuffix() string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	return hex.EncodeToString(b)
}
