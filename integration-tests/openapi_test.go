package integration

import (
	"context"
	"net/http"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// TestTheServicesServeTheirOpenAPIDescription: each service answers
// GET /_/openapi.json, openly, with the description the route table
// generates, and kin-openapi loads it as a valid OpenAPI 3.1 document
// whose every reference resolves.
func TestTheServicesServeTheirOpenAPIDescription(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{})
	for _, s := range []struct {
		service string
		p       *harness.Process
	}{{schemas.ServiceCirculation, c.Circulations[0]}, {schemas.ServiceStorage, c.Storage}} {
		res := c.DoWith(s.p, "GET", schemas.OpenAPIPath, nil, nil).Want(t, http.StatusOK)
		if string(res.Body) != string(schemas.OpenAPI(s.service)) {
			t.Errorf("%s serves another description than the route table's", s.service)
		}
		loader := openapi3.NewLoader()
		doc, err := loader.LoadFromData(res.Body)
		if err != nil {
			t.Fatalf("%s's description: %v", s.service, err)
		}
		if !doc.IsOpenAPI31OrLater() {
			t.Errorf("%s's description is OpenAPI %s, want 3.1", s.service, doc.OpenAPI)
		}
		if err := doc.Validate(context.Background()); err != nil {
			t.Errorf("%s's description is not valid OpenAPI: %v", s.service, err)
		}
		if n := len(doc.Paths.Map()); n == 0 {
			t.Errorf("%s's description has no paths", s.service)
		}
	}
}
