package conf

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// resolveSecrets fills Admin.Password and every Cluster.Password from
// whichever of password, password_env or password_file is set. Relative
// password files are read from dir ("" for the working directory). It
// returns one error per problem.
func (c *Config) resolveSecrets(dir string) []error {
	var errs []error
	if err := resolveSecret("admin.", &c.Admin.Password, c.Admin.PasswordEnv, c.Admin.PasswordFile, dir); err != nil {
		errs = append(errs, err)
	}
	if err := resolveSecret("proxy.metrics_", &c.Proxy.MetricsPassword, c.Proxy.MetricsPasswordEnv, c.Proxy.MetricsPasswordFile, dir); err != nil {
		errs = append(errs, err)
	}
	if err := resolveSecret("auth.service_", &c.Auth.ServicePassword, c.Auth.ServicePasswordEnv, c.Auth.ServicePasswordFile, dir); err != nil {
		errs = append(errs, err)
	}
	for i := range c.Clusters {
		cl := &c.Clusters[i]
		if err := resolveSecret("", &cl.Password, cl.PasswordEnv, cl.PasswordFile, dir); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", clusterLabel(i, cl.Name), err))
		}
	}
	return errs
}

// resolveSecret sets *password from env or file when one of them is set. At
// most one of *password, env and file may be set; none at all leaves an empty
// password. Keys in errors are prefixed with prefix.
func resolveSecret(prefix string, password *string, env, file, dir string) error {
	var set []string
	if *password != "" {
		set = append(set, prefix+"password")
	}
	if env != "" {
		set = append(set, prefix+"password_env")
	}
	if file != "" {
		set = append(set, prefix+"password_file")
	}
	if len(set) > 1 {
		both := "are both set"
		if len(set) > 2 {
			both = "are all set"
		}
		return fmt.Errorf("%s %s; set at most one of them", joinAnd(set), both)
	}
	switch {
	case env != "":
		v, ok := os.LookupEnv(env)
		if !ok {
			return fmt.Errorf("%spassword_env: environment variable %q is not set", prefix, env)
		}
		*password = v
	case file != "":
		if dir != "" && !filepath.IsAbs(file) {
			file = filepath.Join(dir, file)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("%spassword_file: %w", prefix, err)
		}
		*password = strings.TrimRight(string(b), "\r\n")
	}
	return nil
}

// joinAnd joins words as "a", "a and b" or "a, b and c".
func joinAnd(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}
