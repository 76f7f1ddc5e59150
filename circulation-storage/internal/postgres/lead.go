package postgres

import (
	"context"
	"strconv"
	"time"
)

// TryLead takes the advisory lock key when it is free, on a connection of
// p whose session PostgreSQL ends once it has been idle for idle (the
// lock goes with it): of several instances, one at a time does the work
// the lock guards, and one that stops answering in the middle of it
// (frozen, paused) lets another do it after idle. release gives both
// back. The work runs on other connections while the lead holds this
// one, so p is a pool no work of the lead's runs on (DB.LeadPool).
func TryLead(ctx context.Context, p *Pool, key int64, idle time.Duration) (release func(), leading bool, err error) {
	c, err := p.Acquire(ctx)
	if err != nil {
		return nil, false, Interpret(err, "")
	}
	if err := c.QueryRow(ctx, `SELECT CASE WHEN pg_try_advisory_lock($1)
	    THEN set_config('idle_session_timeout', $2, false) IS NOT NULL ELSE false END`,
		key, strconv.FormatInt(idle.Milliseconds(), 10)).Scan(&leading); err != nil {
		c.Release()
		return nil, false, Interpret(err, "")
	}
	if !leading {
		c.Release()
		return nil, false, nil
	}
	return func() {
		// The lock is the session's: unlocked here, the connection as
		// the pool made it, or closed if it is gone (closing ends the
		// session, and the lock with it).
		bg := context.WithoutCancel(ctx)
		if _, err := c.Exec(bg, `SELECT pg_advisory_unlock($1), set_config('idle_session_timeout', reset_val, false)
		    FROM pg_settings WHERE name = 'idle_session_timeout'`, key); err != nil {
			_ = c.Conn().Close(bg)
		}
		c.Release()
	}, true, nil
}
