module github.com/checkoutlock/migrations

go 1.26.0
