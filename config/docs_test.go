package config

import (
	"encoding"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestTheConfigurationDocIsTheEnvironment: docs/configuration.md's tables
// of each service's environment name every variable the service reads and
// no other, and each default they give in code quotes is the default the
// service starts with (read as the variable would be: "1h" is an hour).
func TestTheConfigurationDocIsTheEnvironment(t *testing.T) {
	doc, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	storage, err := LoadStorage(map[string]string{"AUTH_MODE": "gateway"})
	if err != nil {
		t.Fatal(err)
	}
	circulation, err := LoadCirculation(map[string]string{"AUTH_MODE": "gateway"})
	if err != nil {
		t.Fatal(err)
	}
	sip2 := SIP2{}
	if err := parse(&sip2, map[string]string{}); err != nil {
		t.Fatal(err)
	}
	services := map[string]any{"circulation-storage": storage, "circulation": circulation, "sip2": sip2}
	sections := docSections(string(doc))
	for name, cfg := range services {
		rows, ok := sections[name]
		if !ok {
			t.Errorf("docs/configuration.md has no section ### %s", name)
			continue
		}
		fields := envFields(reflect.ValueOf(cfg))
		documented := map[string]bool{}
		for _, r := range rows {
			for i, v := range r.names {
				documented[v] = true
				f, ok := fields[v]
				if !ok {
					t.Errorf("%s: docs/configuration.md names %s, which %s does not read", name, v, name)
					continue
				}
				if i < len(r.defaults) {
					if problem := sameDefault(f, r.defaults[i]); problem != "" {
						t.Errorf("%s: docs/configuration.md says %s defaults to %q; %s", name, v, r.defaults[i], problem)
					}
				}
			}
		}
		for v := range fields {
			if !documented[v] {
				t.Errorf("%s reads %s, which docs/configuration.md's ### %s does not name", name, v, name)
			}
		}
	}
}

// docRow is a row of a configuration table: the variables its first cell
// names, and the values in code quotes its second gives, in order.
type docRow struct{ names, defaults []string }

var (
	docVar   = regexp.MustCompile("`([A-Z][A-Z0-9_]+)`")
	docQuote = regexp.MustCompile("`([^`]*)`")
)

// docSections are the tables' rows under each ### heading.
func docSections(doc string) map[string][]docRow {
	out := map[string][]docRow{}
	section := ""
	for _, line := range strings.Split(doc, "\n") {
		if h, ok := strings.CutPrefix(line, "### "); ok {
			section = strings.TrimSpace(h)
			continue
		}
		if strings.HasPrefix(line, "## ") {
			section = ""
		}
		if section == "" || !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.ReplaceAll(line, `\|`, "\x00"), "|")
		if len(cells) < 3 {
			continue
		}
		var r docRow
		for _, m := range docVar.FindAllStringSubmatch(cells[1], -1) {
			r.names = append(r.names, m[1])
		}
		for _, m := range docQuote.FindAllStringSubmatch(strings.ReplaceAll(cells[2], "\x00", "|"), -1) {
			r.defaults = append(r.defaults, m[1])
		}
		out[section] = append(out[section], r)
	}
	return out
}

// envFields are a configuration's fields by the variable each is read
// from, through the structs it holds.
func envFields(v reflect.Value) map[string]reflect.Value {
	out := map[string]reflect.Value{}
	for i := range v.NumField() {
		f, sf := v.Field(i), v.Type().Field(i)
		if name, _, _ := strings.Cut(sf.Tag.Get("env"), ","); name != "" {
			out[name] = f
			continue
		}
		if f.Kind() == reflect.Struct && sf.IsExported() {
			for k, g := range envFields(f) {
				out[k] = g
			}
		}
	}
	return out
}

// sameDefault says how doc, read as f's variable would be, differs from
// f's value ("" when it does not). A value other than the variable's kind
// (a variable's name, for a default taken from another) is not compared.
func sameDefault(f reflect.Value, doc string) string {
	if docVar.MatchString("`" + doc + "`") {
		return ""
	}
	got := fmt.Sprint(f.Interface())
	if s, ok := f.Interface().(fmt.Stringer); ok {
		got = s.String()
	}
	// A type that reads its own text (a log level, the retry waits) reads
	// the doc's.
	if u, ok := reflect.New(f.Type()).Interface().(encoding.TextUnmarshaler); ok {
		if err := u.UnmarshalText([]byte(doc)); err != nil || !reflect.DeepEqual(reflect.ValueOf(u).Elem().Interface(), f.Interface()) {
			return "the service starts with " + got
		}
		return ""
	}
	switch {
	case f.Type() == reflect.TypeOf(time.Duration(0)):
		d, err := time.ParseDuration(doc)
		if err != nil || d != time.Duration(f.Int()) {
			return "the service starts with " + got
		}
	case f.Kind() >= reflect.Int && f.Kind() <= reflect.Int64:
		n, err := strconv.ParseInt(doc, 10, 64)
		if err != nil || n != f.Int() {
			return "the service starts with " + got
		}
	case f.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(doc)
		if err != nil || b != f.Bool() {
			return "the service starts with " + got
		}
	default:
		if !strings.EqualFold(got, doc) {
			return "the service starts with " + got
		}
	}
	return ""
}
