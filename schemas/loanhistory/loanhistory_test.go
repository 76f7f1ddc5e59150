package loanhistory

import (
	"testing"
	"time"
)

// TestDecodeReadsFOLIOsLoanHistory: FOLIO's loan_history values as its
// settings page writes them, and the values storage refuses, each naming
// its field.
func TestDecodeReadsFOLIOsLoanHistory(t *testing.T) {
	for _, c := range []struct {
		value string
		want  Settings
		field string
	}{
		{`{}`, Defaults, ""},
		{`{"closingType":{"loan":"never","feeFine":"never"},"treatEnabled":false}`, Settings{Closing: Never}, ""},
		{`{"closingType":{"loan":"immediately"}}`, Settings{Closing: Immediately}, ""},
		{`{"closingType":{"loan":"interval","feeFine":"interval"},"loan":{"duration":3,"intervalId":"Days"},"feeFine":{"duration":1,"intervalId":"Weeks"},"treatEnabled":true,"loanExceptions":[]}`,
			Settings{Closing: Interval, After: 72 * time.Hour}, ""},
		{`{"closingType":{"loan":"interval"},"loan":{"duration":2,"intervalId":"Months"}}`, Settings{Closing: Interval, After: 60 * 24 * time.Hour}, ""},
		{`{"closingType":{"loan":"sometimes"}}`, Settings{}, "closingType.loan"},
		{`{"closingType":{"loan":"interval"}}`, Settings{}, "loan.duration"},
		{`{"closingType":{"loan":"interval"},"loan":{"duration":0,"intervalId":"Days"}}`, Settings{}, "loan.duration"},
		{`{"closingType":{"loan":"interval"},"loan":{"duration":1,"intervalId":"Fortnights"}}`, Settings{}, "loan.intervalId"},
		{`{"closingType":{"loan":"interval"},"loan":{"duration":100000,"intervalId":"Days"}}`, Settings{}, "loan.duration"},
		{`[1]`, Settings{}, ""},
	} {
		got, fe := Decode([]byte(c.value))
		switch {
		case c.field == "" && c.value == `[1]`:
			if fe == nil {
				t.Errorf("%s: read as %+v, want refused", c.value, got)
			}
		case c.field != "":
			if fe == nil || fe.Field != c.field {
				t.Errorf("%s: %+v %v, want refused naming %s", c.value, got, fe, c.field)
			}
		case fe != nil || got != c.want:
			t.Errorf("%s: %+v %v, want %+v", c.value, got, fe, c.want)
		}
	}
}
