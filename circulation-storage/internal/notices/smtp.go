package notices

import (
	"bytes"
	"context"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/smtp"
	"sync"
	"time"
)

// SMTP sends mail to an SMTP server (no authentication, no TLS: a relay
// the library runs beside the service), one connection kept between
// mails and dialled again after a failure. Each mail has until its
// context's deadline, and mailTimeout at most, to be taken.
type SMTP struct {
	Addr, From string

	mu     sync.Mutex
	client *smtp.Client
	conn   net.Conn
}

// Send implements Mailer.
func (s *SMTP) Send(ctx context.Context, m Mail) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.send(ctx, m); err != nil {
		s.drop()
		return err
	}
	return nil
}

func (s *SMTP) send(ctx context.Context, m Mail) error {
	deadline := time.Now().Add(mailTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if s.client != nil {
		// A connection kept from an earlier mail that the server has
		// since closed is dialled again, not counted as a failed try.
		_ = s.conn.SetDeadline(deadline)
		if s.client.Noop() != nil {
			s.drop()
		}
	}
	if s.client == nil {
		d := net.Dialer{Deadline: deadline}
		conn, err := d.DialContext(ctx, "tcp", s.Addr)
		if err != nil {
			return err
		}
		// The greeting too is read within the mail's time.
		_ = conn.SetDeadline(deadline)
		host, _, _ := net.SplitHostPort(s.Addr)
		c, err := smtp.NewClient(conn, host)
		if err != nil {
			_ = conn.Close()
			return err
		}
		s.client = c
		s.conn = conn
	}
	_ = s.conn.SetDeadline(deadline)
	c := s.client
	from, err := mail.ParseAddress(s.From)
	if err != nil {
		return err
	}
	if err := c.Mail(from.Address); err != nil {
		return err
	}
	if err := c.Rcpt(m.To); err != nil {
		return err
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(message(from.String(), m)); err != nil {
		return err
	}
	return w.Close()
}

// drop closes the connection after a failure: the next mail dials again.
func (s *SMTP) drop() {
	if s.conn != nil {
		_ = s.conn.Close()
	}
	s.client, s.conn = nil, nil
}

// Close ends the connection kept between mails.
func (s *SMTP) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client != nil {
		_ = s.client.Quit()
	}
	s.drop()
}

// message is m as an RFC 5322 message from from, its body
// quoted-printable UTF-8.
func message(from string, m Mail) []byte {
	var b bytes.Buffer
	kind := "text/plain"
	if m.HTML {
		kind = "text/html"
	}
	fmt.Fprintf(&b, "From: %s\r\nTo: %s\r\nSubject: %s\r\nDate: %s\r\nMessage-ID: %s\r\nMIME-Version: 1.0\r\n"+
		"Content-Type: %s; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n",
		from, m.To, mime.QEncoding.Encode("utf-8", m.Subject), time.Now().Format(time.RFC1123Z), m.MessageID, kind)
	q := quotedprintable.NewWriter(&b)
	_, _ = q.Write([]byte(m.Body))
	_ = q.Close()
	return b.Bytes()
}
