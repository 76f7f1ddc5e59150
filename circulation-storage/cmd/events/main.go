// Command events prints a tenant's domain events as the outbox relay
// publishes them to NATS JetStream, one JSON line each, and follows new
// ones until interrupted:
//
//	events -nats nats://127.0.0.1:4223 -tenant diku
//
// Each line is {"seq": <the tenant's sequence number>, "subject": …,
// "event": <the event, schemas/domain-event.json>}.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func main() {
	url := flag.String("nats", "nats://127.0.0.1:4223", "the NATS server")
	tenant := flag.String("tenant", "diku", "the tenant whose events to print")
	stream := flag.String("stream", "CHECKOUT_EVENTS", "the JetStream stream (NATS_STREAM)")
	prefix := flag.String("prefix", "checkout.events", "the subjects' prefix (NATS_SUBJECT_PREFIX)")
	onlyNew := flag.Bool("new", false, "print only events published from now on")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *url, *stream, *prefix+"."+*tenant+".>", *onlyNew); err != nil {
		fmt.Fprintln(os.Stderr, "events:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, url, stream, subject string, onlyNew bool) error {
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond))
	if err != nil {
		return fmt.Errorf("connect to %s: %w", url, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	policy := jetstream.DeliverAllPolicy
	if onlyNew {
		policy = jetstream.DeliverNewPolicy
	}
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}, DeliverPolicy: policy})
	if err != nil {
		return fmt.Errorf("stream %s: %w (no event published yet?)", stream, err)
	}
	out := json.NewEncoder(os.Stdout)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		seq, _ := strconv.ParseInt(m.Headers().Get("Outbox-Seq"), 10, 64)
		_ = out.Encode(struct {
			Seq     int64           `json:"seq"`
			Subject string          `json:"subject"`
			Event   json.RawMessage `json:"event"`
		}{seq, m.Subject(), m.Data()})
	})
	if err != nil {
		return err
	}
	<-ctx.Done()
	cc.Stop()
	return nil
}
