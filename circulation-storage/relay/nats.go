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
	// last is the id of the last event the broker acknowledged storing
	// anew, when the stream's last message is known to be it.
	last string
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

// ackWait bounds the wait for the broker's acknowledgements.
const ackWait = 5 * time.Second

// Publish implements Publisher. It keeps the order without waiting for
// each acknowledgement: each event after the first goes with the one
// before it as the stream's expected last message (the stream rejects it
// when that one was not stored), so a lost event stops those after it.
// The chain starts from an event the broker acknowledged as stored anew;
// until one is (after a start, a failure, or a duplicate), events go one
// at a time. The stream is the relay's alone.
func (n *NATS) Publish(ctx context.Context, events []Event) (int, error) {
	done := 0
	for done < len(events) && n.last == "" {
		ack, err := n.publishOne(ctx, events[done])
		if err != nil {
			return done, err
		}
		if !ack.Duplicate {
			n.last = events[done].ID
		}
		done++
	}
	if done == len(events) {
		return done, nil
	}
	futures := make([]jetstream.PubAckFuture, 0, len(events)-done)
	expected := n.last
	var sendErr error
	for _, e := range events[done:] {
		msg := n.message(e)
		msg.Header.Set(jetstream.ExpectedLastMsgIDHeader, expected)
		f, err := n.js.PublishMsgAsync(msg)
		if err != nil {
			sendErr = err
			break
		}
		futures = append(futures, f)
		expected = e.ID
	}
	timeout := time.NewTimer(ackWait)
	defer timeout.Stop()
	for _, f := range futures {
		select {
		case ack := <-f.Ok():
			if ack.Duplicate {
				// Stored before: the stream's last message is not known.
				n.last = ""
			} else {
				n.last = events[done].ID
			}
			done++
			continue
		case err := <-f.Err():
			sendErr = err
		case <-timeout.C:
			sendErr = fmt.Errorf("the broker did not acknowledge within %s", ackWait)
		case <-ctx.Done():
			sendErr = ctx.Err()
		}
		n.last = ""
		return done, sendErr
	}
	if sendErr != nil {
		n.last = ""
	}
	return done, sendErr
}

// publishOne publishes an event and waits for the broker's answer.
func (n *NATS) publishOne(ctx context.Context, e Event) (*jetstream.PubAck, error) {
	pctx, cancel := context.WithTimeout(ctx, ackWait)
	defer cancel()
	ack, err := n.js.PublishMsg(pctx, n.message(e))
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
