package postgres

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// readJSON is how the pools' sessions read json and jsonb values. Into a
// json.RawMessage, the value is the text PostgreSQL sent, copied: the
// server holds only valid JSON in those types, so encoding/json's reading
// it through once more (pgx's way, json.Unmarshal, which checks every
// byte before it copies them) would find nothing. The copy is trimmed of
// the spaces around the value, as json.Unmarshal trims them (a json
// value keeps the spaces it was written with). Into anything else, the
// value is decoded by encoding/json, as pgx decodes it.
func readJSON(data []byte, v any) error {
	if raw, ok := v.(*json.RawMessage); ok {
		*raw = append(json.RawMessage(nil), bytes.TrimSpace(data)...)
		return nil
	}
	return json.Unmarshal(data, v)
}

// RegisterJSON makes a session (its type map) read json and jsonb values
// by readJSON, writing them as pgx does.
func RegisterJSON(m *pgtype.Map) {
	m.RegisterType(&pgtype.Type{Name: "json", OID: pgtype.JSONOID, Codec: &pgtype.JSONCodec{Marshal: json.Marshal, Unmarshal: readJSON}})
	m.RegisterType(&pgtype.Type{Name: "jsonb", OID: pgtype.JSONBOID, Codec: &pgtype.JSONBCodec{Marshal: json.Marshal, Unmarshal: readJSON}})
}

// afterConnect readies a new session of the pools (RegisterJSON).
func afterConnect(_ context.Context, c *pgx.Conn) error {
	RegisterJSON(c.TypeMap())
	return nil
}
