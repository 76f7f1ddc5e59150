module github.com/checkoutlock/circulation

go 1.26.0
