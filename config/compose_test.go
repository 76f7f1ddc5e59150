package config

import (
	"bufio"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// readEnvFile reads a KEY=value file as docker-compose does (no quoting).
func readEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		env[k] = v
	}
	return env
}

// TestComposeIsSecureByDefault reads docker-compose.yml: only circulation
// is published on every interface (storage on 127.0.0.1 alone), both
// services run in jwt mode with the key from config/auth.env, the
// configuration each gets is valid, and the SIP2 door is given longer
// than its SHUTDOWN_TIMEOUT to stop (its kiosks logged out) before it is
// killed.
func TestComposeIsSecureByDefault(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			EnvFile         []string `yaml:"env_file"`
			Ports           []string `yaml:"ports"`
			Volumes         []string `yaml:"volumes"`
			StopGracePeriod string   `yaml:"stop_grace_period"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(b, &compose); err != nil {
		t.Fatal(err)
	}
	// merged is a service's environment, with the paths of the files
	// mounted into its container (the module keys) as seen from here.
	merged := func(files, volumes []string) map[string]string {
		env := map[string]string{}
		for _, f := range files {
			for k, v := range readEnvFile(t, "../"+f) {
				env[k] = v
			}
		}
		for k, v := range env {
			for _, vol := range volumes {
				parts := strings.Split(vol, ":")
				if len(parts) >= 2 {
					v = strings.ReplaceAll(v, parts[1], "../"+strings.TrimPrefix(parts[0], "./"))
				}
			}
			env[k] = v
		}
		return env
	}
	for name, svc := range compose.Services {
		for _, p := range svc.Ports {
			circulation := strings.HasPrefix(name, "circulation-") && name != "circulation-storage"
			if !circulation && !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("%s publishes %s on every interface", name, p)
			}
		}
		switch {
		case name == "circulation-storage":
			if !slices.Contains(svc.EnvFile, "config/auth.env") {
				t.Errorf("%s does not take config/auth.env", name)
			}
			cfg, err := LoadStorage(merged(svc.EnvFile, svc.Volumes))
			if err != nil {
				t.Errorf("%s: %v", name, err)
			} else if _, ok := compose.Services["nats"]; !ok || cfg.NATSURL != "nats://nats:4222" {
				t.Errorf("%s publishes its events to %q; the compose file's broker is nats:4222", name, cfg.NATSURL)
			} else if _, ok := compose.Services["mailpit"]; !ok || cfg.NoticeSMTPAddr != "mailpit:1025" {
				t.Errorf("%s sends its notices to %q; the compose file's mailbox is mailpit:1025", name, cfg.NoticeSMTPAddr)
			}
		case name == "sip2":
			cfg, err := LoadSIP2(merged(svc.EnvFile, svc.Volumes))
			if err != nil {
				t.Errorf("%s: %v", name, err)
				break
			}
			// Without stop_grace_period, docker compose kills after 10 s.
			if grace, err := time.ParseDuration(svc.StopGracePeriod); err != nil || grace <= cfg.ShutdownTimeout {
				t.Errorf("%s: stop_grace_period %q, want longer than its SHUTDOWN_TIMEOUT (%s), or it is killed before its kiosks are logged out",
					name, svc.StopGracePeriod, cfg.ShutdownTimeout)
			}
		case strings.HasPrefix(name, "circulation-"):
			if !slices.Contains(svc.EnvFile, "config/auth.env") {
				t.Errorf("%s does not take config/auth.env", name)
			}
			if _, err := LoadCirculation(merged(svc.EnvFile, svc.Volumes)); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
	if mode := readEnvFile(t, "../config/auth.env")["AUTH_MODE"]; mode != "jwt" {
		t.Errorf("config/auth.env sets AUTH_MODE=%q, want jwt", mode)
	}
}
