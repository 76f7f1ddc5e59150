package postgres

import storage "github.com/checkoutlock/circulation-storage"

// Option configures a service of this package when it is made, so that it
// is complete when its constructor returns.
type Option func(*options)

type options struct {
	History  bool
	Events   storage.EventObserver
	Released func(t storage.Tenant, userID string)
}

func ApplyOptions(opts []Option) options {
	o := options{History: true, Events: noEvents{}}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// LockHistory says whether the lock history is recorded (on by default)
// and who is told of its events (obs may be nil).
func LockHistory(on bool, obs storage.EventObserver) Option {
	return func(o *options) {
		o.History = on
		if obs != nil {
			o.Events = obs
		}
	}
}

// OnRelease has released told, at once, of every release of a lock that
// someone waits for that this instance makes, by releasing it or by a
// check-out's write that releases it: the waiters on this instance are
// woken without waiting for the release's notification to come back from
// the database (which still wakes those on other instances).
func OnRelease(released func(t storage.Tenant, userID string)) Option {
	return func(o *options) { o.Released = released }
}

// noEvents is the observer of a service told of no events.
type noEvents struct{}

func (noEvents) Event(storage.EventType) {}
func (noEvents) EventLost(error)         {}
