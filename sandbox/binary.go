package sandbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// flavor is the server family; SQL for users, replication and status differs between them.
type flavor int

const (
	flavorMariaDB flavor = iota
	flavorMySQL
)

func (f flavor) String() string {
	if f == flavorMySQL {
		return "mysql"
	}
	return "mariadb"
}

// serverBinary describes the server executable a topology runs. It is immutable once built.
type serverBinary struct {
	path    string
	flavor  flavor
	version string // first line of `--version`
}

// templateFormat changes whenever the way a template datadir is initialised changes, so that a
// cached template built by an older sluice is not reused.
const templateFormat = "3"

// innodbLogFileSize is used both when the template is initialised and when servers start, so the
// redo log never needs resizing. 16M keeps the template small (it is copied per instance) and
// still takes 30 MB BLOB rows.
const innodbLogFileSize = "16M"

// FindServerBinary returns the path of the database server to run: mariadbd, else mysqld,
// looked up in PATH and then in /usr/sbin. It returns an error naming the places searched when
// neither exists.
func FindServerBinary() (string, error) {
	var tried []string
	for _, name := range []string{"mariadbd", "mysqld"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
		p := filepath.Join("/usr/sbin", name)
		tried = append(tried, name+" in PATH", p)
		if isExecutable(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("sandbox: no MariaDB or MySQL server binary found (looked for %s); install mariadb-server", strings.Join(tried, ", "))
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

var (
	binaryMu    sync.Mutex
	binaryCache = map[string]*serverBinary{}
)

// findBinary locates the server and learns its flavor and version once per process.
func findBinary(ctx context.Context) (*serverBinary, error) {
	path, err := FindServerBinary()
	if err != nil {
		return nil, err
	}
	binaryMu.Lock()
	defer binaryMu.Unlock()
	if b, ok := binaryCache[path]; ok {
		return b, nil
	}
	vctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(vctx, path, "--no-defaults", "--version").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("sandbox: %s --version: %w: %s", path, err, bytes.TrimSpace(out))
	}
	version := strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	b := &serverBinary{path: path, flavor: flavorMySQL, version: version}
	if strings.Contains(strings.ToLower(version), "mariadb") {
		b.flavor = flavorMariaDB
	}
	binaryCache[path] = b
	return b, nil
}

// findInstallDB returns the MariaDB datadir initialiser, preferring the one next to the server.
func findInstallDB(server string) (string, error) {
	dir := filepath.Dir(server)
	candidates := []string{
		filepath.Join(dir, "mariadb-install-db"),
		filepath.Join(filepath.Dir(dir), "bin", "mariadb-install-db"),
		filepath.Join(filepath.Dir(dir), "scripts", "mariadb-install-db"),
		filepath.Join(dir, "mysql_install_db"),
		filepath.Join(filepath.Dir(dir), "bin", "mysql_install_db"),
	}
	for _, c := range candidates {
		if isExecutable(c) {
			return c, nil
		}
	}
	for _, name := range []string{"mariadb-install-db", "mysql_install_db"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("sandbox: mariadb-install-db not found near %s or in PATH", server)
}

// templateKey identifies a template by everything that could make it incompatible.
func (b *serverBinary) templateKey() string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s", templateFormat, b.path, b.version, innodbLogFileSize)
	if fi, err := os.Stat(b.path); err == nil {
		fmt.Fprintf(h, "\x00%d\x00%d", fi.Size(), fi.ModTime().UnixNano())
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

const templateMarker = "sluice-template-ok"

var (
	templateMu    sync.Mutex
	templateCache = map[string]string{}
)

// templateDir returns a freshly initialised datadir to copy instances from. It is built once per
// server binary into the user cache dir (~/.cache/sluice-sandbox) and shared by all processes:
// each builder initialises into a private directory and renames it into place, so concurrent
// test binaries never see a half-built template. If the cache dir is unusable the template is
// built under fallbackDir instead.
func templateDir(ctx context.Context, b *serverBinary, fallbackDir string, logf func(string, ...any)) (string, error) {
	key := b.flavor.String() + "-" + b.templateKey()
	templateMu.Lock()
	defer templateMu.Unlock()
	if d, ok := templateCache[key]; ok && fileExists(filepath.Join(d, templateMarker)) {
		return d, nil
	}
	if cache, err := os.UserCacheDir(); err == nil {
		parent := filepath.Join(cache, "sluice-sandbox")
		final := filepath.Join(parent, "template-"+key)
		if fileExists(filepath.Join(final, templateMarker)) {
			templateCache[key] = final
			return final, nil
		}
		if err := os.MkdirAll(parent, 0o755); err == nil {
			d, err := buildTemplate(ctx, b, parent, final, logf)
			if err == nil {
				templateCache[key] = d
				return d, nil
			}
			if ctx.Err() != nil {
				return "", err
			}
			logf("sandbox: template in cache dir failed (%v); building under %s", err, fallbackDir)
		}
	}
	// Not cached process-wide: fallbackDir belongs to one topology and goes away with it.
	return buildTemplate(ctx, b, fallbackDir, filepath.Join(fallbackDir, "template"), logf)
}

// buildTemplate initialises a datadir in a temp dir under parent and renames it to final.
func buildTemplate(ctx context.Context, b *serverBinary, parent, final string, logf func(string, ...any)) (string, error) {
	start := time.Now()
	tmp, err := os.MkdirTemp(parent, "building-*")
	if err != nil {
		return "", fmt.Errorf("sandbox: template: %w", err)
	}
	defer os.RemoveAll(tmp) // no-op once renamed
	data := filepath.Join(tmp, "data")
	var cmd *exec.Cmd
	switch b.flavor {
	case flavorMariaDB:
		installDB, err := findInstallDB(b.path)
		if err != nil {
			return "", err
		}
		cmd = exec.CommandContext(ctx, installDB,
			"--no-defaults",
			"--user=root",
			"--datadir="+data,
			"--auth-root-authentication-method=normal",
			"--skip-test-db",
			"--innodb-log-file-size="+innodbLogFileSize,
		)
	default:
		cmd = exec.CommandContext(ctx, b.path,
			"--no-defaults",
			"--initialize-insecure",
			"--user=root",
			"--datadir="+data,
			"--log-error="+filepath.Join(tmp, "init.log"),
			"--loose-innodb-redo-log-capacity=67108864",
		)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		tail := tailFile(filepath.Join(tmp, "init.log"), 0, 20)
		return "", fmt.Errorf("sandbox: initialising template datadir with %s: %w\n%s%s", cmd.Path, err, lastLines(string(out), 20), tail)
	}
	if err := os.WriteFile(filepath.Join(data, templateMarker), []byte(b.version+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("sandbox: template: %w", err)
	}
	if err := os.Rename(data, final); err != nil {
		// Another process won the race: use its template.
		if fileExists(filepath.Join(final, templateMarker)) {
			return final, nil
		}
		return "", fmt.Errorf("sandbox: template: %w", err)
	}
	logf("sandbox: initialised template datadir %s in %v", final, time.Since(start).Round(time.Millisecond))
	return final, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// copyDir copies a datadir tree (regular files and directories only), skipping the template
// marker.
func copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o750)
		case rel == templateMarker:
			return nil
		case d.Type().IsRegular():
			return copyFile(p, target)
		default:
			return nil
		}
	})
}

func copyFile(src, dst string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o660)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}()
	_, err = out.ReadFrom(in) // copy_file_range on Linux
	return err
}

// tailFile returns the last n lines of the file written after offset, or "" if none.
func tailFile(path string, offset int64, n int) string {
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) <= offset {
		return ""
	}
	return lastLines(string(b[offset:]), n)
}

func lastLines(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return ""
	}
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n") + "\n"
}

var errPortInUse = errors.New("port already in use")
