module github.com/checkoutlock/config

go 1.26.0

require github.com/caarlos0/env/v10 v10.0.0

require gopkg.in/yaml.v3 v3.0.1

require (
	github.com/go-json-experiment/json v1.27.2 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/kr/pretty v0.3.1 // indirect
	github.com/rogpeppe/go-internal v1.14.1 // indirect
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3 // indirect
	golang.org/x/text v0.42.0 // indirect
	gopkg.in/check.v1 v1.0.0-20201130134442-10cb98267c6c // indirect
)

require github.com/checkoutlock/schemas v0.0.0

replace github.com/checkoutlock/schemas => ../schemas
