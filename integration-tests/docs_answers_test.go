package integration

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// A document's command block is read as steps: comment lines, then the
// commands they speak of. What a step's comment writes of the answer is
// checked against what its commands print: FOLIO's codes
// (ITEM_LIMIT_PATRON_GROUP_LOAN_TYPE), every text in double quotes (a
// quote that ends in "..." or "…" stands for its beginning) and, where the
// commands print HTTP statuses (curl -i or -w), the statuses it names.
// Texts a comment quotes that are not an answer go in other quotes.

// docStep is one step of a block: its comment and its commands.
type docStep struct {
	comment  string
	commands string
}

var (
	docCode   = regexp.MustCompile(`\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b`)
	docQuote  = regexp.MustCompile(`"([^"]+)"`)
	docStatus = regexp.MustCompile(`(?:^|[^\w-])([1-5][0-9][0-9])s?\b`)
	docMarker = regexp.MustCompile(`(?m)^@@step (\d+)@@\n`)
)

// docSteps splits a block into its steps; commands before the first
// comment are a step with no comment.
func docSteps(block string) []docStep {
	var steps []docStep
	inComment := false
	for _, line := range strings.Split(strings.TrimRight(block, "\n"), "\n") {
		isComment := strings.HasPrefix(strings.TrimSpace(line), "#")
		if len(steps) == 0 || isComment && !inComment {
			steps = append(steps, docStep{})
		}
		s := &steps[len(steps)-1]
		if isComment {
			s.comment += strings.TrimPrefix(strings.TrimSpace(line), "#") + "\n"
		} else {
			s.commands += line + "\n"
		}
		inComment = isComment
	}
	return steps
}

// expected is what a step's comment says its commands print.
func (s docStep) expected() []string {
	var out []string
	out = append(out, docCode.FindAllString(s.comment, -1)...)
	for _, m := range docQuote.FindAllStringSubmatch(s.comment, -1) {
		q := strings.TrimSpace(strings.TrimSuffix(strings.TrimSuffix(m[1], "..."), "…"))
		if q != "" {
			out = append(out, q)
		}
	}
	if regexp.MustCompile(`curl [^\n]*(-i|-w) `).MatchString(s.commands) {
		for _, m := range docStatus.FindAllStringSubmatch(s.comment, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// script is the block as one bash script that marks each step's start in
// the output.
func stepsScript(steps []docStep) string {
	var b strings.Builder
	for i, s := range steps {
		fmt.Fprintf(&b, "printf '\\n@@step %d@@\\n'\n", i)
		for _, line := range strings.Split(strings.TrimSuffix(s.comment, "\n"), "\n") {
			if line != "" {
				b.WriteString("#" + line + "\n")
			}
		}
		b.WriteString(s.commands)
	}
	return b.String()
}

// unanswered runs the script's output against its steps: for each step,
// what its comment writes that its output lacks.
func unanswered(steps []docStep, out string) []string {
	parts := map[int]string{}
	idx := docMarker.FindAllStringSubmatchIndex(out, -1)
	for i, m := range idx {
		var n int
		fmt.Sscan(out[m[2]:m[3]], &n)
		end := len(out)
		if i+1 < len(idx) {
			end = idx[i+1][0]
		}
		parts[n] = out[m[1]:end]
	}
	var missing []string
	for i, s := range steps {
		got, ran := parts[i]
		if !ran {
			missing = append(missing, fmt.Sprintf("step %d did not run:\n%s", i, s.commands))
			continue
		}
		for _, want := range s.expected() {
			if !strings.Contains(got, want) {
				missing = append(missing, fmt.Sprintf("the comment says %q; the commands answered:\n%s%s", want, s.commands, got))
			}
		}
	}
	return missing
}

// withoutMarkers is a script's output as a person would see it.
func withoutMarkers(out string) string {
	return docMarker.ReplaceAllString(out, "")
}

// TestTheDocsCheckerCatchesAWrongAnswer: a step whose comment writes an
// answer its command does not print is reported, code, quote and status
// alike; one that prints what it says is not.
func TestTheDocsCheckerCatchesAWrongAnswer(t *testing.T) {
	t.Parallel()
	block := `X=1
# Says "hello" and HELLO_THERE ...
echo '{"message":"hello there"}' HELLO_THERE
# ... then 201 "Created" (a status printed)
curl -s -o /dev/null -w '%{http_code}\n' file:///nonexistent || true; echo "Created"
# and "goodbye"
echo hello
`
	steps := docSteps(block)
	if len(steps) != 4 {
		t.Fatalf("%d steps, want 4: %q", len(steps), steps)
	}
	cmd := exec.Command("bash", "-c", stepsScript(steps))
	cmd.Env = os.Environ()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	missing := unanswered(steps, string(out))
	if len(missing) != 2 || !strings.Contains(missing[0], `"201"`) || !strings.Contains(missing[1], `"goodbye"`) {
		t.Errorf("the checker reported %d: %q; want the status 201 of step 2 and \"goodbye\" of step 3", len(missing), missing)
	}
	if strings.Contains(withoutMarkers(string(out)), "@@") {
		t.Errorf("markers left in %q", out)
	}
}
