package notices

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/schemas"
)

// TestAFailedTryIsCountedOnlyWhileItsNoticeIsDue: putOff counts the failed
// try of a notice still Scheduled and due: one more try, why it failed,
// and the next try after the first retry's wait, or, its tries spent,
// Failed. A notice settled after all (its transaction's answer lost,
// another instance having sent it) is left as it is: one Scheduled again
// for a later time (a recurring notice sent), one retried later already,
// one Sent.
func TestAFailedTryIsCountedOnlyWhileItsNoticeIsDue(t *testing.T) {
	t.Parallel()
	db := dbtest.OpenFresh(t, postgres.PoolConfig{MaxConns: 2, LockCommit: "on"})
	f := dbtest.SetupTenant(t, db)
	ctx := context.Background()
	table := postgres.Table(postgres.TableScheduledNotice)
	now := time.Now()
	notice := func(status string, attempts int, next time.Time, retry *time.Time) string {
		t.Helper()
		id := uuid.NewString()
		doc, _ := json.Marshal(map[string]any{"id": id, "recipientUserId": uuid.NewString(), "status": status, "attempts": attempts,
			"triggeringEvent": schemas.NoticeCheckOut})
		if _, err := db.Pool.Exec(ctx, `INSERT INTO `+table+` (tenant_id, id, jsonb, next_run_at, retry_at) VALUES (@tenant, @id, @doc, @next, @retry)`,
			pgx.StrictNamedArgs{"tenant": string(f.Tenant), "id": id, "doc": doc, "next": next, "retry": retry}); err != nil {
			t.Fatal(err)
		}
		return id
	}
	type state struct {
		Status, LastError string
		Attempts          int
		Retry             *time.Time
	}
	read := func(id string) state {
		t.Helper()
		var s state
		if err := db.Pool.QueryRow(ctx, `SELECT status, coalesce(jsonb ->> 'lastError', ''), coalesce((jsonb ->> 'attempts')::integer, 0), retry_at
			FROM `+table+` WHERE tenant_id = $1 AND id = $2`, string(f.Tenant), id).Scan(&s.Status, &s.LastError, &s.Attempts, &s.Retry); err != nil {
			t.Fatal(err)
		}
		return s
	}
	later := now.Add(time.Hour)
	cfg := SendConfig{MaxAttempts: 3, FirstRetry: time.Minute}
	due, spent := notice(schemas.NoticeScheduled, 0, now.Add(-time.Second), nil), notice(schemas.NoticeScheduled, 2, now.Add(-time.Second), nil)
	settled := map[string]string{
		"scheduled again for a later time": notice(schemas.NoticeScheduled, 0, later, nil),
		"retried later already":            notice(schemas.NoticeScheduled, 1, now.Add(-time.Second), &later),
		"sent":                             notice(schemas.NoticeSent, 0, now.Add(-time.Second), nil),
	}
	before := map[string]state{}
	for what, id := range settled {
		before[what] = read(id)
	}
	failed := errors.New("the record refused")
	for _, id := range append([]string{due, spent}, settled["scheduled again for a later time"], settled["retried later already"], settled["sent"]) {
		if err := putOff(ctx, db, f.Tenant, id, failed, cfg); err != nil {
			t.Fatal(err)
		}
	}
	if s := read(due); s.Status != schemas.NoticeScheduled || s.Attempts != 1 || s.LastError != failed.Error() ||
		s.Retry == nil || s.Retry.Before(now.Add(cfg.FirstRetry/2)) || s.Retry.After(time.Now().Add(cfg.FirstRetry*3/2)) {
		t.Errorf("a notice due, its try failed: %+v, want Scheduled, one try, tried again in about %s", s, cfg.FirstRetry)
	}
	if s := read(spent); s.Status != schemas.NoticeFailed || s.Attempts != 3 || s.LastError != failed.Error() || s.Retry != nil {
		t.Errorf("a notice's third try failed: %+v, want Failed after three", s)
	}
	for what, id := range settled {
		if s := read(id); s.Status != before[what].Status || s.Attempts != before[what].Attempts || s.LastError != "" {
			t.Errorf("a notice %s: %+v, want as it was, %+v", what, s, before[what])
		}
	}
}
