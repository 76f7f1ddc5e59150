module github.com/checkoutlock/config

go 1.26.0

require github.com/caarlos0/env/v10 v10.0.0

require gopkg.in/yaml.v3 v3.0.1
