package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATS publishes to a NATS JetStream stream: subject
// <prefix>.<tenant>.<kind>, the event id as the message id (Nats-Msg-Id:
// the stream drops a message id it has seen within its duplicate window),
// the tenant's sequence number in the header Outbox-Seq.
type NATS struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	prefix string
	// last is the id of the last event the broker acknowledged storing
	// anew, when the stream's last message is known to be it.
	last string
}

// NATSConfig names the broker and the stream.
type NATSConfig struct {
	// URL is the server's, or a cluster's servers', comma-separated.
	URL    string
	Stream string
	// Prefix is the subjects' first tokens: <Prefix>.<tenant>.<kind>.
	Prefix string
	// Duplicates is the stream's duplicate window: a relay that crashed
	// between publishing and marking, and publishes again within it, is
	// not heard twice.
	Duplicates time.Duration
	// MaxAge is how long the stream keeps a message.
	MaxAge time.Duration
	// Replicas is how many servers of a cluster keep the stream (0: 1).
	Replicas int
	// Logger, when set, is told why the stream cannot be made (more
	// replicas than servers, say): the first time, then every minute.
	Logger *slog.Logger
}

// DialNATS connects (reconnecting by itself for ever) and makes sure the
// stream exists; the connection is made in the background when the
// broker is not there yet.
func DialNATS(ctx context.Context, cfg NATSConfig) (*NATS, error) {
	nc, err := nats.Connect(cfg.URL, nats.Name("circulation-storage outbox relay"), nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond))
	if err != nil {
		return nil, fmt.Errorf("NATS_URL %s: %w", cfg.URL, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	n := &NATS{nc: nc, js: js, prefix: cfg.Prefix}
	stream := jetstream.StreamConfig{Name: cfg.Stream, Subjects: []string{cfg.Prefix + ".>"}, Storage: jetstream.FileStorage,
		Duplicates: cfg.Duplicates, MaxAge: cfg.MaxAge, Replicas: max(1, cfg.Replicas)}
	// The stream is made when the broker first answers; until then
	// publishing fails and the relay tries again.
	go func() {
		var told time.Time
		for ctx.Err() == nil {
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := js.CreateOrUpdateStream(sctx, stream)
			cancel()
			if err == nil {
				return
			}
			if cfg.Logger != nil && ctx.Err() == nil && time.Since(told) >= time.Minute {
				told = time.Now()
				cfg.Logger.Warn("outbox relay: cannot make the stream; trying again every second", slog.String("stream", cfg.Stream),
					slog.Int("replicas", stream.Replicas), slog.Any("error", err))
			}
			t := time.NewTimer(time.Second)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
		}
	}()
	return n, nil
}

// ackWait bounds the wait for the broker's acknowledgements.
const ackWait = 5 * time.Second

// Publish implements Publisher. It keeps the order without waiting for
// each event's acknowledgement: each event after the first goes with the
// one before it as the stream's expected last message (the stream refuses
// it when that one was not stored), so a lost event stops every later one;
// all but the last go without asking for an acknowledgement, and the last
// one's acknowledgement, stored anew, says that all were stored in order.
// The chain starts from an event the broker acknowledged as stored anew;
// until one is (after a start, a failure, a duplicate, or a chain whose
// end was refused), events go one at a time, each acknowledged, and the
// broker drops those it stored before. The stream is the relay's alone.
func (n *NATS) Publish(ctx context.Context, events []Event) (int, error) {
	done := 0
	for done < len(events) {
		if n.last == "" {
			ack, err := n.publishOne(ctx, n.message(events[done]))
			if err != nil {
				return done, err
			}
			if !ack.Duplicate {
				n.last = events[done].ID
			}
			done++
			continue
		}
		stored, err := n.publishChain(ctx, events[done:])
		if err != nil {
			n.last = ""
			return done, err
		}
		if !stored {
			// Some event of the chain was not stored, or its end was
			// stored before: which ones are is not known. One at a time
			// from its start, what is stored already is dropped.
			n.last = ""
			continue
		}
		n.last = events[len(events)-1].ID
		done = len(events)
	}
	return done, nil
}

// publishChain publishes events after n.last, each expecting the one
// before it as the stream's last message, and waits for the last one's
// acknowledgement: stored reports it stored anew (and so every one before
// it, in order).
func (n *NATS) publishChain(ctx context.Context, events []Event) (stored bool, err error) {
	expected := n.last
	for _, e := range events[:len(events)-1] {
		if err := ctx.Err(); err != nil {
			return false, err // the lead is gone: nothing more is sent
		}
		msg := n.message(e)
		msg.Header.Set(jetstream.ExpectedLastMsgIDHeader, expected)
		if err := n.nc.PublishMsg(msg); err != nil {
			return false, err
		}
		expected = e.ID
	}
	msg := n.message(events[len(events)-1])
	msg.Header.Set(jetstream.ExpectedLastMsgIDHeader, expected)
	ack, err := n.publishOne(ctx, msg)
	var apiErr *jetstream.APIError
	switch {
	case errors.As(err, &apiErr):
		// The stream refused the end of the chain (its expected last
		// message was not the one before it).
		return false, nil
	case err != nil:
		return false, err
	}
	return !ack.Duplicate, nil
}

// publishOne publishes an event's message and waits for the broker's
// answer.
func (n *NATS) publishOne(ctx context.Context, msg *nats.Msg) (*jetstream.PubAck, error) {
	pctx, cancel := context.WithTimeout(ctx, ackWait)
	defer cancel()
	ack, err := n.js.PublishMsg(pctx, msg)
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return nil, fmt.Errorf("the broker did not acknowledge within %s", ackWait)
	}
	return ack, err
}

// message is the event's message: its subject, body, id and number.
func (n *NATS) message(e Event) *nats.Msg {
	msg := nats.NewMsg(n.prefix + "." + e.Tenant + "." + e.Kind)
	msg.Data = e.Message()
	msg.Header.Set(jetstream.MsgIDHeader, e.ID)
	msg.Header.Set("Outbox-Seq", strconv.FormatInt(e.Seq, 10))
	return msg
}

// Close closes the connection.
func (n *NATS) Close() { n.nc.Close() }
