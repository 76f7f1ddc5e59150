package relay

import (
	"context"
	"errors"
	"fmt"
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
}

// NATSConfig names the broker and the stream.
type NATSConfig struct {
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
		Duplicates: cfg.Duplicates, MaxAge: cfg.MaxAge}
	// The stream is made when the broker first answers; until then
	// publishing fails and the relay tries again.
	go func() {
		for ctx.Err() == nil {
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := js.CreateOrUpdateStream(sctx, stream)
			cancel()
			if err == nil {
				return
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

// Publish implements Publisher.
func (n *NATS) Publish(ctx context.Context, e Event) error {
	body, err := e.Message()
	if err != nil {
		return err
	}
	msg := nats.NewMsg(n.prefix + "." + e.Tenant + "." + e.Kind)
	msg.Data = body
	msg.Header.Set(jetstream.MsgIDHeader, e.ID)
	msg.Header.Set("Outbox-Seq", strconv.FormatInt(e.Seq, 10))
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = n.js.PublishMsg(pctx, msg)
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("the broker did not acknowledge within 5s")
	}
	return err
}

// Close closes the connection.
func (n *NATS) Close() { n.nc.Close() }
