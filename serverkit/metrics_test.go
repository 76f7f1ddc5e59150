package serverkit

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
)

// TestInventedMethodsShareOneMetricLabel: any token is a valid HTTP method,
// and each label value is a series kept for ever; methods HTTP does not
// define are all counted as OTHER, and the series resolved once for each
// request are as bounded as the series.
func TestInventedMethodsShareOneMetricLabel(t *testing.T) {
	t.Parallel()
	s, _, _, _ := newServer(t, func(c echo.Context) error { return c.NoContent(http.StatusNoContent) })
	s.observe = s.metrics.observe
	for i := range 2000 {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(fmt.Sprintf("INVENTED%d", i), "/groups/7", nil))
		if rec.Code != http.StatusMethodNotAllowed {
			t.Fatalf("method INVENTED%d: status %d, want 405", i, rec.Code)
		}
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	methods := map[string]bool{}
	for _, line := range strings.Split(string(body), "\n") {
		if i := strings.Index(line, `method="`); strings.HasPrefix(line, "http_request_duration_seconds_count") && i >= 0 {
			rest := line[i+len(`method="`):]
			methods[rest[:strings.Index(rest, `"`)]] = true
		}
	}
	if methods["INVENTED0"] || !methods["OTHER"] {
		t.Errorf("method labels %v, want OTHER and no invented method", methods)
	}
	series := 0
	s.metrics.requestSeries.Range(func(any, any) bool { series++; return true })
	if series == 0 || series > 2 {
		t.Errorf("%d request series kept after 2000 invented methods, want one for each series made", series)
	}
}
