package httpapi

import (
	"github.com/labstack/echo/v4"

	"github.com/checkoutlock/schemas/answer"
)

// answerJSON is the server's JSON serializer: an answer is encoded whole,
// with its Content-Length, so that serve can send it before the request's
// bookkeeping (see package answer).
type answerJSON struct{ echo.DefaultJSONSerializer }

// Serialize implements echo.JSONSerializer.
func (answerJSON) Serialize(c echo.Context, v any, indent string) error {
	return answer.JSON(c.Response(), v, indent)
}

// sendAnswer sends the answer the handler wrote now, if it is complete,
// rather than when the request's metric, its log line and the release of
// its deadline are done: the client has it that much sooner.
func sendAnswer(c echo.Context) {
	if res := c.Response(); res.Committed {
		answer.Send(res.Writer, res.Status)
	}
}
