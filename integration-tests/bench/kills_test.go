package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/checkoutlock/integration-tests/harness"
)

// Kills is scenario 12: check-outs at c = 8 while every PostgreSQL backend
// of storage is terminated (pg_terminate_backend, as an operator or a
// failover does), several times. Every check-out is counted by its
// answer; a failed one is told apart by whether its write had been sent:
// circulation names the loan of a write it sent and heard no answer to
// (loanId), and whether that loan exists is read from the database.
type Kills struct {
	Kills     int `json:"kills"`
	CheckOuts int `json:"checkOuts"`
	Created   int `json:"created"`
	// Refused are 4xx answers (a patron at the item limit, say): rules,
	// not failures.
	Refused int `json:"refused"`
	// FailedNotSent failed before their write was sent: the write a kill
	// cut before it ran is sent again, and a read again, so none should.
	FailedNotSent int `json:"failedNotSent"`
	// FailedUnknown sent their write and heard no answer;
	// FailedUnknownWritten of them have their loan in the database.
	FailedUnknown        int `json:"failedUnknown"`
	FailedUnknownWritten int `json:"failedUnknownWritten"`
	// Answers counts every answer by status.
	Answers map[int]int `json:"answers"`
}

// benchKills runs scenario 12 on a cluster of its own (one storage, two
// circulation instances, a database of its own: the backends terminated
// are its storage's alone).
func benchKills(t *testing.T, env []string) Kills {
	c := harness.NewCluster(t, harness.Options{Circulations: 2, FeatureOn: true, DatabaseURL: harness.FreshDatabase(t),
		StorageEnv: env, CirculationEnv: env})
	const workers, perPatron = 8, 4
	rounds, killEvery := 6, 40
	if *smoke {
		rounds, killEvery = 2, 10
	}
	patrons := (rounds + 2) * killEvery / perPatron
	lib := c.SetupLibrary(patrons, perPatron, perPatron)

	type answer struct {
		item   string
		status int
		body   []byte
	}
	var (
		mu      sync.Mutex
		answers []answer
	)
	harness.UnderKills(patrons*perPatron, workers, rounds, killEvery, func(w, j int) {
		item := lib.Items[j/perPatron][j%perPatron]
		r := c.CheckOut(w, item, lib.Patrons[j/perPatron])
		mu.Lock()
		answers = append(answers, answer{item: item, status: r.Status, body: r.Body})
		mu.Unlock()
	}, func() { c.TerminateStorageBackends(t) })

	out := Kills{Kills: rounds, CheckOuts: len(answers), Answers: map[int]int{}}
	loans := pgx.Identifier{c.Schema, "loan"}.Sanitize()
	for _, a := range answers {
		out.Answers[a.status]++
		switch {
		case a.status == http.StatusCreated:
			out.Created++
		case a.status < 500:
			out.Refused++
		default:
			loanID := loanIDOf(a.body)
			if loanID == "" {
				out.FailedNotSent++
				t.Logf("failed before its write was sent: %s: %d %s", a.item, a.status, a.body)
				continue
			}
			out.FailedUnknown++
			var n int
			if err := c.DB.QueryRow(context.Background(), `SELECT count(*) FROM `+loans+` WHERE id = $1`, loanID).Scan(&n); err != nil {
				t.Fatal(err)
			}
			out.FailedUnknownWritten += n
			t.Logf("failed after its write was sent (written: %t): %s: %d %s", n == 1, a.item, a.status, a.body)
		}
	}
	return out
}

// loanIDOf is the loanId a check-out's 503 names (the loan of a write sent
// and not answered), "" when it names none.
func loanIDOf(body []byte) string {
	var env struct {
		Errors []struct {
			Parameters []struct{ Key, Value string }
		}
	}
	if json.Unmarshal(body, &env) != nil {
		return ""
	}
	for _, e := range env.Errors {
		for _, p := range e.Parameters {
			if p.Key == "loanId" {
				return p.Value
			}
		}
	}
	return ""
}

// printKills prints scenario 12.
func printKills(w io.Writer, k Kills) {
	fmt.Fprintf(w, "\n12. Check-outs at c = 8 while storage's PostgreSQL backends are terminated, %d times\n", k.Kills)
	fmt.Fprintf(w, "check-outs %d: created %d, refused %d (rules), failed before the write was sent %d, failed after (outcome unknown) %d, of which written %d; answers %v\n",
		k.CheckOuts, k.Created, k.Refused, k.FailedNotSent, k.FailedUnknown, k.FailedUnknownWritten, k.Answers)
}
