package integration

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/checkoutlock/circulation-storage/relay"
	"github.com/checkoutlock/integration-tests/harness"
)

// TestRelayPublishRecoversABrokenChain: the relay publishes a batch of
// events as a chain, each expecting the one before as the stream's last
// message, and asks only the last one's acknowledgement. When the stream's
// last message is not the one the chain starts from (here a message
// published by someone else; in production, one lost on the way), the
// stream refuses the whole chain; Publish then sends the events again one
// at a time and reports them all published, once each, in order.
func TestRelayPublishRecoversABrokenChain(t *testing.T) {
	t.Parallel()
	broker := harness.StartNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pub, err := relay.DialNATS(ctx, relay.NATSConfig{URL: broker.URL(), Stream: "CHAIN", Prefix: "chain",
		Duplicates: time.Minute, MaxAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	events := make([]relay.Event, 7)
	for i := range events {
		events[i] = relay.Event{Tenant: "diku", Seq: int64(i + 1), ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i+1),
			Kind: "loan", Type: "CREATED", At: time.Now(), New: []byte(`{"n":` + fmt.Sprint(i+1) + `}`)}
	}
	// The stream is made when the broker first answers.
	if !harness.Poll(10*time.Second, 20*time.Millisecond, func() bool {
		n, err := pub.Publish(ctx, events[:1])
		return n == 1 && err == nil
	}) {
		t.Fatal("the first event was not published within 10s")
	}
	if n, err := pub.Publish(ctx, events[1:3]); n != 2 || err != nil {
		t.Fatalf("a chain after a stored event: published %d, %v; want 2, nil", n, err)
	}

	js := harness.JetStream(t, broker.URL())
	if _, err := js.Publish(ctx, "chain.diku.other", []byte(`{}`), jetstream.WithMsgID("someone-else")); err != nil {
		t.Fatal(err)
	}
	if n, err := pub.Publish(ctx, events[3:]); n != 4 || err != nil {
		t.Fatalf("a chain the stream refused: published %d, %v; want 4, nil (sent again one at a time)", n, err)
	}
	// Once more after a duplicate: the relay publishing what it did before
	// (a crash before marking) is told so, and goes on.
	if n, err := pub.Publish(ctx, events[5:]); n != 2 || err != nil {
		t.Fatalf("events published before: published %d, %v; want 2, nil", n, err)
	}

	var got []string
	stream, err := js.Stream(ctx, "CHAIN")
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= info.State.LastSeq; seq++ {
		m, err := stream.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("message %d: %v", seq, err)
		}
		got = append(got, m.Header.Get(jetstream.MsgIDHeader))
	}
	want := []string{events[0].ID, events[1].ID, events[2].ID, "someone-else", events[3].ID, events[4].ID, events[5].ID, events[6].ID}
	if !slices.Equal(got, want) {
		t.Fatalf("the stream holds\n%v\nwant\n%v", got, want)
	}
}
