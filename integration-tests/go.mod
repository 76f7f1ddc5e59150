module github.com/checkoutlock/integration-tests

go 1.26.0
