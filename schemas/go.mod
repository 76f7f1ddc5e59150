module github.com/checkoutlock/schemas

go 1.26.0

require github.com/santhosh-tekuri/jsonschema/v6 v6.0.3

require (
	github.com/MicahParks/keyfunc/v3 v3.9.1
	github.com/golang-jwt/jwt/v5 v5.3.1
	github.com/hashicorp/golang-lru/v2 v2.0.7
	golang.org/x/text v0.14.0
)

require (
	github.com/MicahParks/jwkset v0.11.4 // indirect
	github.com/google/uuid v1.6.0 // indirect
	golang.org/x/time v0.15.0 // indirect
)
