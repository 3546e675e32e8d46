package conf

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ErrSecret is what an error about a secret that cannot be read matches
// with errors.Is: a *_env key naming an environment variable that is not
// set, or a *_file key naming a file that cannot be read.
var ErrSecret = errors.New("secret cannot be read")

// secretError is a secret that cannot be read. Its text names the key and
// the variable or file; it matches ErrSecret and unwraps to the cause.
type secretError struct {
	msg   string
	cause error
}

func (e *secretError) Error() string { return e.msg }

func (e *secretError) Unwrap() []error {
	if e.cause == nil {
		return []error{ErrSecret}
	}
	return []error{ErrSecret, e.cause}
}

// secretSource says where secrets are read from: relative password files
// from dir ("" for the working directory). With skip set they are not read
// at all, for linting a file whose secrets exist only where it is deployed;
// keys that contradict each other are still reported.
type secretSource struct {
	dir  string
	skip bool
}

// resolveSecrets fills Admin.Password and every Cluster.Password from
// whichever of password, password_env or password_file is set. It returns
// one error per problem.
func (c *Config) resolveSecrets(src secretSource) []error {
	var errs []error
	if err := resolveSecret("admin.", &c.Admin.Password, c.Admin.PasswordEnv, c.Admin.PasswordFile, src); err != nil {
		errs = append(errs, err)
	}
	if err := resolveSecret("proxy.metrics_", &c.Proxy.MetricsPassword, c.Proxy.MetricsPasswordEnv, c.Proxy.MetricsPasswordFile, src); err != nil {
		errs = append(errs, err)
	}
	if err := resolveSecret("auth.service_", &c.Auth.ServicePassword, c.Auth.ServicePasswordEnv, c.Auth.ServicePasswordFile, src); err != nil {
		errs = append(errs, err)
	}
	if err := c.resolveFleetSecret(src); err != nil {
		errs = append(errs, err)
	}
	for i := range c.Clusters {
		cl := &c.Clusters[i]
		if err := resolveSecret("", &cl.Password, cl.PasswordEnv, cl.PasswordFile, src); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", clusterLabel(i, cl.Name), err))
		}
	}
	return errs
}

// resolveSecret sets *password from env or file when one of them is set. At
// most one of *password, env and file may be set; none at all leaves an empty
// password. Keys in errors are prefixed with prefix.
func resolveSecret(prefix string, password *string, env, file string, src secretSource) error {
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
	case src.skip:
	case env != "":
		v, ok := os.LookupEnv(env)
		if !ok {
			return &secretError{msg: fmt.Sprintf("%spassword_env: environment variable %q is not set", prefix, env)}
		}
		*password = v
	case file != "":
		if src.dir != "" && !filepath.IsAbs(file) {
			file = filepath.Join(src.dir, file)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return &secretError{msg: fmt.Sprintf("%spassword_file: %v", prefix, err), cause: err}
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
