package conf

import (
	"strings"
	"testing"
)

// TestDescribeAuthAndLogs: the [auth] keys of grants enforcement and the
// slow-query log's keys are shown; the service account's password only by
// where it comes from.
func TestDescribeAuthAndLogs(t *testing.T) {
	const secret = "svc-s3cret-value"
	t.Setenv("SLUICE_CONF_TEST_SERVICE", secret)
	for _, c := range []struct {
		name, doc string
		want      []string
	}{
		{"defaults", base, []string{
			"  slow_query_threshold 1s, log_sql false\n",
			"auth: mysql, auth server 127.0.0.1:3310\n" +
				"  enforce_grants true, grants_ttl 30s, mirror_schema false, proxy_protocol off\n" +
				"  service_user none: grants are read only at login\n",
		}},
		{"all set", `
[proxy]
slow_query_threshold = "250ms"
log_sql = true
[auth]
address = "127.0.0.1:3310"
grants_ttl = "5s"
mirror_schema = true
proxy_protocol = true
proxy_protocol_version = 1
service_user = "sluice_auth"
service_password = "` + secret + `"
` + cluster("main", "127.0.0.1:3306"), []string{
			"  slow_query_threshold 250ms, log_sql true\n",
			"  enforce_grants true, grants_ttl 5s, mirror_schema true, proxy_protocol on, proxy_protocol_version 1\n",
			"  service_user \"sluice_auth\", password set in the file\n",
		}},
		{"off, password from env", `
[proxy]
slow_query_threshold = "0s"
[auth]
address = "127.0.0.1:3310"
enforce_grants = false
proxy_protocol = true
service_user = "sluice_auth"
service_password_env = "SLUICE_CONF_TEST_SERVICE"
` + cluster("main", "127.0.0.1:3306"), []string{
			"  slow_query_threshold off, log_sql false\n",
			"  enforce_grants false, grants_ttl 30s, mirror_schema false, proxy_protocol on, proxy_protocol_version 2\n" +
				"  enforce_grants false: every logged-in user may do what the clusters' service accounts may\n",
			"  service_user \"sluice_auth\", password from env SLUICE_CONF_TEST_SERVICE\n",
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := mustParse(t, c.doc)
			got := cfg.Describe()
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("Describe lacks %q:\n%s", w, got)
				}
			}
			if strings.Contains(got, secret) {
				t.Errorf("Describe shows the service password:\n%s", got)
			}
			if cfg.Auth.ServiceUser != "" && cfg.Auth.ServicePassword != secret {
				t.Fatalf("the service password was not resolved: %q", cfg.Auth.ServicePassword)
			}
		})
	}
}

// TestDescribeStaticGrants: a static user's grants are counted, never
// printed (a line copied from SHOW GRANTS may hold a hash).
func TestDescribeStaticGrants(t *testing.T) {
	const hash = "*14E65567ABDB5135D0CFD9A70B3032C179A49EE7"
	c := mustParse(t, `
[auth]
backend = "static"
[[auth.user]]
name = "app"
password_hash = "`+hash+`"
grants = ["GRANT SELECT ON shop.* TO CURRENT_USER", "GRANT USAGE ON *.* TO CURRENT_USER IDENTIFIED BY PASSWORD 'x`+hash[1:]+`'"]
[[auth.user]]
name = "ro"
password_hash = "`+hash+`"
`+cluster("main", "127.0.0.1:3306"))
	got := c.Describe()
	want := "auth: static, 2 user(s): \"app\", \"ro\"\n" +
		"  enforce_grants true\n" +
		"  user \"app\": 2 grant(s)\n" +
		"  user \"ro\": no grants\n"
	if !strings.Contains(got, want) {
		t.Errorf("Describe lacks %q:\n%s", want, got)
	}
	if strings.Contains(got, hash[1:]) || strings.Contains(got, "GRANT") {
		t.Errorf("Describe shows a grant or a hash:\n%s", got)
	}
}
