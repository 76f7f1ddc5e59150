module github.com/checkoutlock/schemas

go 1.26.0

require github.com/santhosh-tekuri/jsonschema/v6 v6.0.3

require (
	github.com/google/uuid v1.6.0
	golang.org/x/text v0.42.0
)

require github.com/go-json-experiment/json v1.27.2
