// Command floor is the benchmark's yardstick for the lock service: a
// minimal net/http + pgx server running the lock's very SQL (package
// locksql) behind the same two routes, with nothing else: no framework, no
// authentication, no validation beyond reading the JSON, no metrics, no
// logging. What circulation-storage does on top of it is what the
// benchmark's service ÷ floor ratio measures. It is not a product.
//
// Environment: HTTP_ADDR, DATABASE_URL, TENANT (the tenant whose locks it
// takes, in the shared tables),
// SYNCHRONOUS_COMMIT (as circulation-storage's LOCK_SYNCHRONOUS_COMMIT),
// POOL_SIZE (as the service's pool for lock statements).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"os"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/checkoutlock/circulation-storage/locksql"
)

func main() {
	cfg, err := pgxpool.ParseConfig(os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	if n, err := strconv.Atoi(os.Getenv("POOL_SIZE")); err == nil && n > 0 {
		cfg.MaxConns = int32(n)
	}
	if c := os.Getenv("SYNCHRONOUS_COMMIT"); c != "" {
		cfg.ConnConfig.RuntimeParams["synchronous_commit"] = c
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		log.Fatal(err)
	}
	tenant := os.Getenv("TENANT")
	acquire := locksql.NewNamed(fmt.Sprintf(locksql.Acquire, pgx.Identifier{locksql.Schema, "check_out_lock"}.Sanitize()),
		"user_id", "ttl_ms", "lock_id", "holder", "tenant")
	release := locksql.NewNamed(fmt.Sprintf(locksql.Release, pgx.Identifier{locksql.Schema, "check_out_lock"}.Sanitize(),
		pgx.Identifier{locksql.Schema, "check_out_lock_waiter"}.Sanitize()), "lock_id", "tenant", "by_user", "by_module", "others")

	mux := http.NewServeMux()
	mux.HandleFunc("GET /admin/health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("POST /check-out-lock-storage", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			UserID string          `json:"userId"`
			Holder json.RawMessage `json:"holder"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var id, user string
		var created, expires any
		var ttl int
		var previous json.RawMessage
		var inserted, fresh bool
		err := pool.QueryRow(r.Context(), acquire.SQL, acquire.Bind(pgx.StrictNamedArgs{
			"user_id": req.UserID, "ttl_ms": 3000, "lock_id": nil, "holder": req.Holder, "tenant": tenant})).
			Scan(&id, &user, &created, &expires, &ttl, &inserted, &fresh, &previous)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"id": id, "userId": user, "creationDate": created, "expiresAt": expires,
			"ttlMs": ttl, "holder": req.Holder})
	})
	mux.HandleFunc("DELETE /check-out-lock-storage/{id}", func(w http.ResponseWriter, r *http.Request) {
		var live, notified bool
		var holder json.RawMessage
		var user string
		var acquiredBy, acquiredByModule *string
		// Any caller may release (the service checks who: the floor does
		// nothing but the SQL).
		err := pool.QueryRow(r.Context(), release.SQL, release.Bind(pgx.StrictNamedArgs{
			"lock_id": r.PathValue("id"), "tenant": tenant, "by_user": nil, "by_module": nil, "others": true})).
			Scan(&live, &holder, &acquiredBy, &acquiredByModule, &notified, &user)
		switch {
		case err == pgx.ErrNoRows || err == nil && !live:
			w.WriteHeader(http.StatusNotFound)
		case err != nil:
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	})
	log.Fatal(http.ListenAndServe(os.Getenv("HTTP_ADDR"), mux))
}
